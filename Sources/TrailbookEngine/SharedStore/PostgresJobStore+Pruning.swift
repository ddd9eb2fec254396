import TrailbookPostgres

/// Retention on the shared store: each call one round trip, answered without holding the daemon's loop.
extension PostgresJobStore: PruningJobStoring {
    /// "tbprune" in ASCII: the session advisory lock one pruning daemon holds.
    static let pruneLockKey: Int64 = 0x74_6270_7275_6e65

    /// `pg_try_advisory_lock`: one daemon prunes at a time; held by this session until `endPruning` (or until
    /// the connection is lost).
    public func beginPruning(completion: @escaping (Result<Bool, any Error>) -> Void) {
        sendRows(PostgresStatement("SELECT pg_try_advisory_lock($1::bigint)", [.integer(Self.pruneLockKey)])) {
            completion($0.map { $0.first?.bool(0) ?? false })
        }
    }

    /// Sent without waiting; it lands after the prune's statements (one connection, in order).
    public func endPruning() {
        send({ database in
            _ = try await database.queue!.connection.pipeline([
                PostgresStatement("SELECT pg_advisory_unlock($1::bigint)", [.integer(Self.pruneLockKey)])
            ])
        }) { _ in }
    }

    /// One statement (one transaction): the batch's rows are locked `SKIP LOCKED`, so a row another transaction
    /// holds waits for a later batch; the jobs' duplicate keys go with them. Uses the partial index of schema
    /// migration 4. `endedBefore` is the daemon's wall clock; it is compared as an age on the database's clock
    /// (`DatabaseClock`), the clock that wrote `updated_at`, so a daemon whose clock is ahead prunes no fresh end.
    public func pruneEnded(
        state: JobState, endedBefore: Double, limit: Int, completion: @escaping (Result<[PrunedJob], any Error>) -> Void
    ) {
        sendRows(Self.pruneStatement(state: state, endedBefore: endedBefore, limit: limit)) {
            completion($0.map(Self.pruned))
        }
    }

    /// `pruneEnded(state:endedBefore:limit:completion:)`, waited for on the calling thread.
    /// - Throws: `JobStoreError.unavailable` (nothing deleted).
    public func pruneEnded(state: JobState, endedBefore: Double, limit: Int) throws -> [PrunedJob] {
        Self.pruned(try run([Self.pruneStatement(state: state, endedBefore: endedBefore, limit: limit)])[0].rows)
    }

    /// `endedBefore` as `pruneEnded` takes it.
    public func endedJobsAwaitingCleanUp(
        state: JobState, endedBefore: Double, completion: @escaping (Result<Int, any Error>) -> Void
    ) {
        sendRows(Self.awaitingCleanUpStatement(state: state, endedBefore: endedBefore)) {
            completion($0.map { Int($0.first?.int(0) ?? 0) })
        }
    }

    /// `endedJobsAwaitingCleanUp(state:endedBefore:completion:)`, waited for on the calling thread.
    /// - Throws: `JobStoreError.unavailable`.
    public func endedJobsAwaitingCleanUp(state: JobState, endedBefore: Double) throws -> Int {
        Int(try run([Self.awaitingCleanUpStatement(state: state, endedBefore: endedBefore)])[0].rows.first?.int(0) ?? 0)
    }

    /// Nothing: PostgreSQL's (auto)vacuum makes deleted rows' space reusable; the files do not shrink.
    public func reclaimFreePages(atMost pages: Int, completion: @escaping (Result<Int, any Error>) -> Void) {
        completion(.success(0))
    }

    /// Nothing: the server manages its write-ahead log.
    public func checkpointLog(completion: @escaping (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }

    /// The job tables with their indexes and TOAST (`pg_total_relation_size`), in bytes.
    public func sizeInBytes(completion: @escaping (Result<Int64, any Error>) -> Void) {
        sendRows(
            PostgresStatement(
                """
                SELECT pg_total_relation_size('trailbook_jobs') + pg_total_relation_size('trailbook_duplicate_keys')
                    + pg_total_relation_size('trailbook_cleanups')
                """)
        ) { completion($0.map { $0.first?.int(0) ?? 0 }) }
    }

    /// One statement's rows, without waiting: `sendWaitingAtMost` (the store's request timeout applies).
    func sendRows(_ statement: PostgresStatement, completion: @escaping (Result<[PostgresRow], any Error>) -> Void) {
        sendWaitingAtMost({ database in try await database.queue!.connection.pipeline([statement])[0].rows }) {
            completion($0)
        }
    }

    static func pruneStatement(state: JobState, endedBefore: Double, limit: Int) -> PostgresStatement {
        precondition(state.isTerminal, "only ended jobs are pruned")
        return PostgresStatement(
            """
            WITH doomed AS (
                SELECT id FROM trailbook_jobs j
                WHERE state IN ('succeeded', 'failed', 'cancelled') AND state = $1
                    AND updated_at <= \(DatabaseClock.at(2))
                    AND NOT EXISTS (SELECT 1 FROM trailbook_cleanups c WHERE c.job_id = j.id)
                LIMIT $3::bigint FOR UPDATE SKIP LOCKED
            ), keys AS (
                DELETE FROM trailbook_duplicate_keys WHERE job_id IN (SELECT id FROM doomed)
            )
            DELETE FROM trailbook_jobs WHERE id IN (SELECT id FROM doomed) RETURNING id, kind
            """,
            [.text(state.rawValue), DatabaseClock.offset(of: endedBefore), .integer(Int64(limit))])
    }

    static func awaitingCleanUpStatement(state: JobState, endedBefore: Double) -> PostgresStatement {
        PostgresStatement(
            """
            SELECT count(*) FROM trailbook_jobs j JOIN trailbook_cleanups c ON c.job_id = j.id
            WHERE state IN ('succeeded', 'failed', 'cancelled') AND state = $1
                AND j.updated_at <= \(DatabaseClock.at(2))
            """, [.text(state.rawValue), DatabaseClock.offset(of: endedBefore)])
    }

    static func pruned(_ rows: [PostgresRow]) -> [PrunedJob] {
        rows.compactMap { row in
            guard let id = row.text(0), let kind = row.text(1) else { return nil }
            return PrunedJob(id: id, kind: kind)
        }
    }
}
