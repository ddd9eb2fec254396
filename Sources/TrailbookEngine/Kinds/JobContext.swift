import TrailbookLoop

/// File-system operations for job kinds (stat, rename, unlink), as libuv fs requests on the thread pool.
public typealias FileSystem = TrailbookLoop.FileSystem
/// What `stat(2)` says of a file.
public typealias FileStatus = TrailbookLoop.FileStatus

/// Severity of a job's log line, carried in `log` feed events.
public enum LogLevel: String, Codable, Sendable {
    case debug, info, warning, error
}

/// What the scheduler provides to a running job's context.
@LoopActor
protocol JobHost: AnyObject {
    func jobDidReportProgress(_ job: JobContext)
    func jobSaveCheckpoint(_ job: JobContext, _ checkpoint: JSONValue) throws
    func jobLoadCheckpoint(_ job: JobContext) throws -> JSONValue?
    func jobLog(_ job: JobContext, level: LogLevel, message: String)
    func jobRequestStop(_ job: JobContext, reason: CancellationReason, detail: String)
    /// The job began waiting out an outage (`waitOut`): stop its stall and deadline clocks.
    func jobWaitBegan(_ job: JobContext)
    /// That wait ended (or was cut short by a stop): start the clocks again.
    func jobWaitEnded(_ job: JobContext)
    var workerPool: WorkerPool? { get }
}

extension JobHost {
    /// No worker processes unless the host has a pool (tests' hosts usually do not).
    var workerPool: WorkerPool? { nil }

    /// Without a scheduler behind it, the job just stops.
    func jobRequestStop(_ job: JobContext, reason: CancellationReason, detail: String) { job.stop(reason) }
    /// No clocks to stop unless the host has them.
    func jobWaitBegan(_ job: JobContext) {}
    func jobWaitEnded(_ job: JobContext) {}
}

/// A running job's window on the engine: progress, checkpoint, cancellation, sleeping and the thread pool.
///
/// One context per attempt, used on the loop (`LoopActor`) by the job kind's `run` and `onCancel`.
@LoopActor
public final class JobContext {
    /// The job's id (a UUID).
    public let id: String
    /// The kind's name.
    public let kind: String
    /// The attempt this run belongs to, 1-based.
    public let attempt: Int
    /// How many attempts the job may have.
    public let maxAttempts: Int
    /// How long to keep waiting out a service's transient failures (a server down, 5xx, 429) before giving up, in
    /// seconds (`--give-up-after`, default 24 h). The kind enforces it; see `waitOut`.
    public let giveUpAfterSeconds: Double
    /// The job's stall timeout in seconds (`--stall-timeout`, default 60): the scheduler stops the job with reason
    /// `timeout` when its progress does not move for this long outside `waitOut`. A kind whose requests can go
    /// quiet (a silent network) bounds each request's own stall below it, so the request fails first and its
    /// failure is waited out as an outage, not taken for a stalled job.
    public let stallTimeoutSeconds: Double
    /// The job's progress as last reported.
    public internal(set) var progress: JobProgress
    /// Why the job is being stopped, once the scheduler decided to stop it; `nil` while it may run on.
    public private(set) var stopReason: CancellationReason?
    /// File-system operations that do not block the loop.
    public let fileSystem = FileSystem(loop: .main)

    let traits: JobKindTraits
    weak var host: (any JobHost)?
    /// The harness's host behind `host` (held here: `host` is weak).
    private var harnessHost: HarnessHostAdapter?
    private var pendingSleep: (continuation: CheckedContinuation<Void, any Error>, timer: LoopTimer)?
    /// Waits on worker answers, by wait number: each ends its wait with `JobStopped` when the job is stopped.
    private var pendingWorkerWaits: [Int: (CancellationReason) -> Void] = [:]
    private var nextWorkerWait = 0
    /// Called once when the job is stopped, by registration number (see `runCancellingOnStop`).
    private var stopHandlers: [Int: () -> Void] = [:]
    /// The task running this attempt's `run` (`cancelOnStop`), cancelled when the job is stopped; `nil` once `run`
    /// returned. A slot of its own rather than a stop handler: every run has one, and it costs no allocation.
    private var runTask: Task<Void, Never>?
    /// Outcomes of the job's list entries noted since the last checkpoint save (`JobEntries.note`), written with
    /// the next one.
    var notedEntryOutcomes: [(position: Int, outcome: JobEntryOutcome)] = []
    private var nextStopHandler = 0

    init(
        id: String, kind: String, attempt: Int, maxAttempts: Int, traits: JobKindTraits, progress: JobProgress,
        giveUpAfterSeconds: Double = JobOptions.defaultGiveUpAfterSeconds, stallTimeoutSeconds: Double = 60
    ) {
        self.id = id
        self.kind = kind
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.giveUpAfterSeconds = giveUpAfterSeconds
        self.stallTimeoutSeconds = stallTimeoutSeconds
        self.traits = traits
        self.progress = progress
    }

    /// Reports progress: `completed` of `total` units (`completedUnitCount` of `totalUnitCount`), in the kind's
    /// unit. Moving `completed` is the heartbeat that keeps the stall timeout away; a long step that moves no
    /// unit (listing, comparing) reports its own count with `reportPhase` instead.
    ///
    /// - Parameters:
    ///   - completed: units done so far, including those of earlier attempts.
    ///   - total: units in all; 0 while unknown.
    ///   - current: label of the part being worked on (a file name), or `nil`.
    ///   - items: per-part progress for jobs with several parts; `nil` keeps the previous list.
    ///   - inFlight: units under way but not confirmed (see `JobProgress.inFlight`); they move the stall timeout's
    ///     heartbeat and the rate too. `nil` for none.
    ///   - files: files done of files in all, for kinds that count files beside their unit (`JobProgress.files`);
    ///     `nil` for none.
    public func reportProgress(
        completed: Int64, total: Int64, current: String? = nil, items: [ProgressItem]? = nil, inFlight: Int64? = nil,
        files: ProgressFileCount? = nil
    ) {
        progress.inFlight = inFlight
        progress.files = files
        progress.completed = completed
        progress.total = total
        progress.current = current
        if let items { progress.items = items }
        host?.jobDidReportProgress(self)
    }

    /// Sets rate and ETA (computed by the scheduler).
    func setRate(_ ratePerSecond: Double?, eta: Double?) {
        progress.ratePerSecond = ratePerSecond
        progress.etaSeconds = eta
    }

    /// The checkpoint saved by an earlier run of this job, or `nil` on a first run.
    ///
    /// - Throws: `JobError` `store_error` if the store cannot be read; `bad_checkpoint` if it does not decode as `C`.
    public func loadCheckpoint<C: Decodable>(as type: C.Type) throws(JobError) -> C? {
        let json: JSONValue?
        do {
            json = try host?.jobLoadCheckpoint(self)
        } catch {
            throw JobError(code: "store_error", message: "cannot read the checkpoint: \(error)", retryable: true)
        }
        guard let json, !json.isNull else { return nil }
        do {
            return try JSONCoding.convert(json, to: type)
        } catch {
            throw JobError(code: "bad_checkpoint", message: "checkpoint unreadable: \(JSONCoding.describe(error))")
        }
    }

    /// Saves the job's resumable state, with the current progress, in one store transaction.
    ///
    /// Call it only once the work it describes is durable (written and fsynced, or confirmed by a server): a
    /// resume starts from here, so a checkpoint ahead of the work would skip data.
    /// While another process holds the store's lock the checkpoint is written later and this returns at once.
    /// The entry outcomes noted since the last save (`JobEntries.note`) are written first, in one statement, so
    /// each is durable no later than the checkpoint that moves past its entry.
    /// - Throws: `JobError` `store_write_failed` if the store cannot be written (disk full, I/O error); retryable.
    ///   The scheduler stops the job then, so it ends `needs_retry` even if the kind carries on.
    public func saveCheckpoint<C: Encodable>(_ checkpoint: C) throws(JobError) {
        do {
            try entries.writeNoted()
        } catch {
            throw JobError(code: "store_write_failed", message: "cannot save the checkpoint: \(error.message)", retryable: true)
        }
        do {
            try host?.jobSaveCheckpoint(self, JSONCoding.value(of: checkpoint))
        } catch let error as JobError {
            throw error
        } catch {
            throw JobError(code: "store_write_failed", message: "cannot save the checkpoint: \(error)", retryable: true)
        }
    }

    /// Throws `JobStopped` if the scheduler is stopping this job. Call between steps of work.
    public func checkCancellation() throws(JobStopped) {
        if let stopReason { throw JobStopped(reason: stopReason) }
    }

    /// Waits `seconds` on a loop timer; returns early by throwing `JobStopped` when the job is stopped.
    public func sleep(seconds: Double) async throws {
        try checkCancellation()
        guard seconds > 0 else { return }
        let timer = LoopTimer(loop: .main)
        defer { timer.close() }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            pendingSleep = (continuation, timer)
            timer.start(seconds: seconds) { [weak self] in
                self?.pendingSleep = nil
                continuation.resume()
            }
        }
    }

    /// Waits `seconds` before trying a service again after a transient failure (an outage, a 503, a 429's
    /// `Retry-After`). Like `sleep`, but the wait counts towards neither the stall timeout nor the attempt's
    /// deadline, so a job can wait out an outage of hours in one attempt instead of being stopped for `timeout`
    /// and spending its attempts; the kind bounds such waits itself with `giveUpAfterSeconds`.
    /// - Throws: `JobStopped` when the job is stopped (at once, also during the wait).
    public func waitOut(seconds: Double) async throws {
        try checkCancellation()
        host?.jobWaitBegan(self)
        defer { host?.jobWaitEnded(self) }
        try await sleep(seconds: seconds)
    }

    /// Runs blocking or CPU-heavy `work` on the thread pool and returns its result on the loop.
    ///
    /// Work already started is not interrupted by a stop; keep each call short (one chunk) and check
    /// cancellation between calls.
    /// - Throws: `JobError` `execution_target_not_allowed` if the kind did not declare `.threadPool`; else what
    ///   `work` throws.
    public func runOnPool<R: Sendable>(_ work: @escaping @Sendable () throws -> R) async throws -> R {
        guard traits.executionTargets.contains(.threadPool) else {
            throw JobError(
                code: "execution_target_not_allowed", message: "job kind \(kind) may not run on the thread pool")
        }
        return try await EventLoop.main.runOnPool(work)
    }

    /// Runs one request in an isolated worker process (`WorkerPool`) and returns its answer.
    ///
    /// The worker runs `task` (a `WorkerTask` registered with the `worker` subcommand) on `payload`. A worker that
    /// crashes is restarted and the request retried once; one that hangs is killed at the time limit.
    /// - Parameters:
    ///   - task: the worker task's name.
    ///   - payload: its input (JSON).
    ///   - timeoutSeconds: time limit of this request in seconds; `nil` uses the pool's (30 s by default).
    /// - Throws: `JobError` `execution_target_not_allowed` if the kind did not declare `.workerProcess`;
    ///   `worker_timeout`, `worker_crashed`, `worker_unavailable` or the task's own code; `JobStopped` when the
    ///   job is stopped while waiting (at once: the worker finishes its request and the answer is dropped).
    public func runInWorker(task: String, _ payload: JSONValue, timeoutSeconds: Double? = nil) async throws
        -> JSONValue
    {
        try await runInWorkers(task: task, [payload], timeoutSeconds: timeoutSeconds)[0].get()
    }

    /// Runs several requests on the worker pool at once (as many in parallel as there are workers) and returns
    /// each one's outcome, in order. A failed request does not fail the others.
    ///
    /// - Throws: `JobError` `execution_target_not_allowed` or `worker_unavailable` (no pool); `JobStopped` when
    ///   the job is stopped while waiting: requests not yet started are dropped, running ones finish unseen.
    public func runInWorkers(task: String, _ payloads: [JSONValue], timeoutSeconds: Double? = nil) async throws
        -> [Result<JSONValue, JobError>]
    {
        guard traits.executionTargets.contains(.workerProcess) else {
            throw JobError(
                code: "execution_target_not_allowed", message: "job kind \(kind) may not run in a worker process")
        }
        try checkCancellation()
        guard let pool = host?.workerPool else {
            throw JobError(code: "worker_unavailable", message: "this daemon has no worker pool")
        }
        if payloads.isEmpty { return [] }
        let wait = nextWorkerWait
        nextWorkerWait += 1
        let state = WorkerWait(count: payloads.count)
        return try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<[Result<JSONValue, JobError>], any Error>) in
            pendingWorkerWaits[wait] = { reason in
                guard !state.finished else { return }
                state.finished = true
                for ticket in state.tickets { pool.abandon(ticket) }
                continuation.resume(throwing: JobStopped(reason: reason))
            }
            for (index, payload) in payloads.enumerated() {
                let ticket = pool.submit(task: task, payload: payload, timeoutSeconds: timeoutSeconds) {
                    [weak self] result in
                    guard !state.finished else { return }
                    state.results[index] = result
                    state.remaining -= 1
                    if state.remaining == 0 {
                        state.finished = true
                        self?.pendingWorkerWaits[wait] = nil
                        continuation.resume(returning: state.results.map { $0! })
                    }
                }
                state.tickets.append(ticket)
            }
        }
    }

    /// Runs `operation` in a task of its own that is cancelled the moment the job is stopped, and returns its
    /// result.
    ///
    /// The task running `run` is cancelled by a stop already (`JobKind.run`); this is for work in a task of its
    /// own that only task cancellation can abort — an HTTP transfer in flight — so a stop aborts it at once instead
    /// of at its end, whichever task awaits it.
    /// - Throws: `JobStopped` if the job is already stopping; else what `operation` throws (typically a
    ///   cancellation error of its own when the job was stopped: check `stopReason` or call `checkCancellation()`).
    public func runCancellingOnStop<R: Sendable>(
        _ operation: @escaping @Sendable @LoopActor () async throws -> R
    ) async throws -> R {
        try checkCancellation()
        let task = Task.onLoop { try await operation() }
        let key = nextStopHandler
        nextStopHandler += 1
        stopHandlers[key] = { task.cancel() }
        defer { stopHandlers[key] = nil }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Stops this job by its own decision, exactly as if the scheduler had stopped it for `reason`; throw what it
    /// returns from `run`.
    ///
    /// For a job that tried for long enough: `timeout` ends the attempt as a scheduler timeout does
    /// (`needs_retry` with reason `timeout` and a backoff, `failed` with code `timeout` after the last attempt),
    /// and `onCancel(.timeout)` runs, so the resumable state is kept.
    /// - Parameters:
    ///   - reason: the stop reason to record.
    ///   - detail: the cancellation's `detail` (why), shown by `show`.
    /// - Returns: the error to throw.
    public func stopSelf(_ reason: CancellationReason, detail: String) -> JobStopped {
        if stopReason == nil { host?.jobRequestStop(self, reason: reason, detail: detail) }
        if stopReason == nil { stop(reason) }
        return JobStopped(reason: stopReason ?? reason)
    }

    /// Publishes a log line for this job in the feed (and the daemon's log).
    public func log(_ level: LogLevel, _ message: String) {
        host?.jobLog(self, level: level, message: message)
    }

    /// A context for one attempt of job `id` of `kind`, run by `host` instead of a scheduler (SPI `Harness`, for
    /// `TrailbookJobsTesting`; not part of the public API).
    @_spi(Harness)
    public convenience init(
        id: String, kind: String, attempt: Int, maxAttempts: Int, traits: JobKindTraits, progress: JobProgress,
        host: any HarnessHost
    ) {
        self.init(id: id, kind: kind, attempt: attempt, maxAttempts: maxAttempts, traits: traits, progress: progress)
        let adapter = HarnessHostAdapter(host)
        harnessHost = adapter
        self.host = adapter
    }

    /// Stops the job for `reason` as the scheduler would (SPI `Harness`): wakes it from a sleep and cancels the
    /// task running `run`.
    @_spi(Harness)
    public func harnessStop(_ reason: CancellationReason) { stop(reason) }

    /// Has `task`, the one running this attempt's `run`, cancelled the moment the job is stopped (at once if it
    /// already is), until `runReturned()`. Called by the scheduler as it starts the run.
    func cancelOnStop(_ task: Task<Void, Never>) {
        guard stopReason == nil else { return task.cancel() }
        runTask = task
    }

    /// `run` returned: a later stop has no task to cancel (and the context no longer holds the task).
    func runReturned() {
        runTask = nil
    }

    /// Marks the job as stopping for `reason`, wakes it from a sleep and cancels the task running `run`. Called by
    /// the scheduler.
    func stop(_ reason: CancellationReason) {
        guard stopReason == nil else { return }
        stopReason = reason
        if let (continuation, timer) = pendingSleep {
            pendingSleep = nil
            timer.stop()
            continuation.resume(throwing: JobStopped(reason: reason))
        }
        let waits = pendingWorkerWaits.values
        pendingWorkerWaits.removeAll()
        for stopWaiting in waits { stopWaiting(reason) }
        let handlers = stopHandlers.values
        stopHandlers.removeAll()
        for handler in handlers { handler() }
        if let runTask {
            self.runTask = nil
            runTask.cancel()
        }
    }
}

/// The state of one `runInWorkers` wait.
private final class WorkerWait {
    var results: [Result<JSONValue, JobError>?]
    var remaining: Int
    var tickets: [Int64] = []
    var finished = false

    init(count: Int) {
        results = Array(repeating: nil, count: count)
        remaining = count
    }
}
