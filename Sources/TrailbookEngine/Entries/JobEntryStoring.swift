/// A job store that keeps jobs' entry lists (`JobEntries`): the SQLite `JobStore` and the shared
/// `PostgresJobStore` (so that another daemon resuming a job finds its list). A job's entries are deleted with the
/// job (the tables' foreign keys cascade), so retention's prune takes them too.
///
/// Calls are made on the loop thread and answer synchronously, as `JobStoring`'s do. Errors are the store's own.
public protocol JobEntryStoring: AnyObject {
    /// Deletes every entry of job `jobID` and its seal, in one transaction (a walk cut short, or a list to take
    /// again).
    /// - Throws: the store's error.
    func removeEntries(jobID: String) throws
    /// Adds `entries` to job `jobID`'s list in one transaction (all or none), with the outcomes they carry.
    /// - Throws: the store's error (a position already there is a constraint violation: nothing is added).
    func appendEntries(jobID: String, _ entries: [JobEntry]) throws
    /// Moves every entry of job `jobID` at position `from` or later down by `from - to` (the first to `to`),
    /// keeping their order, in one statement; no entry may lie between `to` and the last moved one's new place.
    /// - Throws: the store's error (nothing is moved).
    func moveEntries(jobID: String, from: Int, to: Int) throws
    /// Marks job `jobID`'s list complete with `count` entries, after its last `appendEntries`.
    /// - Throws: the store's error.
    func sealEntries(jobID: String, count: Int) throws
    /// Records outcomes of entries at the given positions, in one transaction.
    /// - Throws: the store's error.
    func recordOutcomes(jobID: String, _ outcomes: [(position: Int, outcome: JobEntryOutcome)]) throws
    /// Up to `limit` entries of job `jobID` past position `after` (`-1` for the first), in position order, only
    /// those in `state` when given.
    /// - Throws: the store's error.
    func entries(jobID: String, after: Int, limit: Int, state: JobEntryState?) throws -> [JobEntry]
    /// How job `jobID`'s list stands.
    /// - Throws: the store's error.
    func entryCounts(jobID: String) throws -> JobEntryCounts
}
