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

    /// Stops the child (closes its stdin, then SIGKILL) and waits for it.
    public func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
