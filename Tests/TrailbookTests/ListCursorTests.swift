import Foundation
import TestSupport
import Testing
import TrailbookPostgres
import TrailbookSQLite

@testable import TrailbookEngine

/// `list`'s cursor (`before`, a job's `sequence`) on both stores: each page is the newest `limit` jobs older than the
/// cursor that match the filters, in submission order, read down an index from the cursor (issue 39: the web page
/// pages through 100 000 jobs).
struct ListCursorTests {
    private func id(_ n: Int) -> String { String(format: "0e000000-0000-4000-8000-%012d", n) }

    /// Jobs 1…9 in states cycling queued, succeeded, paused; job 5 of kind `upload`.
    private func jobs() -> [JobRecord] {
        let states: [JobState] = [.queued, .succeeded, .paused]
        return (1...9).map { n in
            var job = JobStoreTests().makeJob(id(n), state: states[(n - 1) % 3])
            if n == 5 { job.kind = "upload" }
            return job
        }
    }

    /// What both stores must answer, given the jobs' sequences by number (`sequence[n]` is job n's).
    private func expectPages(
        _ read: (_ states: [JobState]?, _ kind: String?, _ before: Int64?, _ limit: Int) throws -> [JobRecord],
        sequence: [Int: Int64]
    ) throws {
        let numbers = { (jobs: [JobRecord]) in jobs.map { Int($0.id.suffix(2))! } }
        #expect(numbers(try read(nil, nil, nil, 3)) == [7, 8, 9])
        #expect(numbers(try read(nil, nil, sequence[7], 3)) == [4, 5, 6])
        #expect(numbers(try read(nil, nil, sequence[4], 3)) == [1, 2, 3])
        #expect(numbers(try read(nil, nil, sequence[1], 3)) == [])
        // A cursor past the newest job is the first page; a filtered page goes on from its cursor.
        #expect(numbers(try read(nil, nil, sequence[9]! + 1_000, 2)) == [8, 9])
        #expect(numbers(try read([.queued], nil, sequence[7], 5)) == [1, 4])
        #expect(numbers(try read([.queued, .paused], nil, sequence[6], 2)) == [3, 4])
        #expect(numbers(try read(nil, "sleep", sequence[6], 2)) == [3, 4])
        #expect(numbers(try read([.paused, .queued], "upload", sequence[9], 5)) == [])
        #expect(numbers(try read([.queued], "upload", sequence[6], 5)) == [])
        #expect(numbers(try read(nil, "upload", sequence[6], 5)) == [5])
    }

    @Test func sqliteStorePagesByTheCursorDownAnIndex() throws {
        let store = try JobStore(path: JobStoreTests().temporaryPath())
        var sequence: [Int: Int64] = [:]
        for (index, var job) in jobs().enumerated() {
            try store.insert(&job)
            sequence[index + 1] = job.sequence
        }
        try expectPages({ try store.jobs(states: $0, kind: $1, before: $2, limit: $3) }, sequence: sequence)

        // Each page is a search from its cursor: by `jobs_by_state_sequence` (state and sequence) with states, by
        // the rowid without; never a scan of the table, never a sort of every row.
        for states in [[JobState.queued, .paused], nil] {
            let select = try #require(JobStore.listSelect(states: states, kind: "sleep", before: 5, limit: 100))
            let plan = try store.database.query("EXPLAIN QUERY PLAN " + select.sql, select.bindings)
                .compactMap { $0.text(3) }.joined(separator: "; ")
            #expect(!plan.contains("SCAN jobs"), "\(plan)")
            if states == nil {
                #expect(plan.contains("SEARCH jobs USING INTEGER PRIMARY KEY (rowid<?)"), "\(plan)")
            } else {
                #expect(plan.contains("USING INDEX jobs_by_state_sequence (state=? AND sequence<?)"), "\(plan)")
            }
        }
    }

    @Test func sharedStorePagesByTheCursorDownTheSequenceIndex() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let connection = try PostgresConnectionString(server.socketConnectionString)
        let store = try PostgresJobStore(
            connectionString: connection, options: SharedStoreOptions(), daemonID: "daemon-a")
        var inserted = jobs()
        try store.commitGroup(
            inserting: &inserted, digests: inserted.map { _ in nil }, duplicateKeys: inserted.map { _ in [] },
            updating: [], durable: true)
        let sequence = Dictionary(
            uniqueKeysWithValues: inserted.enumerated().map { ($0.offset + 1, $0.element.sequence) })
        try expectPages({ try store.jobs(states: $0, kind: $1, before: $2, limit: $3) }, sequence: sequence)

        // The read can go down `trailbook_jobs_sequence` from the cursor, in order, with no sort: what the planner
        // picks for a page of a big table. (Nine rows are cheaper to scan whole or by bitmap: those plans are off.)
        let statement = PostgresJobStore.statement(.filtered(states: nil, kind: "sleep", before: 5, limit: 100))
        let results = try store.run([
            PostgresStatement("SET enable_seqscan = off"), PostgresStatement("SET enable_bitmapscan = off"),
            PostgresStatement("EXPLAIN " + statement.sql, statement.parameters),
        ])
        let plan = results[2].rows.compactMap { $0.text(0) }.joined(separator: "; ")
        #expect(plan.contains("Index Scan Backward using trailbook_jobs_sequence"), "\(plan)")
        #expect(plan.contains("Index Cond: (sequence < "), "\(plan)")
    }
}
