import TrailbookLoop

/// What stands in for the scheduler behind a `JobContext` in `TrailbookJobsTesting`'s harness: where progress,
/// checkpoints and log lines of a job go.
///
/// SPI `Harness`, not part of the public API: kinds see only `JobContext`.
@_spi(Harness)
@LoopActor
public protocol HarnessHost: AnyObject {
    /// The job reported progress; `job.progress` has it.
    func jobDidReportProgress(_ job: JobContext)
    /// Stores `checkpoint`. Throws what the store's write threw (the context reports it as `store_write_failed`).
    func jobSaveCheckpoint(_ job: JobContext, _ checkpoint: JSONValue) throws
    /// The stored checkpoint, or `nil`. Throws what the store's read threw (reported as `store_error`).
    func jobLoadCheckpoint(_ job: JobContext) throws -> JSONValue?
    /// A log line of the job.
    func jobLog(_ job: JobContext, level: LogLevel, message: String)
}

/// A `HarnessHost` as the `JobHost` a context talks to.
@LoopActor
final class HarnessHostAdapter: JobHost {
    private weak var host: (any HarnessHost)?

    init(_ host: any HarnessHost) { self.host = host }

    func jobDidReportProgress(_ job: JobContext) { host?.jobDidReportProgress(job) }
    func jobSaveCheckpoint(_ job: JobContext, _ checkpoint: JSONValue) throws {
        try host?.jobSaveCheckpoint(job, checkpoint)
    }
    func jobLoadCheckpoint(_ job: JobContext) throws -> JSONValue? { try host?.jobLoadCheckpoint(job) }
    func jobLog(_ job: JobContext, level: LogLevel, message: String) {
        host?.jobLog(job, level: level, message: message)
    }
}
