import TrailbookLoop

/// A submit waiting for the group commit that stores its jobs (`Scheduler.submit`).
@LoopActor
final class SubmitTicket {
    private var result: Result<[JobRecord], JobError>?
    private let waiters = WaitList()

    init() {}

    /// The jobs as stored (state `queued`), once their group commit is written.
    /// - Throws: `JobError` `store_write_failed` or `store_busy` when the store refused them (nothing submitted).
    func jobs() async throws(JobError) -> [JobRecord] {
        if result == nil { await waiters.wait() }
        return try result!.get()
    }

    /// Answers the submit: its jobs as stored, or why none was.
    func resolve(_ outcome: Result<[JobRecord], JobError>) {
        result = outcome
        waiters.resumeAll()
    }
}
