import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// Settings of a `WorkerPool`.
public struct WorkerPoolOptions: Sendable {
    /// Worker processes at most (default 2: the build machines have two cores). Spawned lazily, on demand.
    public var workers: Int = 2
    /// The program to run: by default this same binary (`/proc/self/exe`).
    public var executable: String = "/proc/self/exe"
    /// Its arguments: by default the hidden `worker` subcommand.
    public var arguments: [String] = ["worker"]
    /// Default time limit of one request, in seconds (wall clock); past it the worker is killed (`SIGKILL`) and the
    /// request fails with `worker_timeout`. 30 s: a reduced-scale decode of a 50-megapixel JPEG takes under 1 s.
    public var requestTimeoutSeconds: Double = 30
    /// Address-space limit each worker sets on itself (`RLIMIT_AS`), in bytes (default 1 GiB).
    public var memoryLimitBytes: Int64 = 1 << 30
    /// CPU-time limit each worker sets on itself (`RLIMIT_CPU`), in seconds of CPU over the worker's life
    /// (default 3600 s); past it the kernel ends the worker (`SIGXCPU`) and the pool starts a new one.
    public var cpuLimitSeconds: Int = 3_600

    /// The defaults.
    public init() {}
}

/// A pool of worker processes that run named tasks (`WorkerTask`) on JSON payloads, one request at a time per
/// worker, so that decoding untrusted files can crash or hang without taking the daemon down (docs/explanation/design.md,
/// "Execution targets").
///
/// Protocol: NDJSON over the worker's stdin/stdout. The pool writes `{"id": N, "task": NAME, "payload": …}`; the
/// worker answers `{"id": N, "ok": true, "result": …}` or `{"id": N, "ok": false, "error": {"code", "message"}}`.
///
/// Failures, as `JobError` codes given to the request's completion:
/// - `worker_timeout`: no answer within the request's time limit; the worker is killed with `SIGKILL`.
/// - `worker_crashed`: the worker died while working on the request (signal, `RLIMIT_AS`/`RLIMIT_CPU`, exit);
///   the request was already retried once in a fresh worker.
/// - `worker_unavailable`: no worker could be spawned, or the pool is shutting down.
/// - the task's own error codes.
///
/// Workers are spawned when requests wait and none is idle, up to `options.workers`; an idle worker blocks in
/// `read(2)` and costs no CPU. Not `Sendable`: use on its loop's thread only (the daemon's `LoopActor`).
public final class WorkerPool {
    /// The pool's settings.
    public let options: WorkerPoolOptions
    /// The loop that owns the worker processes and pipes.
    public let loop: EventLoop

    /// Counters, for logs and tests.
    public struct Statistics: Sendable, Equatable {
        /// Workers spawned so far.
        public var spawned = 0
        /// Workers that died while working on a request.
        public var crashed = 0
        /// Workers killed for running past a request's time limit.
        public var timedOut = 0
        /// Requests sent again after their worker died.
        public var retried = 0
        /// Requests answered.
        public var completed = 0
    }

    /// Counters since the pool was made.
    public private(set) var statistics = Statistics()

    final class Request {
        let id: Int64
        let task: String
        let payload: JSONValue
        let timeoutSeconds: Double
        var attempts = 0
        /// When the last attempt was sent (`Timestamp.monotonic()`), for "after N s" in messages.
        var sentAt = 0.0
        var completion: ((Result<JSONValue, JobError>) -> Void)?

        init(
            id: Int64, task: String, payload: JSONValue, timeoutSeconds: Double,
            completion: @escaping (Result<JSONValue, JobError>) -> Void
        ) {
            self.id = id
            self.task = task
            self.payload = payload
            self.timeoutSeconds = timeoutSeconds
            self.completion = completion
        }

        func complete(_ result: Result<JSONValue, JobError>) {
            let completion = self.completion
            self.completion = nil
            completion?(result)
        }
    }

    final class Worker {
        let process: ChildProcess
        let timer: LoopTimer
        var buffer: [UInt8] = []
        var current: Request?
        var retired = false

        init(process: ChildProcess, loop: EventLoop) {
            self.process = process
            timer = LoopTimer(loop: loop)
        }
    }

    private var workers: [Worker] = []
    private var queue: [Request] = []
    private var nextID: Int64 = 1
    private var shuttingDown = false
    private var onShutdown: (() -> Void)?

    /// Makes a pool on `loop`; no worker runs until the first request.
    ///
    /// `/proc/self/exe` is resolved here to the binary's real path, so workers show under their own name in `ps`.
    public init(loop: EventLoop, options: WorkerPoolOptions = WorkerPoolOptions()) {
        self.loop = loop
        var options = options
        if options.executable == "/proc/self/exe" {
            var buffer = [CChar](repeating: 0, count: 4_096)
            let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
            if count > 0 {
                options.executable = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
        }
        self.options = options
    }

    /// Workers alive now (idle or busy).
    public var workerCount: Int { workers.count }

    /// Process ids of the workers alive now.
    public var workerPIDs: [Int32] { workers.map(\.process.pid) }

    /// Queues a request; `completion` runs once on the loop thread with the answer or a `JobError`.
    ///
    /// - Parameters:
    ///   - task: the `WorkerTask` name the worker dispatches on.
    ///   - payload: the task's input.
    ///   - timeoutSeconds: this request's time limit in seconds; `nil` uses `options.requestTimeoutSeconds`.
    /// - Returns: a ticket for `abandon(_:)`.
    @discardableResult
    public func submit(
        task: String, payload: JSONValue, timeoutSeconds: Double? = nil,
        completion: @escaping (Result<JSONValue, JobError>) -> Void
    ) -> Int64 {
        loop.assertInLoopThread()
        let request = Request(
            id: nextID, task: task, payload: payload, timeoutSeconds: timeoutSeconds ?? options.requestTimeoutSeconds,
            completion: completion)
        nextID += 1
        guard !shuttingDown else {
            request.complete(
                .failure(JobError(code: "worker_unavailable", message: "the worker pool is shutting down")))
            return request.id
        }
        queue.append(request)
        dispatch()
        return request.id
    }

    /// Runs one request and returns its answer (a wrapper of `submit` for callers that wait).
    ///
    /// - Throws: `JobError` as listed in the type's documentation.
    /// - Parameter isolation: the caller's actor, which must run on the pool's loop; filled in by the compiler.
    public func run(
        task: String, payload: JSONValue, timeoutSeconds: Double? = nil, isolation: isolated (any Actor)? = #isolation
    ) async throws(JobError) -> JSONValue {
        let result = await withCheckedContinuation(isolation: isolation) {
            (continuation: CheckedContinuation<Result<JSONValue, JobError>, Never>) in
            submit(task: task, payload: payload, timeoutSeconds: timeoutSeconds) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Gives up on a request: a queued one is dropped; one a worker is busy with runs to its end (the worker
    /// finishes the photo) and its answer is dropped. Its completion never runs.
    public func abandon(_ ticket: Int64) {
        if let index = queue.firstIndex(where: { $0.id == ticket }) {
            queue.remove(at: index)
            return
        }
        for worker in workers where worker.current?.id == ticket { worker.current?.completion = nil }
    }

    /// Fails queued requests with `worker_unavailable`, kills every worker (`SIGKILL`) and calls `completion` on
    /// the loop thread once all have exited and their handles are closed.
    public func shutdown(_ completion: @escaping () -> Void = {}) {
        shuttingDown = true
        let waiting = queue
        queue.removeAll()
        for request in waiting {
            request.complete(
                .failure(JobError(code: "worker_unavailable", message: "the worker pool is shutting down")))
        }
        onShutdown = completion
        for worker in workers {
            worker.current?.complete(
                .failure(JobError(code: "worker_unavailable", message: "the worker pool is shutting down")))
            worker.current = nil
            retire(worker)
        }
        finishShutdownIfDone()
    }

    // MARK: - Internals

    private func dispatch() {
        while !queue.isEmpty, !shuttingDown {
            let worker: Worker
            if let idle = workers.first(where: { $0.current == nil && !$0.retired }) {
                worker = idle
            } else if workers.count < options.workers {
                guard let spawned = spawn() else { return }
                worker = spawned
            } else {
                return
            }
            send(queue.removeFirst(), to: worker)
        }
    }

    private func spawn() -> Worker? {
        let arguments =
            options.arguments + [
                "--memory-limit", String(options.memoryLimitBytes), "--cpu-limit", String(options.cpuLimitSeconds),
                "--parent", String(getpid()),
            ]
        let process: ChildProcess
        var box: Worker?
        do {
            process = try ChildProcess(loop: loop, executable: options.executable, arguments: arguments) {
                [weak self] exit in
                if let worker = box { self?.exited(worker, exit) }
                box = nil
            }
        } catch {
            let failure = JobError(code: "worker_unavailable", message: "cannot start a worker process: \(error)")
            let waiting = queue
            queue.removeAll()
            for request in waiting { request.complete(.failure(failure)) }
            return nil
        }
        let worker = Worker(process: process, loop: loop)
        box = worker
        statistics.spawned += 1
        workers.append(worker)
        process.stdout.startReading(
            onRead: { [weak self, weak worker] bytes in
                guard let self, let worker else { return }
                self.received(bytes, from: worker)
            },
            onEnd: { [weak worker] _ in
                // The worker closed its output: it is exiting (or broken). Make sure it does; the exit callback
                // does the accounting.
                worker?.process.kill(SIGKILL)
            })
        return worker
    }

    private func send(_ request: Request, to worker: Worker) {
        request.attempts += 1
        request.sentAt = Timestamp.monotonic()
        worker.current = request
        let line: JSONValue = [
            "id": .number(Double(request.id)), "task": .string(request.task), "payload": request.payload,
        ]
        worker.process.stdin.write(JSONCoding.encode(line) + [0x0A])
        worker.timer.start(seconds: request.timeoutSeconds) {
            [weak self, weak worker] in
            guard let self, let worker else { return }
            self.timedOut(worker)
        }
    }

    private func received(_ bytes: UnsafeRawBufferPointer, from worker: Worker) {
        worker.buffer.append(contentsOf: bytes)
        while let newline = worker.buffer.firstIndex(of: 0x0A) {
            let line = Array(worker.buffer[..<newline])
            worker.buffer.removeSubrange(...newline)
            answer(line, from: worker)
        }
        if worker.buffer.count > 64 << 20 {
            // An answer over 64 MiB is a broken worker, not a result.
            worker.process.kill(SIGKILL)
        }
    }

    private func answer(_ line: [UInt8], from worker: Worker) {
        guard let reply = try? JSONCoding.decode(JSONValue.self, from: line), let request = worker.current,
            reply["id"]?.intValue == request.id
        else { return }
        worker.timer.stop()
        worker.current = nil
        statistics.completed += 1
        if reply["ok"]?.boolValue == true {
            request.complete(.success(reply["result"] ?? .null))
        } else {
            let error =
                reply["error"].flatMap { try? JSONCoding.convert($0, to: JobError.self) }
                ?? JobError(code: "worker_error", message: "the worker sent a malformed error")
            request.complete(.failure(error))
        }
        dispatch()
    }

    private func timedOut(_ worker: Worker) {
        guard let request = worker.current else { return }
        worker.current = nil
        statistics.timedOut += 1
        let pid = worker.process.pid
        retire(worker)
        let limit = Self.seconds(request.timeoutSeconds)
        DaemonLog.write("worker \(pid) killed with signal \(SIGKILL): task \(request.task) ran past its time limit of \(limit)")
        request.complete(
            .failure(
                JobError(
                    code: "worker_timeout",
                    message: "the worker ran past its time limit of \(limit) on \(request.task) and was killed "
                        + "with signal \(SIGKILL)")))
        dispatch()
    }

    /// Takes a worker out of service and kills it; its handles close when its exit callback runs.
    private func retire(_ worker: Worker) {
        guard !worker.retired else { return }
        worker.retired = true
        worker.timer.close()
        if worker.process.exit != nil {
            remove(worker)
        } else {
            worker.process.kill(SIGKILL)
        }
    }

    private func exited(_ worker: Worker, _ exit: ProcessExit) {
        if !worker.retired {
            worker.retired = true
            worker.timer.close()
            if let request = worker.current {
                worker.current = nil
                statistics.crashed += 1
                let after = Self.seconds(Timestamp.monotonic() - request.sentAt)
                let what = exit.signal != 0 ? "was \(exit)" : "\(exit)"  // "was killed by signal 9", "exited with status 1"
                if request.completion != nil, request.attempts < 2, !shuttingDown {
                    statistics.retried += 1
                    DaemonLog.write(
                        "worker \(worker.process.pid) \(what) after \(after) on \(request.task); trying once more in a fresh worker")
                    queue.insert(request, at: 0)
                } else {
                    DaemonLog.write("worker \(worker.process.pid) \(what) after \(after) on \(request.task)")
                    let times = request.attempts == 1 ? "" : " (the \(Self.ordinal(request.attempts)) try, each in a fresh worker)"
                    request.complete(
                        .failure(
                            JobError(
                                code: "worker_crashed",
                                message: "the worker \(what) after \(after) on \(request.task)\(times)")))
                }
            }
        }
        remove(worker)
        dispatch()
    }

    /// `2 s`, `0.4 s`, `1.5 s`: a duration for a message, whole seconds without decimals.
    static func seconds(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? "\(Int(rounded)) s" : "\(rounded) s"
    }

    /// `second`, `third`, … for the try counts in messages.
    static func ordinal(_ n: Int) -> String {
        switch n {
        case 1: "first"
        case 2: "second"
        case 3: "third"
        default: "\(n)th"
        }
    }

    private func remove(_ worker: Worker) {
        guard let index = workers.firstIndex(where: { $0 === worker }) else { return }
        workers.remove(at: index)
        worker.process.close { [weak self] in self?.finishShutdownIfDone() }
    }

    private func finishShutdownIfDone() {
        guard shuttingDown, workers.isEmpty, let callback = onShutdown else { return }
        onShutdown = nil
        callback()
    }
}
