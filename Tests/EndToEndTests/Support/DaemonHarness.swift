import Foundation
import TrailbookCLI
import TrailbookEngine

/// The `trailbook-jobs` binary built next to this test bundle (or `$TRAILBOOK_JOBS_BIN`).
enum Binary {
    static let path: String = {
        if let path = ProcessInfo.processInfo.environment["TRAILBOOK_JOBS_BIN"] { return path }
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("trailbook-jobs").path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/trailbook-jobs").path
    }()
}

/// What a finished CLI run printed and returned.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// A scratch directory removed when the test is done with it.
final class TemporaryDirectory {
    let path: String

    init(_ prefix: String = "tbj") {
        // Without the `//` that NSTemporaryDirectory's trailing `/` would make: the CLI records paths without
        // repeated slashes, and tests compare them with this one.
        let template = BytePath(NSTemporaryDirectory()).lexicallyNormalized.description + "/\(prefix)-XXXXXX"
        var bytes = Array(template.utf8CString)
        path = String(cString: mkdtemp(&bytes)!)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ name: String) -> String { path + "/" + name }

    /// The Latin-1 name `caf\xe9.jpg`: not UTF-8.
    static let latin1Name = BytePath(bytes: Array("caf".utf8) + [0xE9] + Array(".jpg".utf8))

    /// Writes `contents` to the file `name` (bytes, UTF-8 or not) in this directory.
    func create(_ name: BytePath, contents: [UInt8]) throws {
        let fd = BytePath.join(BytePath(path), name).withCString { open($0, O_CREAT | O_WRONLY | O_TRUNC, 0o644) }
        guard fd >= 0 else { throw HarnessError("cannot create \(name): errno \(errno)") }
        defer { close(fd) }
        guard contents.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == contents.count else {
            throw HarnessError("cannot write \(name)")
        }
    }
}

/// A real daemon process in a temporary `$TRAILBOOK_JOBS_HOME`, driven as the CLI drives it.
final class DaemonHarness {
    let home: TemporaryDirectory
    let arguments: [String]
    private(set) var process: Process?
    private var logPipe: FileHandle?
    /// `$TRAILBOOK_JOBS_HOME`: `home` unless the test put the state elsewhere (on a small file system of its own).
    let statePath: String
    var logPath: String { home.file("daemon.log") }
    var socketPath: String { statePath + "/daemon.sock" }

    /// Variables added to the daemon's environment (e.g. a service manager's `NOTIFY_SOCKET`, `LD_PRELOAD`).
    let extraEnvironment: [String: String]

    /// A program and its arguments the daemon is started through (it must `exec` the daemon, so the pid is the
    /// daemon's), e.g. `setpriv` to take capabilities away; empty: the daemon is started directly.
    let launcher: [String]

    /// Starts the daemon with `arguments` (after `daemon`) and waits until it answers `ping`. The log stays in
    /// `home`; the state (store, socket) goes to `state` when given.
    init(
        arguments: [String] = [], home: TemporaryDirectory = TemporaryDirectory(), state: String? = nil,
        environment: [String: String] = [:], launcher: [String] = []
    ) throws {
        self.home = home
        self.arguments = arguments
        statePath = state ?? home.path
        extraEnvironment = environment
        self.launcher = launcher
        try start()
    }

    deinit {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Whether the daemon (on its next start) has the test job kinds (`sleep`, …).
    var testKinds = true

    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["TRAILBOOK_JOBS_HOME"] = statePath
        environment["TRAILBOOK_JOBS_TEST_KINDS"] = testKinds ? "1" : nil
        environment["NO_COLOR"] = "1"
        environment.merge(extraEnvironment) { $1 }
        return environment
    }

    var pid: Int32 { process?.processIdentifier ?? -1 }

    /// Starts (or restarts) the daemon and waits up to 10 s for it to answer.
    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: launcher.first ?? Binary.path)
        process.arguments = (launcher.isEmpty ? [] : launcher.dropFirst() + [Binary.path]) + ["daemon"] + arguments
        process.environment = environment
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = log
        try process.run()
        self.process = process
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if (try? request(["op": "ping"]))?["ok"]?.boolValue == true { return }
            if !process.isRunning { break }
            usleep(20_000)
        }
        throw HarnessError("daemon did not start; log:\n" + self.log())
    }

    /// The daemon's stderr so far.
    func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Whether the daemon's log holds `text` within `seconds`. A log line about a transition is written after the
    /// store says so, so a test that has just read the new state from the store (or from another daemon) waits
    /// for the line instead of reading the log at once.
    func logShows(_ text: String, within seconds: Double = 5) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !log().contains(text) {
            if Date() >= deadline { return false }
            usleep(10_000)
        }
        return true
    }

    /// Sends one protocol request on a fresh connection and returns the reply.
    func request(_ request: JSONValue) throws -> JSONValue {
        do {
            return try DaemonClient(socketPath: socketPath).request(request)
        } catch {
            // A connection that breaks after it was made is rare and hard to reproduce: leave what the daemon said
            // in the output. (Not for a refused connect, which `start()` meets while the daemon comes up.)
            guard "\(error)".contains("connection") else { throw error }
            let state = process.map { $0.isRunning ? "running" : "exited \($0.terminationStatus)" } ?? "not started"
            print("harness: request failed (\(error)); daemon \(state); its log ends:\n" + String(log().suffix(3000)))
            throw error
        }
    }

    /// Sends a request that must succeed and returns its `job`.
    func job(_ request: JSONValue) throws -> JSONValue {
        let reply = try self.request(request)
        guard reply["ok"]?.boolValue == true, let job = reply["job"] else {
            throw HarnessError("request failed: \(String(decoding: JSONCoding.encode(reply), as: UTF8.self))")
        }
        return job
    }

    /// `show` of a job.
    func show(_ id: String) throws -> JSONValue { try job(["op": "show", "job": .string(id)]) }

    /// Submits a `sleep` test job.
    func submitSleep(units: Int, unitMilliseconds: Int, stallAfter: Int? = nil, options: JSONValue = [:]) throws -> String {
        var params: [String: JSONValue] = ["units": .number(Double(units)), "unit_ms": .number(Double(unitMilliseconds))]
        if let stallAfter { params["stall_after"] = .number(Double(stallAfter)) }
        return try job(["op": "submit", "kind": "sleep", "params": .object(params), "options": options])["id"]?.stringValue ?? ""
    }

    /// Submits an upload through the CLI (`submit upload ARGUMENTS…`) and returns the new job's id.
    /// - Throws: `HarnessError` with the CLI's stderr if the submit is refused.
    func submitUpload(_ arguments: [String]) throws -> String {
        let result = try cli(["submit", "upload"] + arguments)
        guard result.status == 0 else { throw HarnessError("submit failed (\(result.status)): \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Polls `show` until `condition` holds for the job, or throws after `timeout` seconds.
    @discardableResult
    func waitFor(_ id: String, timeout: Double = 30, _ what: String = "condition", _ condition: (JSONValue) -> Bool) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        var last: JSONValue = .null
        while Date() < deadline {
            last = try show(id)
            if condition(last) { return last }
            usleep(10_000)
        }
        throw HarnessError("timed out waiting for \(what); job: \(String(decoding: JSONCoding.encode(last), as: UTF8.self))")
    }

    /// Waits until the job is in `state`.
    @discardableResult
    func waitForState(_ id: String, _ state: String, timeout: Double = 30) throws -> JSONValue {
        try waitFor(id, timeout: timeout, "state \(state)") { $0["state"]?.stringValue == state }
    }

    /// Runs the CLI with `arguments` against this daemon.
    func cli(_ arguments: [String], input: String? = nil) throws -> CommandResult {
        try DaemonHarness.run(Binary.path, arguments, environment: environment)
    }

    /// Sends `signal` to the daemon and waits for it to exit; returns its status and the seconds it took.
    func stop(signal: Int32 = SIGTERM, timeout: Double = 10) throws -> (status: Int32, seconds: Double) {
        guard let process else { throw HarnessError("daemon not running") }
        let started = Date()
        kill(process.processIdentifier, signal)
        while process.isRunning && Date().timeIntervalSince(started) < timeout { usleep(5_000) }
        guard !process.isRunning else {
            throw HarnessError("daemon did not exit within \(timeout) s; its log ends:\n\(log().suffix(3_000))")
        }
        self.process = nil
        return (process.terminationStatus, Date().timeIntervalSince(started))
    }

    /// `kill -9`: no cleanup runs.
    func crash() throws {
        _ = try stop(signal: SIGKILL)
    }

    /// CPU seconds (user + system) the daemon has used, from /proc/PID/stat.
    func cpuSeconds() throws -> Double {
        try Self.cpuSeconds(pid: pid)
    }

    /// CPU seconds (user + system) process `pid` has used, from /proc/PID/stat.
    static func cpuSeconds(pid: pid_t) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
        let ticks = Double(fields[11])! + Double(fields[12])!
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Runs `executable` with `arguments` and collects its output.
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return CommandResult(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self))
    }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension DaemonHarness {
    /// A new connection to the daemon's socket, as a bare file descriptor (the caller closes it), for tests that
    /// speak to it byte by byte.
    /// - Throws: `HarnessError` if the daemon does not accept it.
    func rawConnection() throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(socketPath.utf8) + [0]) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw HarnessError("cannot connect to \(socketPath): \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// Sends `bytes` as they are on a fresh connection and returns the first reply line, decoded (`nil` if none).
    func rawRequest(_ bytes: [UInt8], replyTimeout: Int = 5) throws -> JSONValue? {
        try rawReplies(bytes, count: 1, replyTimeout: replyTimeout).first
    }

    /// Sends `bytes` as they are on a fresh connection and returns up to `count` reply lines, decoded, in the
    /// order they came (fewer if the daemon stops answering for `replyTimeout` seconds).
    func rawReplies(_ bytes: [UInt8], count: Int, replyTimeout: Int = 5) throws -> [JSONValue] {
        let fd = try rawConnection()
        defer { close(fd) }
        var timeout = timeval(tv_sec: replyTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            sent += n
        }
        var reply: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while reply.count(where: { $0 == 0x0A }) < count {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            reply += chunk[..<n]
        }
        return try reply.split(separator: 0x0A).prefix(count).map { try JSONCoding.decode(JSONValue.self, from: $0) }
    }

    /// Writes `bytes` on `fd` (never raising SIGPIPE); `false` if the daemon closed the connection first.
    @discardableResult
    static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }

    /// Reads reply lines until the daemon closes the connection (or `timeout` seconds pass without a byte).
    static func readLines(_ fd: Int32, timeout: Int = 20) -> [[UInt8]] {
        var time = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            received += chunk[..<n]
        }
        return received.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast().map(Array.init)
    }
}
