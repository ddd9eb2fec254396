import Foundation
import TrailbookPostgres

extension PostgresJobStore {
    /// The lifecycle writes of a group (`updating`, each of another job) as one statement, set-based: one array a
    /// column (`unnest`), each row written exactly as `writeStatement` writes it alone — fenced by its lease token
    /// (or, unleased, only while the job waits), the lease released and `end_token` recorded when it leaves
    /// `running`, its duplicate keys dropped when it ended and its clean-up recorded when asked, the daemon
    /// waiting on a pending control request told (`ended <job>`), and an earlier try of the same write that
    /// landed counted as written. Returns a row per job written (now or by that earlier try); a job with none
    /// was fenced off. Times are the database's (`DatabaseClock`).
    func writesStatement(_ updating: [(job: JobRecord, addingCleanUp: Bool)]) -> PostgresStatement {
        let jobs = updating.map(\.job)
        func column(_ value: (JobRecord) -> PostgresValue) -> PostgresValue { .array(jobs.map(value)) }
        return PostgresStatement(
            """
            WITH w AS (
                SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[], $5::text[], $6::text[],
                    $7::float8[], $8::text[], $9::boolean[], $10::bigint[], $11::boolean[], $12::boolean[])
                    AS w(id, state, attempt, cancellation, error, result, retry_in, progress, resumes, token,
                        terminal, cleanup)
            ), asked AS (
                SELECT j.id FROM trailbook_jobs j JOIN w ON j.id = w.id
                WHERE j.control IS NOT NULL AND w.state <> 'running'
            ), written AS (
                UPDATE trailbook_jobs AS j SET state = w.state, attempt = w.attempt, cancellation = w.cancellation,
                    error = w.error, result = w.result, retry_at = \(DatabaseClock.now) + w.retry_in,
                    progress = w.progress, updated_at = \(DatabaseClock.now), resumes_attempt = w.resumes,
                    lease_host = CASE WHEN w.state = 'running' THEN j.lease_host END,
                    lease_daemon = CASE WHEN w.state = 'running' THEN j.lease_daemon END,
                    lease_token = CASE WHEN w.state = 'running' THEN j.lease_token END,
                    lease_expires_at = CASE WHEN w.state = 'running' THEN j.lease_expires_at END,
                    control = CASE WHEN w.state = 'running' THEN j.control END,
                    end_token = CASE WHEN w.state = 'running' THEN j.end_token ELSE w.token END
                FROM w
                WHERE j.id = w.id AND CASE WHEN w.token IS NOT NULL THEN j.lease_token = w.token AND j.state = 'running'
                    ELSE j.lease_token IS NULL AND j.state IN ('queued', 'paused', 'needs_retry') END
                RETURNING j.id
            ), dropped AS (
                DELETE FROM trailbook_duplicate_keys
                WHERE job_id IN (SELECT written.id FROM written JOIN w ON w.id = written.id WHERE w.terminal)
            ), cleanup AS (
                INSERT INTO trailbook_cleanups (job_id, tries, next_at, created_at)
                SELECT written.id, 0, \(DatabaseClock.now), \(DatabaseClock.now)
                FROM written JOIN w ON w.id = written.id WHERE w.cleanup
                ON CONFLICT DO NOTHING
            )
            SELECT written.id, (
                SELECT pg_notify('\(PostgresJobQueue.controlChannel)', 'ended ' || asked.id) FROM asked
                WHERE asked.id = written.id
            )::text FROM written
            UNION ALL
            SELECT j.id, NULL::text FROM trailbook_jobs j JOIN w ON j.id = w.id
            WHERE w.token IS NOT NULL AND w.state <> 'running' AND j.end_token = w.token AND j.state = w.state
            """,
            [
                column { .text($0.id) }, column { .text($0.state.rawValue) }, column { .integer(Int64($0.attempt)) },
                column { Self.optionalText($0.cancellation.map { JSONCoding.value(of: $0) }) },
                column { Self.optionalText($0.error.map { JSONCoding.value(of: $0) }) },
                column { Self.optionalText($0.result) }, column { DatabaseClock.offset(of: $0.retryAt) },
                column { .text($0.progress.jsonText) }, column { .bool($0.resumesAttempt) },
                column { self.fenceToken(of: $0.id).map { .integer($0) } ?? .null },
                column { .bool($0.state.isTerminal) }, .array(updating.map { .bool($0.addingCleanUp) }),
            ])
    }
}
