import TrailbookPostgres

/// Entry lists in the shared store (`PostgresJobQueue` migration 6: `trailbook_job_entries`,
/// `trailbook_job_entry_lists`), so that a daemon that resumes another's job finds its list. Each call is one
/// pipeline: one round trip, one transaction. A batch goes as one statement over arrays (`unnest`), not one
/// statement per entry.
extension PostgresJobStore: JobEntryStoring {
    public func removeEntries(jobID: String) throws {
        _ = try run([
            PostgresStatement("DELETE FROM trailbook_job_entries WHERE job_id = $1", [.text(jobID)]),
            PostgresStatement("DELETE FROM trailbook_job_entry_lists WHERE job_id = $1", [.text(jobID)]),
        ])
    }

    public func appendEntries(jobID: String, _ entries: [JobEntry]) throws {
        guard !entries.isEmpty else { return }
        // Empty code and message stand for NULL (`textArray` has no NULL element); no code or message is empty.
        _ = try run([
            PostgresStatement(
                """
                INSERT INTO trailbook_job_entries (job_id, position, size, item, state, code, message)
                SELECT $1, p::bigint, s::bigint, i, st, nullif(c, ''), nullif(m, '')
                FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS u(p, s, i, st, c, m)
                """,
                [
                    .text(jobID), .textArray(entries.map { String($0.position) }),
                    .textArray(entries.map { String($0.size) }), .textArray(entries.map { JobStore.text($0.item) }),
                    .textArray(entries.map { $0.outcome.state.rawValue }),
                    .textArray(entries.map { $0.outcome.code ?? "" }),
                    .textArray(entries.map { $0.outcome.message ?? "" }),
                ])
        ])
    }

    public func moveEntries(jobID: String, from: Int, to: Int) throws {
        _ = try run([
            PostgresStatement(
                """
                UPDATE trailbook_job_entries SET position = position - $1::bigint
                WHERE job_id = $2 AND position >= $3::bigint
                """,
                [.integer(Int64(from - to)), .text(jobID), .integer(Int64(from))])
        ])
    }

    public func sealEntries(jobID: String, count: Int) throws {
        _ = try run([
            PostgresStatement(
                """
                INSERT INTO trailbook_job_entry_lists (job_id, count) VALUES ($1, $2::bigint)
                ON CONFLICT (job_id) DO UPDATE SET count = excluded.count
                """, [.text(jobID), .integer(Int64(count))])
        ])
    }

    public func recordOutcomes(jobID: String, _ outcomes: [(position: Int, outcome: JobEntryOutcome)]) throws {
        guard !outcomes.isEmpty else { return }
        _ = try run([
            PostgresStatement(
                """
                UPDATE trailbook_job_entries e SET state = u.st, code = nullif(u.c, ''), message = nullif(u.m, '')
                FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS u(p, st, c, m)
                WHERE e.job_id = $1 AND e.position = u.p::bigint
                """,
                [
                    .text(jobID), .textArray(outcomes.map { String($0.position) }),
                    .textArray(outcomes.map { $0.outcome.state.rawValue }),
                    .textArray(outcomes.map { $0.outcome.code ?? "" }),
                    .textArray(outcomes.map { $0.outcome.message ?? "" }),
                ])
        ])
    }

    public func entries(jobID: String, after: Int, limit: Int, state: JobEntryState?) throws -> [JobEntry] {
        try run([
            PostgresStatement(
                """
                SELECT position, size, item, state, code, message FROM trailbook_job_entries
                WHERE job_id = $1 AND ($2::text IS NULL OR state = $2) AND position > $3::bigint
                ORDER BY position LIMIT $4::bigint
                """,
                [
                    .text(jobID), state.map { .text($0.rawValue) } ?? .null, .integer(Int64(after)),
                    .integer(Int64(limit)),
                ])
        ])[0].rows.compactMap(JobStore.entry)
    }

    public func entryCounts(jobID: String) throws -> JobEntryCounts {
        let results = try run([
            PostgresStatement("SELECT 1 FROM trailbook_job_entry_lists WHERE job_id = $1", [.text(jobID)]),
            PostgresStatement(
                "SELECT state, count(*), coalesce(sum(size), 0) FROM trailbook_job_entries WHERE job_id = $1 GROUP BY state",
                [.text(jobID)]),
        ])
        return JobStore.counts(sealed: !results[0].rows.isEmpty, results[1].rows)
    }
}
