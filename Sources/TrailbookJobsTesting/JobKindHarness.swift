@_spi(Harness) import TrailbookEngine
import TrailbookLoop

/// Runs one job of a kind in-process, attempt by attempt, the way the daemon's scheduler would, with no daemon,
/// socket or database: the checkpoint is kept in memory, progress and log lines are recorded, and a stop lands at a
/// chosen point with a chosen reason (`user_stop`, `timeout`, `resource_reclaim`).
///
/// The counterpart of River's `rivertest.Worker` and swift-jobs' in-memory driver, with what those do not have:
/// after a stop, `onCancel` runs with the reason; a `failed` or `cancelled` end runs the kind's `cleanUp`; the next
/// `runAttempt` starts from the checkpoint the last one saved. The job's state follows the daemon's own lifecycle
/// (`JobLifecycle`). Runs on `LoopActor`; the first harness starts the loop on a thread of its own
/// (`EventLoop.runMainInBackground`), so a test just awaits its attempts:
///
/// ```swift
/// let harness = JobKindHarness(ThumbnailJob(), params: .init(folder: dir, output: out))
/// let first = await harness.runAttempt(stoppingAt: .progress(atLeast: 2), reason: .timeout)
/// let second = await harness.runAttempt()   // resumes from the checkpoint `first` saved
/// ```
@LoopActor
public final class JobKindHarness<Kind: JobKind> {
    /// The kind under test.
    public let kind: Kind
    /// The job's params.
    public let params: Kind.Params
    /// The job's id (a fresh UUID unless given).
    public let jobID: String
    /// Attempts the job may have (`--max-attempts`): a retryable failure or `timeout` of the last one ends it
    /// `failed`.
    public let maxAttempts: Int
    /// The job's state after the last attempt (`queued` before the first).
    public var state: JobState { lifecycle.state }
    /// Every attempt run so far, in order.
    public private(set) var attempts: [HarnessAttempt<Kind.Output>] = []
    /// Every progress report of every attempt, in order (`JobProgress.completed` of `total` in the kind's unit).
    public var progressReports: [JobProgress] { recorder.progressReports }
    /// Every log line of every attempt, in order.
    public var logs: [HarnessLogLine] { recorder.logs }
    /// The checkpoint as last saved (the JSON the daemon would store), or `nil` if none was saved.
    public var checkpoint: JSONValue? { recorder.checkpoint }
    /// How many checkpoint saves the current (or last) attempt made.
    public var checkpointSaves: Int { recorder.checkpointSaves }
    /// Whether `jobEnded` was called (once the job ended and, for kinds that clean up, after the first try).
    public private(set) var jobEndedCalled = false

    private let recorder: HarnessRecorder
    private var lifecycle: JobLifecycle
    /// The progress as the last attempt left it; `nil` before the first.
    private var progress: JobProgress?

    /// A job of `kind` with `params`, not yet run.
    ///
    /// - Parameters:
    ///   - checkpoint: a checkpoint to start from, as an earlier run saved it (`nil`: a first run).
    ///   - maxAttempts: attempts the job may have, at least 1 (the daemon's default is 5).
    ///
    /// Callable from any context: it starts the loop (`EventLoop.runMainInBackground`) before anything runs on it.
    public nonisolated init(
        _ kind: Kind, params: Kind.Params, jobID: String? = nil, checkpoint: JSONValue? = nil, maxAttempts: Int = 5
    ) {
        EventLoop.runMainInBackground()
        self.kind = kind
        self.params = params
        self.jobID = jobID ?? ControlProtocol.newKey()
        recorder = HarnessRecorder(checkpoint: checkpoint)
        self.maxAttempts = max(1, maxAttempts)
        lifecycle = JobLifecycle(state: .queued, attempt: 0, maxAttempts: max(1, maxAttempts))
    }

    /// The saved checkpoint decoded as `C`, or `nil` if none was saved.
    /// - Throws: `DecodingError` if it does not have `C`'s shape.
    public func checkpoint<C: Decodable>(as type: C.Type) throws -> C? {
        guard let checkpoint, !checkpoint.isNull else { return nil }
        return try JSONCoding.convert(checkpoint, to: type)
    }

    /// Runs the next attempt to its end, from the saved checkpoint, and returns how it ended.
    ///
    /// A job waiting to retry (`needs_retry`) or `paused` is started at once (no backoff). With `stop`, the job
    /// is stopped for `reason` when the kind reaches that point; then `onCancel(reason)` runs, and for an end
    /// that is final (`user_stop`; `timeout` of the last attempt) the kind's `cleanUp` runs once if it cleans up.
    /// - Precondition: the job has not ended (`state` is not `succeeded`, `failed` or `cancelled`).
    @discardableResult
    public func runAttempt(
        stoppingAt stop: HarnessStopPoint? = nil, reason: CancellationReason = .userStop
    ) async -> HarnessAttempt<Kind.Output> {
        precondition(!lifecycle.state.isTerminal, "the job has ended (\(lifecycle.state.rawValue)): no attempt is left")
        if lifecycle.state == .needsRetry { _ = lifecycle.handle(.retryDue) }
        if lifecycle.state == .paused { _ = lifecycle.handle(.resume) }
        _ = lifecycle.handle(.start)
        recorder.stopPoint = stop.map { ($0, reason) }
        recorder.checkpointSaves = 0
        let context = JobContext(
            id: jobID, kind: Kind.name, attempt: lifecycle.attempt, maxAttempts: maxAttempts, traits: Kind.traits,
            progress: progress ?? JobProgress(unit: Kind.traits.unit), host: recorder)
        recorder.running = context

        let ending: HarnessAttempt<Kind.Output>.Ending
        do {
            let params = params
            let kind = kind
            ending = .succeeded(try await context.runCancellingOnStop { try await kind.run(params, in: context) })
        } catch let error as JobError {
            ending = context.stopReason.map { .stopped($0) } ?? .failed(error)
        } catch {
            ending =
                context.stopReason.map { .stopped($0) }
                ?? .failed(JobError(code: "internal", message: "job failed unexpectedly: \(error)"))
        }
        var onCancelReason: CancellationReason?
        switch ending {
        case .succeeded:
            _ = lifecycle.handle(.succeed)
        case .failed(let error):
            _ = lifecycle.handle(error.pausesJob ? .blocked : .fail(retryable: error.retryable))
        case .stopped(let reason):
            await kind.onCancel(reason, params: params, in: context)
            onCancelReason = reason
            _ = lifecycle.handle(.stopped(reason, pausing: false))
        }
        progress = context.progress
        var attempt = HarnessAttempt(
            number: context.attempt, ending: ending, state: lifecycle.state, onCancelReason: onCancelReason,
            cleanUps: [])
        let state = lifecycle.state
        recorder.stopPoint = nil
        recorder.running = nil
        if Kind.traits.cleansUpAfterEnd && (state == .failed || state == .cancelled) {
            attempt.cleanUps.append(await kind.cleanUp(after: state, params: params, in: endedContext()))
        }
        if state.isTerminal {
            kind.jobEnded(id: jobID, state: state)
            jobEndedCalled = true
        }
        attempts.append(attempt)
        return attempt
    }

    /// Tries the kind's `cleanUp` once more (the daemon retries with backoff while it answers `.retry`), records
    /// the outcome with the last attempt and returns it.
    /// - Precondition: the job ended `failed` or `cancelled`.
    @discardableResult
    public func retryCleanUp() async -> CleanUpOutcome {
        precondition(state == .failed || state == .cancelled, "clean-up runs only after a failed or cancelled end")
        let outcome = await kind.cleanUp(after: state, params: params, in: endedContext())
        attempts[attempts.count - 1].cleanUps.append(outcome)
        return outcome
    }

    /// A context of the ended job, as the daemon gives `cleanUp`: its checkpoint is still there to read.
    private func endedContext() -> JobContext {
        JobContext(
            id: jobID, kind: Kind.name, attempt: lifecycle.attempt, maxAttempts: maxAttempts, traits: Kind.traits,
            progress: progress ?? JobProgress(unit: Kind.traits.unit), host: recorder)
    }
}
