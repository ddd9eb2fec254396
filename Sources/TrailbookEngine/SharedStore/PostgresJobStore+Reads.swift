import Foundation
import TrailbookPostgres

extension PostgresJobStore {
    // MARK: JobStoring reads

    public func job(key: String) throws -> (job: JobRecord, digest: String?)? {
        let reading = try readWaiting(.idempotencyKey(key))
        return reading.jobs.first.map { ($0, reading.submitDigest) }
    }

    public func unfinishedJobs(sharing keys: [String], kind: String) throws -> [JobRecord] {
        guard !keys.isEmpty else { return [] }
        return try readWaiting(.unfinished(sharing: keys, kind: kind)).jobs
    }

    /// Always: the shared schema records duplicate keys from its first job on.
    public func duplicateKeysIndexed() throws -> Bool { true }

    public func indexDuplicateKeys(_ keys: (JobRecord) -> [String]) throws {}

    public func checkpoint(id: String) throws -> JSONValue? {
        guard let text = try rows("SELECT checkpoint FROM trailbook_jobs WHERE id = $1", [.text(id)]).first?.text(0)
        else { return nil }
        return try? JSONCoding.decode(JSONValue.self, from: Array(text.utf8))
    }

    public func job(id: String) throws -> JobRecord? {
        try records("SELECT \(Self.columns) FROM trailbook_jobs WHERE id = $1", [.text(id)]).first
    }

    public func jobs(idPrefix prefix: String, limit: Int) throws -> [JobRecord] {
        try readWaiting(.idPrefix(prefix, limit: limit)).jobs
    }

    public func jobs(states: [JobState]?, kind: String?, before: Int64?, limit: Int) throws -> [JobRecord] {
        try readWaiting(.filtered(states: states, kind: kind, before: before, limit: limit)).jobs
    }

    public func read(_ query: JobQuery, counting: Bool, completion: @escaping (Result<JobReading, any Error>) -> Void) {
        let statements = [Self.statement(query)] + (counting ? [Self.countsStatement] : [])
        sendWaitingAtMost({ database in try await database.queue!.connection.pipeline(statements).map(\.rows) }) { result in
            completion(result.map { Self.reading(query, $0) })
        }
    }

    /// `read(query, counting: false)`, waited for on the calling thread (the `JobStoring` calls).
    func readWaiting(_ query: JobQuery) throws -> JobReading {
        Self.reading(query, try run([Self.statement(query)]).map(\.rows))
    }

    /// What `statement(query)`'s rows (and `countsStatement`'s after them, when sent) say.
    static func reading(_ query: JobQuery, _ rows: [[PostgresRow]]) -> JobReading {
        let digest: String? = if case .idempotencyKey = query { rows[0].first?.text(columnCount) } else { nil }
        return JobReading(
            jobs: rows[0].compactMap(Self.record), unfinishedCounts: rows.count > 1 ? Self.counts(rows[1]) : nil,
            submitDigest: digest)
    }

    /// The `SELECT` of `query`, of `columns`.
    static func statement(_ query: JobQuery) -> PostgresStatement {
        switch query {
        case .idPrefix(let prefix, let limit):
            let escaped = prefix.lowercased().filter { $0.isHexDigit || $0 == "-" }
            return PostgresStatement(
                "SELECT \(columns) FROM trailbook_jobs WHERE id >= $1 AND id < $2 ORDER BY id LIMIT $3::bigint",
                [.text(escaped), .text(escaped + "\u{7f}"), .integer(Int64(limit))])
        case .filtered(let states?, let kind, let before, let limit):
            return stateListStatement(states: states, kind: kind, before: before, limit: limit)
        case .filtered(let states, let kind, let before, let limit):
            // `sequence < $4` with no cursor is every row: the read goes down the sequence from the cursor either way.
            return PostgresStatement(
                """
                SELECT * FROM (
                    SELECT \(columns) FROM trailbook_jobs
                    WHERE ($1::text[] IS NULL OR state = ANY($1::text[])) AND ($2::text IS NULL OR kind = $2)
                    AND sequence < $4::bigint
                    ORDER BY sequence DESC LIMIT $3::bigint
                ) newest ORDER BY sequence
                """,
                [
                    states.map { .textArray($0.map(\.rawValue)) } ?? .null, kind.map { .text($0) } ?? .null,
                    .integer(Int64(limit)), .integer(before ?? Int64.max),
                ])
        case .idempotencyKey(let key):
            // `submit_digest` after the record's columns (`columnCount`).
            return PostgresStatement(
                "SELECT \(columns), submit_digest FROM trailbook_jobs WHERE idempotency_key = $1", [.text(key)])
        case .unfinished(let keys, let kind):
            return PostgresStatement(
                """
                SELECT \(columns) FROM trailbook_jobs WHERE id IN (
                    SELECT job_id FROM trailbook_duplicate_keys WHERE key = ANY($1::text[]))
                AND kind = $2 AND state IN ('queued', 'running', 'paused', 'needs_retry') ORDER BY sequence
                """, [.textArray(keys), .text(kind)])
        }
    }

    public func queuedJobs(limit: Int, skipping: Set<String>) throws -> [JobRecord] {
        let queued = try records(
            "SELECT \(Self.columns) FROM trailbook_jobs WHERE state = 'queued' ORDER BY priority DESC, sequence LIMIT $1::bigint",
            [.integer(Int64(limit + skipping.count))])
        return Array(queued.lazy.filter { !skipping.contains($0.id) }.prefix(limit))
    }

    public func highestQueuedPriority(skipping: Set<String>) throws -> Int? {
        try queuedJobs(limit: 1, skipping: skipping).first?.options.priority
    }

    public func countsByState() throws -> [JobState: Int] {
        Self.counts(try run([Self.countsStatement])[0].rows)
    }

    /// Ended jobs are most of the table and no summary shows them: only unfinished states are counted.
    static let countsStatement = PostgresStatement(
        "SELECT state, count(*) FROM trailbook_jobs WHERE state IN ('queued', 'running', 'paused', 'needs_retry') GROUP BY state")

    /// The counts of `countsStatement`'s rows, by state.
    static func counts(_ rows: [PostgresRow]) -> [JobState: Int] {
        var counts: [JobState: Int] = [:]
        for row in rows {
            if let state = row.text(0).flatMap(JobState.init(rawValue:)) { counts[state] = Int(row.int(1) ?? 0) }
        }
        return counts
    }

    /// The block comes from the shared sequence `trailbook_feed_seq`, under an advisory lock so that two daemons
    /// starting together get disjoint blocks.
    public func reserveSequenceBlock(count: Int64) throws -> Int64 {
        let results = try run([
            PostgresStatement("SELECT pg_advisory_xact_lock($1::bigint)", [.integer(Self.feedSequenceLockKey)]),
            PostgresStatement(
                "SELECT setval('trailbook_feed_seq', nextval('trailbook_feed_seq') + $1::bigint - 1)", [.integer(count)]),
        ])
        return (results[1].rows.first?.int(0) ?? count) - count + 1
    }

    /// "tbfeed" in ASCII: the advisory lock of `reserveSequenceBlock`.
    static let feedSequenceLockKey: Int64 = 0x7462_6665_6564

    /// `now` and the times returned are the daemon's wall clock; the rows' are the database's (`DatabaseClock`).
    public func dueCleanUps(now: Double) throws -> [PendingCleanUp] {
        try rows(
            """
            SELECT job_id, tries, \(DatabaseClock.remaining("created_at")), \(DatabaseClock.remaining("next_at"))
            FROM trailbook_cleanups WHERE $1::float8 IS NULL OR next_at <= \(DatabaseClock.at(1)) ORDER BY next_at
            """,
            [now.isFinite ? DatabaseClock.offset(of: now) : .null]
        ).compactMap { row in
            row.text(0).map {
                PendingCleanUp(
                    jobID: $0, tries: Int(row.int(1) ?? 0),
                    createdAt: DatabaseClock.local(remaining: row.double(2)) ?? 0,
                    nextAt: DatabaseClock.local(remaining: row.double(3)) ?? 0)
            }
        }
    }

    /// `nextAt` is the daemon's wall clock, kept on the database's (`DatabaseClock`).
    public func rescheduleCleanUp(jobID: String, tries: Int, nextAt: Double, error: String) throws {
        _ = try rows(
            """
            UPDATE trailbook_cleanups SET tries = $2::integer, next_at = \(DatabaseClock.at(3)), last_error = $4
            WHERE job_id = $1
            """,
            [.text(jobID), .integer(Int64(tries)), DatabaseClock.offset(of: nextAt), .text(error)])
    }

    public func removeCleanUp(jobID: String) throws {
        _ = try rows("DELETE FROM trailbook_cleanups WHERE job_id = $1", [.text(jobID)])
    }

    /// Nothing to do: PostgreSQL's row locks are never waited for here (claims skip locked rows).
    public func failFastOnLocks() {}
}
