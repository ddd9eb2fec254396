import TrailbookLoop

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// A named piece of work a worker process can do: decode a file, analyse pixels. Runs in the worker, never in
/// the daemon, and never writes to the stores: it returns its result, and the daemon applies it.
public protocol WorkerTask: Sendable {
    /// The name requests use (`"photo.inspect"`).
    static var name: String { get }
    /// Does the work for one request.
    ///
    /// - Returns: the result, sent to the daemon as JSON.
    /// - Throws: `JobError` with a stable code for a failure the caller should see (a bad file); other errors
    ///   are reported as code `worker_error`.
    func perform(_ payload: JSONValue) throws -> JSONValue
}

/// The tasks a worker process knows, keyed by name; the `worker` subcommand dispatches on it.
public struct WorkerTaskTable: Sendable {
    private(set) var handlers: [String: @Sendable (JSONValue) throws -> JSONValue] = [:]

    /// An empty table (see `builtIn` for one with the engine's own tasks).
    public init() {}

    /// Adds (or replaces) `task` under its name.
    public mutating func register<T: WorkerTask>(_ task: T) {
        handlers[T.name] = { try task.perform($0) }
    }

    /// Adds every task of `other` (replacing one of the same name).
    public mutating func merge(_ other: WorkerTaskTable) {
        handlers.merge(other.handlers) { _, new in new }
    }

    /// The names of the registered tasks, sorted.
    public var names: [String] { handlers.keys.sorted() }

    /// The engine's own tasks, used by its tests: `echo` (returns the payload), `test.crash` (aborts),
    /// `test.crash-once` (aborts unless the file at `payload.marker` exists, creating it first, so the retry
    /// succeeds), `test.hang` (never answers), `test.sleep` (answers after `payload.ms` milliseconds),
    /// `test.allocate` (touches `payload.bytes` bytes, to check `RLIMIT_AS`).
    public static var builtIn: WorkerTaskTable {
        var table = WorkerTaskTable()
        table.handlers["echo"] = { $0 }
        table.handlers["test.crash"] = { _ in abort() }
        table.handlers["test.crash-once"] = { payload in
            let marker = payload["marker"]?.stringValue ?? ""
            if access(marker, F_OK) != 0 {
                close(open(marker, O_CREAT | O_WRONLY, 0o600))
                abort()
            }
            return payload
        }
        table.handlers["test.hang"] = { _ in
            while true { sleep(3_600) }
        }
        // A decoder stuck in a loop: burns CPU until RLIMIT_CPU ends the process.
        table.handlers["test.spin"] = { _ in
            var state: UInt64 = 1
            while state != 0 { state = state &* 6_364_136_223_846_793_005 &+ 1 }
            return .number(Double(state))
        }
        // Sleeps `ms` and says which worker slept when (Unix seconds, comparable across processes), so a test
        // can see two requests overlap in two workers without timing the whole run.
        table.handlers["test.sleep"] = { payload in
            let started = Timestamp.now()
            usleep(useconds_t((payload["ms"]?.intValue ?? 0) * 1_000))
            return [
                "ms": payload["ms"] ?? .null, "pid": .number(Double(getpid())), "started": .number(started),
                "ended": .number(Timestamp.now()),
            ]
        }
        table.handlers["test.allocate"] = { payload in
            let count = Int(payload["bytes"]?.intValue ?? 0)
            guard let memory = malloc(count) else {
                throw JobError(code: "out_of_memory", message: "malloc of \(count) bytes failed")
            }
            memset(memory, 1, count)
            free(memory)
            return ["allocated": .number(Double(count))]
        }
        return table
    }
}

/// Limits a worker process sets on itself at start (`setrlimit(2)`).
public struct WorkerLimits: Sendable {
    /// `RLIMIT_AS` in bytes: allocations past it fail (malloc returns NULL, the decoder reports out of memory).
    public var memoryBytes: Int64 = 1 << 30
    /// `RLIMIT_CPU` soft limit in seconds of CPU; the hard limit is 5 s above it.
    public var cpuSeconds: Int = 3_600

    /// The defaults (1 GiB, 3600 s).
    public init() {}
}

/// The worker side of `WorkerPool`: the loop of the hidden `trailbook-jobs worker` subcommand.
public enum WorkerProcess {
    /// Sets `limits`, then answers requests from stdin on stdout, one line each, until stdin ends.
    ///
    /// Blocking and single-threaded on purpose: one request at a time, and an idle worker sleeps in `read(2)`.
    /// - Parameter parent: the daemon's pid (`--parent`); the worker is killed when that process dies, even in
    ///   the middle of a decode, and exits at once if it is already gone. `nil` skips the check.
    /// - Returns: the exit status: 0 when stdin ended (or the parent was gone).
    public static func run(tasks: WorkerTaskTable, limits: WorkerLimits, parent: Int32? = nil) -> Int32 {
        if let parent, !ChildProcess.dieWithParent(parent) { return 0 }
        signal(SIGPIPE, SIG_DFL)
        var memory = rlimit(rlim_cur: rlim_t(limits.memoryBytes), rlim_max: rlim_t(limits.memoryBytes))
        setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &memory)
        var cpu = rlimit(rlim_cur: rlim_t(limits.cpuSeconds), rlim_max: rlim_t(limits.cpuSeconds + 5))
        setrlimit(__rlimit_resource_t(RLIMIT_CPU.rawValue), &cpu)
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            while let newline = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                let reply = handle(line, tasks: tasks)
                guard writeAll(JSONCoding.encode(reply) + [0x0A]) else { return 0 }
            }
            let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return 0 }
            buffer.append(contentsOf: chunk[..<n])
        }
    }

    static func handle(_ line: [UInt8], tasks: WorkerTaskTable) -> JSONValue {
        guard let request = try? JSONCoding.decode(JSONValue.self, from: line) else {
            return ["id": nil, "ok": false, "error": ["code": "bad_request", "message": "not JSON"]]
        }
        let id = request["id"] ?? .null
        let name = request["task"]?.stringValue ?? ""
        guard let handler = tasks.handlers[name] else {
            return [
                "id": id, "ok": false,
                "error": ["code": "unknown_task", "message": .string("no worker task '\(name)'")],
            ]
        }
        do {
            return ["id": id, "ok": true, "result": try handler(request["payload"] ?? .null)]
        } catch let error as JobError {
            return ["id": id, "ok": false, "error": ["code": .string(error.code), "message": .string(error.message)]]
        } catch {
            return ["id": id, "ok": false, "error": ["code": "worker_error", "message": .string("\(error)")]]
        }
    }

    private static func writeAll(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }
}
