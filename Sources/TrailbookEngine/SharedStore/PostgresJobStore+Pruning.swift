import TrailbookPostgres

extension PostgresJobStore: PruningJobStoring {
    /// "tbprune" in ASCII: the session advisory lock one pruning daemon holds.
    static let pruneLockKey: Int64 = 0x74_6270_7275_6e65

    /// `pg_try_advisory_lock`: one daemon prunes at a time; held by this session until `endPruning` (or until
    /// the connection is lost).
    public func beginPruning() throws -> Bool {
        try rows("SELECT pg_try_advisory_lock($1::bigint)", [.integer(Self.pruneLockKey)]).first?.bool(0) ?? false
    }

    public func endPruning() {
        _ = try? rows("SELECT pg_advisory_unlock($1::bigint)", [.integer(Self.pruneLockKey)])
    }

    /// One statement (one transaction): the batch's rows are locked `SKIP LOCKED`, so a row another transaction
    /// holds waits for a later batch; the jobs' duplicate keys go with them. Uses the partial index of schema
    /// migration 4. `endedBefore` is the daemon's wall clock; it is compared as an age on the database's clock
    /// (`DatabaseClock`), the clock that wrote `updated_at`, so a daemon whose clock is ahead prunes no fresh end.
    public func pruneEnded(state: JobState, endedBefore: Double, limit: Int) throws -> [PrunedJob] {
        precondition(state.isTerminal, "only ended jobs are pruned")
        return try rows(
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
            [.text(state.rawValue), DatabaseClock.offset(of: endedBefore), .integer(Int64(limit))]
        ).compactMap { row in
            guard let id = row.text(0), let kind = row.text(1) else { return nil }
            return PrunedJob(id: id, kind: kind)
        }
    }

    /// `endedBefore` as `pruneEnded` takes it.
    public func endedJobsAwaitingCleanUp(state: JobState, endedBefore: Double) throws -> Int {
        Int(
            try rows(
                """
                SELECT count(*) FROM trailbook_jobs j JOIN trailbook_cleanups c ON c.job_id = j.id
                WHERE state IN ('succeeded', 'failed', 'cancelled') AND state = $1
                    AND j.updated_at <= \(DatabaseClock.at(2))
                """, [.text(state.rawValue), DatabaseClock.offset(of: endedBefore)]
            ).first?.int(0) ?? 0)
    }

    /// Nothing: PostgreSQL's (auto)vacuum makes deleted rows' space reusable; the files do not shrink.
    public func reclaimFreePages(atMost pages: Int) throws -> Int { 0 }

    /// Nothing: the server manages its write-ahead log.
    public func checkpointLog() throws {}

    /// The job tables with their indexes and TOAST (`pg_total_relation_size`), in bytes.
    public func sizeInBytes() throws -> Int64 {
        try rows(
            """
            SELECT pg_total_relation_size('trailbook_jobs') + pg_total_relation_size('trailbook_duplicate_keys')
                + pg_total_relation_size('trailbook_cleanups')
            """
        ).first?.int(0) ?? 0
    }
}
