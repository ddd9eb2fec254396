import TrailbookEngine

/// How one attempt run by `JobKindHarness` ended, and what the engine did about it.
public struct HarnessAttempt<Output: Sendable>: Sendable {
    /// How `run` ended.
    public enum Ending: Sendable {
        /// `run` returned this output.
        case succeeded(Output)
        /// `run` threw this error (a non-`JobError` is reported as code `internal`, as the daemon does).
        case failed(JobError)
        /// The harness stopped the job for this reason and `run` gave up.
        case stopped(CancellationReason)
    }

    /// The attempt number, 1-based, as `JobContext.attempt` saw it.
    public let number: Int
    /// How `run` ended.
    public let ending: Ending
    /// The job's state afterwards, by the daemon's lifecycle: `succeeded`; `needs_retry` or `failed` after a
    /// retryable failure or a `timeout`; `cancelled` after `user_stop`; `queued` after `resource_reclaim`;
    /// `paused` after an error that needs a person.
    public let state: JobState
    /// The reason `onCancel` was called with, or `nil` if it was not called (the job was not stopped).
    public let onCancelReason: CancellationReason?
    /// What each `cleanUp` try returned, in order: one try after a `failed` or `cancelled` end of a kind with
    /// `cleansUpAfterEnd` (more with `JobKindHarness.retryCleanUp()`); empty otherwise.
    public internal(set) var cleanUps: [CleanUpOutcome]

    /// The output, if the attempt succeeded.
    public var output: Output? {
        if case .succeeded(let output) = ending { return output }
        return nil
    }

    /// The error, if the attempt failed.
    public var error: JobError? {
        if case .failed(let error) = ending { return error }
        return nil
    }

    /// The stop reason, if the attempt was stopped.
    public var stopReason: CancellationReason? {
        if case .stopped(let reason) = ending { return reason }
        return nil
    }
}

/// A log line a kind wrote through `JobContext.log`, as `JobKindHarness` recorded it.
public struct HarnessLogLine: Sendable, Equatable {
    /// The attempt that wrote it, 1-based.
    public let attempt: Int
    /// Its severity.
    public let level: LogLevel
    /// Its text.
    public let message: String
}
