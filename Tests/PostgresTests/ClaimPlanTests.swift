import Foundation
import Testing
import TestSupport
import TrailbookLoop
@testable import TrailbookPostgres

/// The claim's cost must not grow with the queue (issue 40): with 100 000 jobs queued over two queues, its plan
/// reads each queue through the claim index in run order and sorts only the few rows taken from each.
@Suite(.serialized)
struct ClaimPlanTests {
    private static let owner = PostgresJobQueue.Owner(host: "host-a", daemonID: "daemon-a")

    /// `EXPLAIN` of the claim for `queues` as the daemon sends it, a prepared statement (planned with its values,
    /// or generically, as PostgreSQL does after a few runs), one line a row.
    @LoopActor
    private static func plan(_ jobs: PostgresJobQueue, queues: [String], generic: Bool) async throws -> [String] {
        let claim = PostgresJobQueue.claimStatement(
            owner: owner, queues: queues, kinds: ["sleep"], limit: 16, leaseSeconds: 30, excluding: ["job-000001"],
            alsoReturning: ["queue"])
        let mode = generic ? "force_generic_plan" : "force_custom_plan"
        let queueList = "'{" + queues.joined(separator: ",") + "}'"
        let results = try await jobs.connection.pipeline([
            PostgresStatement("DEALLOCATE ALL"),
            PostgresStatement("PREPARE claim_plan AS " + claim.sql),
            PostgresStatement("SET plan_cache_mode = \(mode)"),
            PostgresStatement(
                "EXPLAIN (COSTS OFF) EXECUTE claim_plan(\(queueList), 'host-a', 16, 'daemon-a', 30, '{sleep}', '{job-000001}')"),
        ])
        return results[3].rows.compactMap { $0.text(0) }
    }

    @Test func theClaimReadsEachQueueThroughTheIndexWith100000Queued() async throws {
        try await withPostgresServer { server in
            let jobs = PostgresJobQueue(connection: try await connected(to: server))
            defer { jobs.connection.close() }
            try await jobs.migrate()
            _ = try await jobs.connection.pipeline([
                PostgresStatement(
                    """
                    INSERT INTO trailbook_jobs (id, kind, state, priority, queue, timeout_s, stall_timeout_s,
                        max_attempts, params, created_at, updated_at)
                    SELECT format('job-%s', lpad(n::text, 6, '0')), 'sleep', 'queued', n % 3,
                        CASE WHEN n % 4 = 0 THEN 'photos' ELSE 'default' END, 0, 0, 1, '{}', n, n
                    FROM generate_series(1, 100000) AS n
                    """),
                PostgresStatement("ANALYZE trailbook_jobs"),
            ])
            for queues in [["default"], ["default", "photos"]] {
                for generic in [false, true] {
                    let lines = try await Self.plan(jobs, queues: queues, generic: generic)
                    let text = lines.joined(separator: "\n")
                    #expect(text.contains("Index Scan using trailbook_jobs_claim on trailbook_jobs"), "\(text)")
                    #expect(!text.contains("Seq Scan on trailbook_jobs"), "\(text)")
                    #expect(!text.contains("Bitmap Heap Scan on trailbook_jobs"), "\(text)")
                    // The claimed rows are updated through the primary key, not joined with a scan of the table.
                    #expect(text.contains("Index Scan using trailbook_jobs_pkey on trailbook_jobs j"), "\(text)")
                    // A sort, if any, is over the few rows the per-queue scans took (the nested loop over the
                    // queues), never over a scan of the table.
                    for (index, line) in lines.enumerated() where line.contains("Sort") && !line.contains("Sort Key") {
                        let child = lines[(index + 1)...].first { $0.contains("->") }
                        #expect(child?.contains("Nested Loop") == true, "a sort over the queue:\n\(text)")
                    }
                }
            }
            // And it claims what it should, in run order across both queues: the highest priority (2) first, in
            // submission order, passing over the excluded job.
            let claimed = try await jobs.claim(
                owner: Self.owner, queues: ["default", "photos"], kinds: ["sleep"], limit: 4, leaseSeconds: 30,
                excluding: ["job-000002"])
            #expect(claimed.map(\.id) == ["job-000005", "job-000008", "job-000011", "job-000014"])
        }
    }
}
