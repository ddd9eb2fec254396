import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `watch --expand` on a real folder upload, rate-limited so its files are in flight one after another: under the
/// job, the files on their way (name, bar, percent), never a file already landed; names through
/// the terminal escaping; on a terminal (tmux) and as plain lines (not a terminal).
@Suite(.serialized)
struct WatchExpandEndToEndTests {
    /// A folder `trip/` of a 1-byte file that lands at once and three 384 KiB files, one with an escape sequence in
    /// its name; returns (folder, destination). At 192 KiB/s each large file is in flight for about 2 s.
    static func tree(_ harness: WatchHarness) throws -> (String, String) {
        let source = harness.home + "/trip"
        let destination = harness.home + "/out"
        for folder in [source + "/day1", source + "/day2", destination] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        #expect(FileManager.default.createFile(atPath: source + "/a-tiny.txt", contents: Data([0x41])))
        for name in ["day1/IMG 0001.jpg", "day1/\u{1B}[2Jevil.jpg", "day2/IMG_0002.jpg"] {
            #expect(FileManager.default.createFile(atPath: source + "/" + name, contents: Data(count: 384 << 10)))
        }
        return (source, destination)
    }

    static let options = "--max-rate 192KiB --chunk-size 32KiB"

    /// The percent of a sub-row ("45.2%"), as a number.
    static func percent(_ line: Substring) -> Double? {
        line.split(separator: " ").last { $0.hasSuffix("%") }.flatMap { Double($0.dropLast()) }
    }

    @Test func theScreenListsTheFilesInFlightUnderTheJob() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        let (source, destination) = try Self.tree(harness)
        try harness.startPane(
            "submit upload '\(source)' --to '\(destination)' \(Self.options) --watch --expand", width: 120)
        var seen = Set<String>()
        var screens = 0
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let screen = try harness.capture()
            if screen.contains("WATCH-EXIT=") { break }
            let sub = screen.split(separator: "\n").filter { $0.contains("└") }
            #expect(sub.count <= 8, "bounded:\n\(screen)")
            // Once a file has landed (the 1-byte one lands first), it is no longer listed.
            let landed = !screen.contains(" 0 / 4 files") && screen.contains(" / 4 files")
            for line in sub {
                screens += 1
                if landed { #expect(!line.contains("a-tiny.txt"), "a landed file listed as in flight:\n\(screen)") }
                #expect(line.contains("B/"), "bytes on the sub-row:\n\(screen)")
                let share = try #require(Self.percent(line), "a percent on the sub-row:\n\(screen)")
                #expect(share < 100, "a landed file listed as in flight:\n\(screen)")
                for name in ["IMG 0001.jpg", "\\x1b[2Jevil.jpg", "IMG_0002.jpg"] where line.contains(name) { seen.insert(name) }
            }
            #expect(!screen.contains("\u{1B}"))
            usleep(100_000)
        }
        let end = try harness.waitForScreen("exit") { $0.contains("WATCH-EXIT=") }
        #expect(end.contains("WATCH-EXIT=0"), "\(end)")
        // Each large file was seen in flight in its turn (one of ~2 s each, sampled every 0.1 s), the escaped name
        // as text.
        #expect(seen == ["IMG 0001.jpg", "\\x1b[2Jevil.jpg", "IMG_0002.jpg"], "seen \(seen) on \(screens) sub-rows")
        #expect(FileManager.default.fileExists(atPath: destination + "/day2/IMG_0002.jpg"))
    }

    @Test func plainLinesListTheFilesInFlightToo() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        let (source, destination) = try Self.tree(harness)
        let outputPath = harness.home + "/plain.out"
        let pid = try ChildProcess.spawn(
            harness.binary,
            ["submit", "upload", source, "--to", destination] + Self.options.split(separator: " ").map(String.init)
                + ["--watch", "--expand"],
            environment: harness.environment, output: outputPath)
        var status: Int32 = 0
        let deadline = Date().addingTimeInterval(60)
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Date() > deadline {
                WatchHarness.terminate(pid)
                Issue.record("submit --watch --expand did not end in 60 s")
                break
            }
            usleep(100_000)
        }
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        #expect(status == 0, "\(output)")
        #expect(!output.contains("\u{1B}"))
        let sub = output.split(separator: "\n").filter { $0.contains("└") }
        #expect(!sub.isEmpty, "\(output)")
        for line in sub {
            #expect(line.contains(" upload   └ "), "the job's head on each sub-line: \(line)")
            #expect(line.contains("[") && line.contains("]") && line.contains("B/"), "\(line)")
            #expect((Self.percent(line) ?? 100) < 100, "\(line)")
        }
        #expect(sub.contains { $0.contains("\\x1b[2Jevil.jpg") }, "\(output)")
        #expect(output.contains("-> succeeded"), "\(output)")
    }
}
