import TrailbookSQLite

/// A job removed from the store by retention (`JobStore.pruneEnded`).
public struct PrunedJob: Sendable, Equatable {
    /// The job's id.
    public var id: String
    /// Its kind, so the kind can drop what it keeps elsewhere (`JobKind.jobsPruned`).
    public var kind: String
}

/// A store that retention (`Retention`) can prune: the SQLite `JobStore` and the shared `PostgresJobStore`.
///
/// Every call answers through `completion` on the loop thread: the SQLite store at once (before the call returns),
/// the shared store once PostgreSQL answered (at most its request timeout later, then
/// `JobStoreError.unavailable`), while the loop goes on serving clients and jobs. Errors are the store's own.
public protocol PruningJobStoring: AnyObject {
    /// Claims the right to prune for this daemon: `false` if another daemon sharing the store is pruning now
    /// (it then prunes for everyone). Always `true` on a store of one daemon.
    func beginPruning(completion: @escaping (Result<Bool, any Error>) -> Void)
    /// Gives up the right `beginPruning` gave, without waiting (best effort: a lost connection gives it up anyway).
    func endPruning()
    /// Deletes at most `limit` jobs that ended in `state` with their last change at or before `endedBefore` (Unix
    /// seconds), in one transaction, never one with a pending clean-up; answers them (on an error nothing is
    /// deleted).
    func pruneEnded(
        state: JobState, endedBefore: Double, limit: Int, completion: @escaping (Result<[PrunedJob], any Error>) -> Void)
    /// How many jobs that ended in `state` at or before `endedBefore` are kept for their pending clean-up.
    func endedJobsAwaitingCleanUp(
        state: JobState, endedBefore: Double, completion: @escaping (Result<Int, any Error>) -> Void)
    /// Gives at most `pages` free pages back to the file system; answers the free pages left (0 when the store
    /// has no such step).
    func reclaimFreePages(atMost pages: Int, completion: @escaping (Result<Int, any Error>) -> Void)
    /// Truncates the store's write-ahead log where it has one it controls.
    func checkpointLog(completion: @escaping (Result<Void, any Error>) -> Void)
    /// The store's size on disk, in bytes.
    func sizeInBytes(completion: @escaping (Result<Int64, any Error>) -> Void)
}

/// The SQLite store answers at once: its calls are local and short (one batch, one vacuum step).
extension JobStore: PruningJobStoring {
    /// Always `true`: one daemon owns a SQLite store (its home is locked).
    public func beginPruning(completion: @escaping (Result<Bool, any Error>) -> Void) { completion(.success(true)) }

    /// Nothing to give up.
    public func endPruning() {}

    /// `pruneEnded(state:endedBefore:limit:)`, answered at once.
    public func pruneEnded(
        state: JobState, endedBefore: Double, limit: Int, completion: @escaping (Result<[PrunedJob], any Error>) -> Void
    ) {
        completion(Result { try pruneEnded(state: state, endedBefore: endedBefore, limit: limit) })
    }

    /// `endedJobsAwaitingCleanUp(state:endedBefore:)`, answered at once.
    public func endedJobsAwaitingCleanUp(
        state: JobState, endedBefore: Double, completion: @escaping (Result<Int, any Error>) -> Void
    ) {
        completion(Result { try endedJobsAwaitingCleanUp(state: state, endedBefore: endedBefore) })
    }

    /// `reclaimFreePages(atMost:)`, answered at once.
    public func reclaimFreePages(atMost pages: Int, completion: @escaping (Result<Int, any Error>) -> Void) {
        completion(Result { try reclaimFreePages(atMost: pages) })
    }

    /// `checkpointLog()`, answered at once.
    public func checkpointLog(completion: @escaping (Result<Void, any Error>) -> Void) {
        completion(Result { try checkpointLog() })
    }

    /// `sizeInBytes()`, answered at once.
    public func sizeInBytes(completion: @escaping (Result<Int64, any Error>) -> Void) {
        completion(Result { try sizeInBytes() })
    }
}

extension JobStore {
    /// The ended states, spelled as the partial index `jobs_ended` (migration 9) is: a query names them in these
    /// exact words so SQLite uses that index (it matches a partial index's WHERE by its terms).
    static let endedStates = "(state = 'succeeded' OR state = 'failed' OR state = 'cancelled')"

    /// Makes the store give deleted pages back to the file system on `PRAGMA incremental_vacuum`
    /// (https://www.sqlite.org/pragma.html#pragma_auto_vacuum). Call before anything else on the connection.
    ///
    /// A new file gets `auto_vacuum = INCREMENTAL` before its first table. A store made before retention existed
    /// (auto_vacuum NONE) is switched once, at the daemon's start, with a `VACUUM` (it rewrites the file: a few
    /// seconds for a large store, never again after). A `VACUUM` that fails (the disk cannot hold the copy) leaves
    /// the store as it was, still correct, only not shrinking; it is tried again on the next start.
    /// - Returns: what was done, for the daemon's log; `nil` when nothing needed doing.
    /// - Throws: `SQLiteError` if the mode cannot be read.
    static func useIncrementalVacuum(_ database: Database) throws -> String? {
        let incremental: Int64 = 2
        guard try database.query("PRAGMA auto_vacuum").first?.int(0) != incremental else { return nil }
        try database.execute("PRAGMA auto_vacuum = INCREMENTAL")
        // An empty file takes the mode with its first table; an existing one only through VACUUM.
        guard try database.query("SELECT count(*) FROM sqlite_master").first?.int(0) ?? 0 > 0 else { return nil }
        do {
            try database.execute("VACUUM")
            return "switched the job store to incremental vacuum (a one-time VACUUM), so pruned jobs free disk space"
        } catch {
            let why = "\(error.cause): \(error)"
            return "warning: could not switch the job store to incremental vacuum (\(why)); pruned jobs free "
                + "space inside the store but the file does not shrink; tried again on the next start"
        }
    }

    /// Deletes at most `limit` jobs that ended in `state` (`succeeded`, `failed` or `cancelled`) with their last
    /// change at or before `endedBefore` (Unix seconds), in one transaction, and returns them. A job with a pending
    /// clean-up (a tus `DELETE` or S3 abort not done yet, a `cleanups` row) is never deleted: it goes in a later
    /// batch once its clean-up is done or given up. The job's row holds its checkpoint, so that goes with it.
    /// - Throws: `SQLiteError` (locked, disk full: nothing is deleted).
    public func pruneEnded(state: JobState, endedBefore: Double, limit: Int) throws -> [PrunedJob] {
        precondition(state.isTerminal, "only ended jobs are pruned")
        return try database.query(
            """
            DELETE FROM jobs WHERE sequence IN (
                SELECT sequence FROM jobs WHERE \(Self.endedStates) AND state = ? AND updated_at <= ?
                    AND NOT EXISTS (SELECT 1 FROM cleanups WHERE cleanups.job_id = jobs.id)
                LIMIT ?)
            RETURNING id, kind
            """,
            [.text(state.rawValue), .real(endedBefore), .integer(Int64(limit))]
        ).compactMap { row in
            guard let id = row.text(0), let kind = row.text(1) else { return nil }
            return PrunedJob(id: id, kind: kind)
        }
    }

    /// How many jobs that ended in `state` at or before `endedBefore` are kept for their pending clean-up.
    /// - Throws: `SQLiteError`.
    public func endedJobsAwaitingCleanUp(state: JobState, endedBefore: Double) throws -> Int {
        Int(
            try database.query(
                """
                SELECT count(*) FROM jobs JOIN cleanups ON cleanups.job_id = jobs.id
                WHERE \(Self.endedStates) AND state = ? AND updated_at <= ?
                """,
                [.text(state.rawValue), .real(endedBefore)]
            ).first?.int(0) ?? 0)
    }

    /// Gives at most `pages` free pages back to the file system (`PRAGMA incremental_vacuum(N)`), one short
    /// transaction. In WAL mode the file shrinks at the next checkpoint (see `checkpointLog`).
    /// - Returns: the free pages left; 0 when the store is not in incremental vacuum mode (its one-time switch
    ///   failed, `useIncrementalVacuum`): then no page can be given back, and the free ones are reused inside it.
    /// - Throws: `SQLiteError`.
    public func reclaimFreePages(atMost pages: Int) throws -> Int {
        let incremental: Int64 = 2
        guard try database.query("PRAGMA auto_vacuum").first?.int(0) == incremental else { return 0 }
        _ = try database.query("PRAGMA incremental_vacuum(\(max(1, pages)))")
        return Int(try database.query("PRAGMA freelist_count").first?.int(0) ?? 0)
    }

    /// Copies the write-ahead log into the store and truncates it to zero bytes, so the space freed by
    /// `reclaimFreePages` leaves both files. Passive about other connections: with a reader active it does what
    /// it can and the next checkpoint finishes.
    /// - Throws: `SQLiteError`.
    public func checkpointLog() throws {
        _ = try database.query("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    /// The store's size in bytes: pages in use plus free pages (the database file, without its WAL).
    /// - Throws: `SQLiteError`.
    public func sizeInBytes() throws -> Int64 {
        let pages = try database.query("PRAGMA page_count").first?.int(0) ?? 0
        let pageSize = try database.query("PRAGMA page_size").first?.int(0) ?? 0
        return pages * pageSize
    }
}
