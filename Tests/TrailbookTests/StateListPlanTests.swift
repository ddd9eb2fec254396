import Foundation
import TestSupport
import Testing
import TrailbookPostgres

@testable import TrailbookEngine

/// `list --state S` on the shared store (PostgreSQL migration 7): with 100 000 jobs of which ten are queued and five
/// paused, a page of a state is read from `trailbook_jobs_by_state_sequence`, newest first from the cursor, never by
/// walking the sequence index or scanning the table and filtering every row.
@Suite(.serialized)
struct StateListPlanTests {
    @Test func aRareStateIsReadDownItsOwnIndexRangeWith100000Jobs() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let store = try PostgresJobStore(
            connectionString: try PostgresConnectionString(server.socketConnectionString),
            options: SharedStoreOptions(),
            daemonID: "daemon-a")
        // Every 10 000th job queued, every 20 000th + 5 paused, the rest succeeded.
        _ = try store.run([
            PostgresStatement(
                """
                INSERT INTO trailbook_jobs (id, kind, state, priority, queue, timeout_s, stall_timeout_s,
                    max_attempts, params, created_at, updated_at)
                SELECT format('0e000000-0000-4000-8000-%s', lpad(n::text, 12, '0')), 'sleep',
                    CASE WHEN n % 10000 = 0 THEN 'queued' WHEN n % 20000 = 5 THEN 'paused' ELSE 'succeeded' END,
                    0, 'default', 0, 0, 1, '{}', n, n
                FROM generate_series(1, 100000) AS n
                """),
            PostgresStatement("ANALYZE trailbook_jobs"),
        ])
        // What the page says: the newest 3 queued jobs, then the next page from its cursor, in submission order.
        let page = try store.jobs(states: [.queued], kind: nil, before: nil, limit: 3)
        #expect(page.map { Int($0.id.suffix(12))! } == [80_000, 90_000, 100_000])
        let older = try store.jobs(states: [.queued, .paused], kind: "sleep", before: page[0].sequence, limit: 4)
        #expect(older.map { Int($0.id.suffix(12))! } == [50_000, 60_000, 60_005, 70_000])
        #expect(try store.jobs(states: [.queued], kind: "upload", before: nil, limit: 3).isEmpty)

        for states in [[JobState.queued], [.queued, .paused]] {
            for generic in [false, true] {
                let query = JobQuery.filtered(states: states, kind: nil, before: nil, limit: 100)
                let statement = PostgresJobStore.statement(query)
                let mode = generic ? "force_generic_plan" : "force_custom_plan"
                let list = "'{" + states.map(\.rawValue).joined(separator: ",") + "}'"
                let results = try store.run([
                    PostgresStatement("DEALLOCATE ALL"),
                    PostgresStatement("PREPARE page_plan AS " + statement.sql),
                    PostgresStatement("SET plan_cache_mode = \(mode)"),
                    PostgresStatement(
                        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
                            + "EXECUTE page_plan(\(list), NULL, 100, \(Int64.max))"),
                ])
                let text = results[3].rows.compactMap { $0.text(0) }.joined(separator: "\n")
                #expect(text.contains("Index Scan Backward using trailbook_jobs_by_state_sequence"), "\(text)")
                #expect(!text.contains("Seq Scan on trailbook_jobs"), "\(text)")
                #expect(!text.contains("trailbook_jobs_sequence"), "\(text)")
                #expect(!text.contains("Rows Removed by Filter"), "rows read and dropped:\n\(text)")
            }
        }
    }
}
