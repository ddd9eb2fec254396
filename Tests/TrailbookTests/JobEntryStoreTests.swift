import Foundation
import TestSupport
import Testing
import TrailbookPostgres

@testable import TrailbookEngine

/// Jobs' entry lists (`JobEntryStoring`, issue 35) in both stores, by the same checks: written in batches and
/// sealed, paged by position and by state, outcomes recorded, counted, cleared for a walk taken again, and deleted
/// with their job by retention's prune. The PostgreSQL half runs against a throwaway server.
struct JobEntryStoreTests {
    func job(_ number: Int, _ state: JobState = .running) -> JobRecord {
        JobRecord(
            id: String(format: "0e000000-0000-4000-8000-%012d", number), kind: "upload", state: state,
            options: JobOptions(priority: 0, timeoutSeconds: 60, stallTimeoutSeconds: 10, maxAttempts: 3),
            attempt: 1, progress: JobProgress(total: 100, unit: .bytes), cancellation: nil, error: nil,
            createdAt: "", updatedAt: "", params: ["files": []], result: .null, retryAt: nil, sequence: 0)
    }

    /// `count` pending entries from `start`, of sizes `position * 10`, described by a path with odd characters.
    func entries(_ range: Range<Int>) -> [JobEntry] {
        range.map { position in
            JobEntry(
                position: position, size: Int64(position * 10),
                item: ["path": .string("/trip/day 1/IMG_\(position) +%#é.jpg"), "name": .string("day 1/\(position)")])
        }
    }

    /// The checks both stores must pass; `store` holds job `id` (running) and job `other`.
    func check(_ store: some JobEntryStoring, id: String, other: String) throws {
        #expect(try store.entryCounts(jobID: id) == JobEntryCounts(sealed: false, entries: [:], sizes: [:]))
        // A walk cut short: two batches written, never sealed; taken again from scratch.
        try store.appendEntries(jobID: id, entries(0..<3))
        try store.appendEntries(jobID: id, entries(3..<5))
        #expect(try store.entryCounts(jobID: id).sealed == false)
        #expect(try store.entryCounts(jobID: id).total == 5)
        try store.removeEntries(jobID: id)
        #expect(try store.entryCounts(jobID: id).total == 0)

        // A list written in two runs as it is taken (files from 0, the other entries from a high position), made
        // one run by a move: order and items kept, the other job's list untouched.
        let high = 1 << 40
        try store.appendEntries(jobID: id, entries(0..<3))
        try store.appendEntries(jobID: id, entries(high..<high + 2))
        try store.appendEntries(jobID: other, entries(high..<high + 1))
        try store.moveEntries(jobID: id, from: high, to: 3)
        let moved = try store.entries(jobID: id, after: -1, limit: 10, state: nil)
        #expect(moved.map(\.position) == [0, 1, 2, 3, 4])
        #expect(moved.map(\.item) == (entries(0..<3) + entries(high..<high + 2)).map(\.item))
        #expect(try store.entries(jobID: other, after: -1, limit: 10, state: nil).map(\.position) == [high])
        try store.removeEntries(jobID: id)
        try store.removeEntries(jobID: other)

        // The whole list: 2 500 entries in batches of 1 000, then sealed.
        for start in stride(from: 0, to: 2_500, by: 1_000) {
            try store.appendEntries(jobID: id, entries(start..<min(start + 1_000, 2_500)))
        }
        try store.sealEntries(jobID: id, count: 2_500)
        // A batch that repeats a position is refused whole.
        #expect(throws: (any Error).self) { try store.appendEntries(jobID: id, entries(2_499..<2_501)) }
        var counts = try store.entryCounts(jobID: id)
        #expect(counts.sealed && counts.total == 2_500 && counts.entries == [.pending: 2_500])
        #expect(counts.totalSize == (0..<2_500).reduce(Int64(0)) { $0 + Int64($1 * 10) })
        #expect(try store.entryCounts(jobID: other) == JobEntryCounts(sealed: false, entries: [:], sizes: [:]))

        // Pages by position, the item back as written.
        let first = try store.entries(jobID: id, after: -1, limit: 3, state: nil)
        #expect(first == entries(0..<3))
        let later = try store.entries(jobID: id, after: 2_497, limit: 10, state: nil)
        #expect(later.map(\.position) == [2_498, 2_499])

        // Outcomes of every kind, then paged by state.
        try store.recordOutcomes(
            jobID: id,
            [
                (0, .done(detail: "e3b0c442")), (1, .alreadyThere),
                (2, .failed(code: "source_changed", message: "size was 20 bytes, now 21")),
                (3, .passedOver(reason: "symlink", message: "a symbolic link; give --follow-links")),
                (7, .done(detail: nil)),
            ])
        let done = try store.entries(jobID: id, after: -1, limit: 10, state: .done)
        #expect(done.map(\.position) == [0, 7])
        #expect(done.map(\.outcome) == [.done(detail: "e3b0c442"), .done(detail: nil)])
        #expect(
            try store.entries(jobID: id, after: -1, limit: 10, state: .failed).map(\.outcome)
                == [.failed(code: "source_changed", message: "size was 20 bytes, now 21")])
        #expect(
            try store.entries(jobID: id, after: -1, limit: 10, state: .passedOver).first?.outcome
                == .passedOver(reason: "symlink", message: "a symbolic link; give --follow-links"))
        #expect(try store.entries(jobID: id, after: 0, limit: 10, state: .done).map(\.position) == [7])
        let pending = try store.entries(jobID: id, after: -1, limit: 2, state: .pending)
        #expect(pending.map(\.position) == [4, 5])
        counts = try store.entryCounts(jobID: id)
        #expect(counts.entries == [.pending: 2_495, .done: 2, .alreadyThere: 1, .failed: 1, .passedOver: 1])
        #expect(counts.sizes[.done] == 70 && counts.sizes[.alreadyThere] == 10)
    }

    @Test func sqliteStoreKeepsPagesAndPrunesEntryLists() throws {
        let path = NSTemporaryDirectory() + "/entries-\(UUID().uuidString).sqlite3"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try JobStore(path: path)
        var record = job(1)
        try store.insert(&record)
        var other = job(2)
        try store.insert(&other)
        try check(store, id: record.id, other: other.id)

        // Deleted with the job: retention prunes an ended job and its list goes too, the other job's stays.
        try store.appendEntries(jobID: other.id, entries(0..<4))
        record.state = .succeeded
        try store.update(record, addingCleanUp: false)
        try store.database.query("UPDATE jobs SET updated_at = 1000 WHERE id = ?", [.text(record.id)])
        #expect(try store.pruneEnded(state: .succeeded, endedBefore: 2_000, limit: 10).map(\.id) == [record.id])
        #expect(try store.database.query("SELECT count(*) FROM job_entries WHERE job_id = ?", [.text(record.id)]).first?.int(0) == 0)
        #expect(try store.database.query("SELECT count(*) FROM job_entry_lists").first?.int(0) == 0)
        #expect(try store.entryCounts(jobID: other.id).total == 4)
        // A list for a job the store does not hold is refused (the foreign key).
        #expect(throws: (any Error).self) { try store.appendEntries(jobID: job(9).id, entries(0..<1)) }
    }

    @Test func sharedStoreKeepsPagesAndPrunesEntryListsAcrossDaemons() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let connection = try PostgresConnectionString(server.socketConnectionString)
        let store = try PostgresJobStore(connectionString: connection, options: SharedStoreOptions())
        var jobs = [job(1, .queued), job(2, .queued)]
        try store.insert(&jobs, digests: [nil, nil], duplicateKeys: [[], []])
        try check(store, id: jobs[0].id, other: jobs[1].id)

        // Another daemon of the store reads the same list (a job resumed there).
        let second = try PostgresJobStore(connectionString: connection, options: SharedStoreOptions())
        #expect(try second.entryCounts(jobID: jobs[0].id).total == 2_500)
        #expect(try second.entries(jobID: jobs[0].id, after: -1, limit: 1, state: .done).first?.outcome == .done(detail: "e3b0c442"))

        // Deleted with the job by retention's prune.
        try store.appendEntries(jobID: jobs[1].id, entries(0..<4))
        var ended = jobs[0]
        ended.state = .succeeded
        try store.update(ended, addingCleanUp: false)
        #expect(try store.pruneEnded(state: .succeeded, endedBefore: Timestamp.now() + 1, limit: 10).map(\.id) == [ended.id])
        #expect(try store.entryCounts(jobID: ended.id) == JobEntryCounts(sealed: false, entries: [:], sizes: [:]))
        #expect(try store.entryCounts(jobID: jobs[1].id).total == 4)
        #expect(throws: (any Error).self) { try store.appendEntries(jobID: job(9).id, entries(0..<1)) }
    }
}
