import TrailbookLoop

/// A running job's list of entries (a folder upload's files), kept in the job store beside the job instead of in
/// its checkpoint, so that neither the checkpoint nor `show` grows with the list and the daemon holds one page of
/// it at a time. Reached through `JobContext.entries`.
///
/// The list is written once, when the job first runs: `restart()` (dropping what a walk cut short left), then
/// `append` in batches (and `move` to close a gap in the positions), then `seal(count:)`. A list that is not
/// sealed (`counts().sealed == false`) is a walk a
/// crash cut short: take it again from `restart()`. Once sealed, the kind reads it in pages (`page`) and records
/// each entry's outcome (`record`), so its checkpoint need hold only a cursor, the entries under way and counts.
/// The entries go with the job (prune, retention).
///
/// Outcomes can also be noted (`note`) as they happen and written together with the job's next checkpoint save
/// (`JobContext.saveCheckpoint`), one statement for all of them: a list of 100 000 files then costs one store
/// write per checkpoint, not one per file (on a shared store, not a round trip on the loop per file).
///
/// Each call is one store transaction and waits for it (on a shared store, one round trip). Errors are
/// `JobError` `store_error` (retryable): the scheduler then retries the attempt later; `store_error` not
/// retryable when the daemon's store keeps no lists (a test host).
@LoopActor
public struct JobEntries {
    /// The job whose list this is.
    public let jobID: String
    let store: (any JobEntryStoring)?
    /// The running job whose noted outcomes this writes (`note`); `nil` outside a run (the `files` request).
    let context: JobContext?

    init(jobID: String, store: (any JobEntryStoring)?, context: JobContext? = nil) {
        self.jobID = jobID
        self.store = store
        self.context = context
    }

    /// Most entries a page holds; `page` gives at most this many whatever it is asked.
    nonisolated public static let maximumPage = 10_000

    /// Deletes what an earlier, unfinished walk wrote (and a sealed list too: a list taken again).
    /// - Throws: `JobError` `store_error`.
    public func restart() throws(JobError) {
        try call("clear the file list") { try $0.removeEntries(jobID: jobID) }
    }

    /// Adds one batch of entries (positions in order, following the last batch), all or none.
    /// - Throws: `JobError` `store_error`.
    public func append(_ batch: [JobEntry]) throws(JobError) {
        guard !batch.isEmpty else { return }
        try call("write the file list") { try $0.appendEntries(jobID: jobID, batch) }
    }

    /// Moves the entries at position `from` and later down so the first is at `to`, keeping their order, in one
    /// transaction: a list written in two runs of positions as it is taken (its files from 0, its other entries
    /// from a high position) is made one run before it is sealed. No entry may lie where they land.
    /// - Throws: `JobError` `store_error`.
    public func move(from: Int, to: Int) throws(JobError) {
        guard from != to else { return }
        try call("order the file list") { try $0.moveEntries(jobID: jobID, from: from, to: to) }
    }

    /// Marks the list complete with `count` entries: from now on every attempt works on exactly these.
    /// - Throws: `JobError` `store_error`.
    public func seal(count: Int) throws(JobError) {
        try call("seal the file list") { try $0.sealEntries(jobID: jobID, count: count) }
    }

    /// Records the outcomes of some entries, in one transaction. Record an outcome only once it is durable at
    /// the destination: a resume trusts it.
    /// - Throws: `JobError` `store_error`.
    public func record(_ outcomes: [(position: Int, outcome: JobEntryOutcome)]) throws(JobError) {
        guard !outcomes.isEmpty else { return }
        try call("record file outcomes") { try $0.recordOutcomes(jobID: jobID, outcomes) }
    }

    /// Notes the outcome of entry `position`, to be written with the job's next checkpoint save (or `writeNoted`)
    /// in one statement with the others noted: note an outcome once it is durable at the destination, before the
    /// checkpoint that moves past the entry is saved. Ignored where the store keeps no lists (a test host).
    public func note(_ position: Int, _ outcome: JobEntryOutcome) {
        guard store != nil else { return }
        context?.notedEntryOutcomes.append((position, outcome))
    }

    /// Outcomes noted and not written yet.
    public var notedCount: Int { context?.notedEntryOutcomes.count ?? 0 }

    /// Writes the outcomes noted since the last write, in one transaction; they stay noted if it fails.
    /// - Throws: `JobError` `store_error`.
    public func writeNoted() throws(JobError) {
        guard let context, !context.notedEntryOutcomes.isEmpty else { return }
        try record(context.notedEntryOutcomes)
        context.notedEntryOutcomes.removeAll(keepingCapacity: true)
    }

    /// Up to `limit` (at most `maximumPage`) entries past position `after` (`-1` for the first), in order; only
    /// those in `state` when given.
    /// - Throws: `JobError` `store_error`.
    public func page(after: Int, limit: Int, state: JobEntryState? = nil) throws(JobError) -> [JobEntry] {
        let limit = max(0, min(limit, Self.maximumPage))
        return try call("read the file list") { try $0.entries(jobID: jobID, after: after, limit: limit, state: state) }
    }

    /// How the list stands: whether sealed, entries and sizes per state.
    /// - Throws: `JobError` `store_error`.
    public func counts() throws(JobError) -> JobEntryCounts {
        try call("count the file list") { try $0.entryCounts(jobID: jobID) }
    }

    private func call<R>(_ what: String, _ body: (any JobEntryStoring) throws -> R) throws(JobError) -> R {
        guard let store else {
            throw JobError(
                code: "store_error", message: "cannot \(what): this daemon's job store keeps no file lists")
        }
        do {
            return try body(store)
        } catch {
            throw JobError(
                code: "store_error", message: "cannot \(what) of job \(jobID.prefix(8)): \(error); the job is retried",
                retryable: true)
        }
    }
}

/// A job host whose store keeps entry lists (the scheduler's, over either store).
@LoopActor
protocol JobEntryHost: AnyObject {
    /// The store of entry lists, or `nil` when it keeps none.
    var entryStore: (any JobEntryStoring)? { get }
}

extension JobContext {
    /// This job's list of entries in the job store (see `JobEntries`).
    public var entries: JobEntries {
        JobEntries(jobID: id, store: (host as? any JobEntryHost)?.entryStore, context: self)
    }
}

extension Scheduler: JobEntryHost {
    /// Both stores keep lists; another `JobStoring` (a test's) may not.
    var entryStore: (any JobEntryStoring)? { store as? any JobEntryStoring }
}
