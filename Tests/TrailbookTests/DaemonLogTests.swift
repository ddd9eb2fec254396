import Foundation
import Testing

@testable import TrailbookEngine

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's log on a stderr that cannot take everything at once.
@Suite(.serialized)
struct DaemonLogTests {
    /// A non-blocking stderr whose reader is slow (a pipe to a log collector that drains it in bursts): each line
    /// still arrives, whole and in order. Before, a write that met a full pipe (EAGAIN) dropped the rest of what
    /// was pending, up to a loop turn's lines.
    @Test func aFullNonBlockingStderrLosesNoLine() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let saved = dup(STDERR_FILENO)
        #expect(saved >= 0)
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        dup2(ends[1], STDERR_FILENO)
        close(ends[1])
        // The reader takes 4 KiB every 5 ms: far slower than the writer, always back within the writer's wait.
        let reader = ends[0]
        let collected = Collected()
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(reader, &buffer, buffer.count)
                if count <= 0 { break }
                collected.append(buffer[..<count])
                usleep(5_000)
            }
            collected.finish()
        }
        thread.start()
        let lines = 3_000  // about 230 KiB: several times a pipe's 64 KiB
        for index in 0..<lines { DaemonLog.write("line \(index) " + String(repeating: "x", count: 30)) }
        // Restore stderr; the reader sees the end once the last copy of the write end is gone.
        dup2(saved, STDERR_FILENO)
        close(saved)
        let text = collected.wait()
        close(reader)
        let got = text.split(separator: "\n").compactMap { line in
            line.range(of: " trailbook-jobs: line ").map { Int(line[$0.upperBound...].prefix { $0.isNumber }) ?? -1 }
        }
        #expect(got == Array(0..<lines), "\(got.count) of \(lines) lines, first missing \((0..<lines).first { !got.contains($0) } ?? -1)")
    }
}

/// Bytes a reader thread collects, and a wait for its end.
private final class Collected: @unchecked Sendable {
    private let condition = NSCondition()
    private var bytes: [UInt8] = []
    private var done = false

    func append(_ more: ArraySlice<UInt8>) { condition.withLock { bytes += more } }

    func finish() {
        condition.withLock {
            done = true
            condition.broadcast()
        }
    }

    func wait() -> String {
        condition.withLock {
            while !done { condition.wait() }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}
