import TrailbookProtocol

/// What a `cancel` makes of a job once the run it stopped (here or on another daemon sharing the store) is over,
/// or once its daemon's lease on it expired: the request succeeds only with the job `cancelled`.
///
/// A run can stop without being cancelled: its daemon died and another rescued the job (`running` → `queued`), it
/// was paused, or it went back to the queue; then the job is cancelled where it now is (the `cancel` goes on).
/// A run that ended otherwise first (`succeeded`, `failed`) makes the `cancel` fail with `invalid_state`.
enum CancelVerdict: Equatable {
    /// The job is `cancelled`: the answer.
    case cancelled(JobRecord)
    /// The job is not running here and not ended: cancel it where it is now (queued, paused, waiting for a retry,
    /// or running on another daemon).
    case again(JobRecord)

    /// The verdict on `job` as it is after the stop.
    /// - Parameter unwritten: the job's newest state here is not in the shared store yet (the store refused the
    ///   write and this daemon retries it): another daemon may still change the job, so this is no answer yet.
    /// - Throws: `JobError` `invalid_state` when the job ended otherwise first; `store_unavailable` when
    ///   `unwritten`.
    init(_ job: JobRecord, unwritten: Bool) throws(JobError) {
        if unwritten { throw Self.notYetWritten(job.id) }
        switch job.state {
        case .cancelled: self = .cancelled(job)
        case .succeeded, .failed:
            throw JobError(
                code: "invalid_state",
                message: "cannot cancel job \(job.id): it ended (\(job.state.rawValue)) before the cancel reached it")
        case .queued, .running, .paused, .needsRetry: self = .again(job)
        }
    }

    /// The error of a `cancel` whose write the shared store has not taken yet: the daemon keeps trying it, but
    /// until it lands another daemon may run or end the job, so the cancel is not promised.
    static func notYetWritten(_ id: String) -> JobError {
        JobError(
            code: "store_unavailable",
            message: "cannot confirm the cancel of job \(id): the shared job store has not taken it yet (this daemon "
                + "keeps trying, and another daemon may run the job meanwhile); check with `show \(id)` once the "
                + "store is back and cancel again if it is not cancelled")
    }
}
