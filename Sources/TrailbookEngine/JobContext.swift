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
    /// The job's progress as last reported.
    public private(set) var progress: JobProgress
    /// Why the job is being stopped, once the scheduler decided to stop it; `nil` while it may run on.
    public private(set) var stopReason: CancellationReason?
    /// File-system operations that do not block the loop.
    public let fileSystem = FileSystem(loop: .main)

    let traits: JobKindTraits
    weak var host: (any JobHost)?
    private var pendingSleep: (continuation: CheckedContinuation<Void, any Error>, timer: LoopTimer)?

    init(id: String, kind: String, attempt: Int, maxAttempts: Int, traits: JobKindTraits, progress: JobProgress) {
        self.id = id
        self.kind = kind
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.traits = traits
        self.progress = progress
    }

    /// Reports progress: `completed` of `total` units (`completedUnitCount` of `totalUnitCount`), in the kind's
    /// unit. Moving `completed` is the heartbeat that keeps the stall timeout away.
    ///
    /// - Parameters:
    ///   - completed: units done so far, including those of earlier attempts.
    ///   - total: units in all; 0 while unknown.
    ///   - current: label of the part being worked on (a file name), or `nil`.
    ///   - items: per-part progress for jobs with several parts; `nil` keeps the previous list.
    public func reportProgress(completed: Int64, total: Int64, current: String? = nil, items: [ProgressItem]? = nil) {
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
    /// - Throws: `JobError` `store_error` if the store cannot be written (disk full); retryable.
    public func saveCheckpoint<C: Encodable>(_ checkpoint: C) throws(JobError) {
        do {
            try host?.jobSaveCheckpoint(self, JSONCoding.value(of: checkpoint))
        } catch {
            throw JobError(code: "store_error", message: "cannot save the checkpoint: \(error)", retryable: true)
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
            timer.start(milliseconds: UInt64((seconds * 1000).rounded(.up))) { [weak self] in
                self?.pendingSleep = nil
                continuation.resume()
            }
        }
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

    /// Publishes a log line for this job in the feed (and the daemon's log).
    public func log(_ level: LogLevel, _ message: String) {
        host?.jobLog(self, level: level, message: message)
    }

    /// Marks the job as stopping for `reason` and wakes it from a sleep. Called by the scheduler.
    func stop(_ reason: CancellationReason) {
        guard stopReason == nil else { return }
        stopReason = reason
        if let (continuation, timer) = pendingSleep {
            pendingSleep = nil
            timer.stop()
            continuation.resume(throwing: JobStopped(reason: reason))
        }
    }
}
