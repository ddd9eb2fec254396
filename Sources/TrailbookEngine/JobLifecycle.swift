/// What happens to a job, as the scheduler sees it: the inputs of the lifecycle state machine.
public enum JobEvent: Sendable, Equatable {
    /// The scheduler gives the job a slot.
    case start
    /// `run` returned.
    case succeed
    /// `run` threw a `JobError`; `retryable` says whether another attempt may help.
    case fail(retryable: Bool)
    /// `run` threw a `JobError` a person must resolve (`pausesJob`: credentials refused). The job waits `paused`
    /// with its checkpoint; the attempt is not used up.
    case blocked
    /// The job was stopped for `reason` and has finished stopping. `pausing` means a person paused it.
    case stopped(CancellationReason, pausing: Bool)
    /// A person cancelled a job that is not running.
    case cancelWhileWaiting
    /// A person paused a job that is not running.
    case pauseWhileWaiting
    /// A person resumed a paused job.
    case resume
    /// A `needs_retry` job's backoff expired.
    case retryDue
    /// On daemon start: the job was `running` when the daemon died (kill -9, power loss).
    case recoverAfterCrash
}

/// The job lifecycle of docs/explanation/design.md as a value: the one place that decides state transitions.
///
/// `handle(_:)` returns the next state and what the scheduler must do, or `nil` if the event is not allowed in
/// the current state (for example `resume` of a running job), so an illegal transition cannot be written to the
/// store. Attempts count runs that ended by themselves (success, failure, timeout); a run cut short by
/// `resource_reclaim`, a pause or a crash keeps its attempt number and the next start resumes it
/// (`resumesAttempt`), so `show` never reports attempt 0 for a job that has run.
public struct JobLifecycle: Sendable, Equatable {
    /// What the scheduler must do besides recording the new state.
    public enum Effect: Sendable, Equatable {
        case none
        /// Put the job back in the queue after a backoff; `attempt` is the attempt that just ended.
        case scheduleRetry(afterAttempt: Int)
        /// Run the job (its attempt number is already updated).
        case run
    }

    /// The state after the last event.
    public private(set) var state: JobState
    /// The number of the current or last attempt, 1-based; 0 before the first start.
    public private(set) var attempt: Int
    /// Attempts allowed before a retryable failure becomes `failed`.
    public let maxAttempts: Int
    /// Whether the next start continues the current attempt (its run was cut short, not ended).
    public private(set) var resumesAttempt: Bool

    public init(state: JobState, attempt: Int, maxAttempts: Int, resumesAttempt: Bool = false) {
        self.state = state
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.resumesAttempt = resumesAttempt
    }

    /// Applies `event`; returns the effect, or `nil` (and changes nothing) if `event` is illegal now.
    public mutating func handle(_ event: JobEvent) -> Effect? {
        switch (state, event) {
        case (.queued, .start):
            state = .running
            if resumesAttempt { resumesAttempt = false } else { attempt += 1 }
            return .run
        case (.running, .succeed):
            state = .succeeded
            return JobLifecycle.Effect.none
        case (.running, .fail(let retryable)):
            return endAttempt(retryable: retryable)
        case (.running, .blocked):
            state = .paused
            resumesAttempt = true
            return JobLifecycle.Effect.none
        case (.running, .stopped(.userStop, _)):
            state = .cancelled
            return JobLifecycle.Effect.none
        case (.running, .stopped(.timeout, _)):
            return endAttempt(retryable: true)
        case (.running, .stopped(.resourceReclaim, let pausing)):
            state = pausing ? .paused : .queued
            resumesAttempt = true
            return JobLifecycle.Effect.none
        case (.running, .recoverAfterCrash):
            state = .queued
            resumesAttempt = true
            return JobLifecycle.Effect.none
        case (.queued, .cancelWhileWaiting), (.paused, .cancelWhileWaiting), (.needsRetry, .cancelWhileWaiting):
            state = .cancelled
            return JobLifecycle.Effect.none
        case (.queued, .pauseWhileWaiting), (.needsRetry, .pauseWhileWaiting):
            state = .paused
            return JobLifecycle.Effect.none
        case (.paused, .resume), (.needsRetry, .retryDue):
            state = .queued
            return JobLifecycle.Effect.none
        default:
            return nil
        }
    }

    private mutating func endAttempt(retryable: Bool) -> Effect {
        if retryable && attempt < maxAttempts {
            state = .needsRetry
            return .scheduleRetry(afterAttempt: attempt)
        }
        state = .failed
        return JobLifecycle.Effect.none
    }
}

/// Exponential backoff with jitter for retries: `base × 2^(attempt−1)`, capped, times a random factor in
/// [0.5, 1] ("equal jitter", https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/), so
/// many jobs failing together do not retry in lockstep.
public struct RetryBackoff: Sendable, Equatable {
    /// Delay before the first retry, in seconds (before jitter).
    public var baseSeconds: Double
    /// Largest delay, in seconds.
    public var capSeconds: Double

    public init(baseSeconds: Double = 1, capSeconds: Double = 300) {
        self.baseSeconds = baseSeconds
        self.capSeconds = capSeconds
    }

    /// The delay in seconds before retrying after attempt `attempt` (1-based); `unitRandom` is in [0, 1].
    public func delay(afterAttempt attempt: Int, unitRandom: Double) -> Double {
        let exponent = Double(max(0, min(attempt - 1, 30)))
        let ceiling = min(capSeconds, baseSeconds * pow2(exponent))
        return ceiling * (0.5 + 0.5 * unitRandom)
    }

    private func pow2(_ exponent: Double) -> Double {
        var value = 1.0
        for _ in 0..<Int(exponent) { value *= 2 }
        return value
    }
}

extension JobRecord {
    /// The job's lifecycle state machine, at this record's state.
    public var lifecycle: JobLifecycle {
        JobLifecycle(state: state, attempt: attempt, maxAttempts: options.maxAttempts, resumesAttempt: resumesAttempt)
    }

    /// Takes the state, attempt and resume flag of `lifecycle` after a transition.
    public mutating func adopt(_ lifecycle: JobLifecycle) {
        state = lifecycle.state
        attempt = lifecycle.attempt
        resumesAttempt = lifecycle.resumesAttempt
    }
}
