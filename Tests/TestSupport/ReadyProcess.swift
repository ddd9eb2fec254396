import Foundation

/// A child process that prints `READY <port>` once it listens (Tests/Support/tus-server/server.py, proxy.py).
///
/// Its stdin is a pipe held open while it runs: the scripts exit when it reaches end of file, so they never outlive
/// the test process, even one that crashes. `stop()` (or deinit) closes it and kills the child with SIGKILL, which
/// works even if the child inherited a blocked SIGTERM.
public final class ReadyProcess: @unchecked Sendable {
    /// Why the child did not start.
    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    public let process = Process()
    /// The TCP port the child listens on (127.0.0.1).
    public let port: Int
    private let output = Pipe()
    private let input = Pipe()

    /// Starts `python script arguments…` and waits up to 20 s for its `READY <port>` line.
    /// - Throws: `StartError` with what the child printed if it never says READY.
    public init(python: String, script: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script] + arguments
        process.standardOutput = output
        process.standardInput = input
        process.standardError = FileHandle.standardError
        try process.run()
        var line = [UInt8]()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let data = output.fileHandleForReading.availableData  // blocks until some output or EOF
            if data.isEmpty { break }
            line += data
            if line.contains(UInt8(ascii: "\n")) { break }
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("READY "), let port = Int(text.dropFirst(6).prefix { $0.isNumber }) else {
            try? input.fileHandleForWriting.close()
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw StartError(description: "\(script) did not start; it printed: \(text)")
        }
        self.port = port
    }

    deinit { stop() }

    /// Writes `line` to the child's stdin and returns the line it answers on stdout (for scripts driven by
    /// commands, such as Tests/Support/tcp-cut/proxy.py). Blocks until the answer; call from one thread at a time.
    /// - Throws: `StartError` if the child closed its stdout instead of answering.
    public func command(_ line: String) throws -> String {
        try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
        var answer = [UInt8]()
        while true {
            // Byte by byte: nothing after the answer's newline may be taken from the pipe.
            guard let byte = try output.fileHandleForReading.read(upToCount: 1), let first = byte.first else {
                throw StartError(description: "the child exited instead of answering \(line)")
            }
            if first == UInt8(ascii: "\n") { return String(decoding: answer, as: UTF8.self) }
            answer.append(first)
        }
    }

    /// Stops the child (closes its stdin, then SIGKILL) and waits for it.
    public func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
