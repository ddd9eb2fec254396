import Foundation
import Testing
@testable import TrailbookEngine
import TrailbookSQLite

struct JobStoreTests {
    func makeJob(_ id: String, priority: Int = 0, state: JobState = .queued) -> JobRecord {
        JobRecord(
            id: id, kind: "sleep", state: state,
            options: JobOptions(priority: priority, timeoutSeconds: 60, stallTimeoutSeconds: 10, maxAttempts: 3),
            attempt: 0, progress: JobProgress(total: 100, unit: .items), cancellation: nil, error: nil,
            createdAt: "", updatedAt: "", params: ["units": 3], result: .null, retryAt: nil, sequence: 0)
    }

    func temporaryPath() -> String {
        NSTemporaryDirectory() + "/jobstore-\(UUID().uuidString).sqlite3"
    }

    @Test func roundTripsAJobAndItsCheckpoint() throws {
        let store = try JobStore(path: temporaryPath())
        var job = makeJob("0a000000-0000-4000-8000-000000000001")
        try store.insert(&job)
        #expect(job.sequence > 0)
        job.state = .needsRetry
        job.attempt = 1
        job.cancellation = Cancellation(reason: .timeout, at: "2026-11-29T00:00:00Z", detail: "no progress for 10 s")
        job.retryAt = 1_000
        try store.update(job)
        try store.saveCheckpoint(id: job.id, ["offset": 8_388_608], progress: JobProgress(completed: 5, total: 100, unit: .items))
        let loaded = try #require(try store.job(id: job.id))
        #expect(loaded.state == .needsRetry)
        #expect(loaded.cancellation?.reason == .timeout)
        #expect(loaded.progress.completed == 5)
        #expect(loaded.params == ["units": 3])
        #expect(try store.checkpoint(id: job.id)?["offset"]?.intValue == 8_388_608)
        #expect(loaded.retryAt == 1_000)
    }

    /// A batch is stored in one transaction: a key already taken (the unique index) stores none of it; a batch
    /// that fits is stored in order, and each key finds its job with the request's digest.
    @Test func aBatchIsStoredWhollyOrNotAtAllAndKeysFindTheirJobs() throws {
        let store = try JobStore(path: temporaryPath())
        var taken = makeJob("0b000000-0000-4000-8000-000000000001")
        taken.key = "k1"
        try store.insert(&taken, digest: "d1")
        var batch = [makeJob("0b000000-0000-4000-8000-000000000002"), makeJob("0b000000-0000-4000-8000-000000000003")]
        batch[0].key = "k2"
        batch[1].key = "k1"
        #expect(throws: SQLiteError.self) { try store.insert(&batch, digests: ["d2", "d1"]) }
        #expect(try store.jobs().map(\.id) == [taken.id], "nothing of the refused batch is stored")
        #expect(try store.job(key: "k2") == nil)
        batch[1].key = "k3"
        try store.insert(&batch, digests: ["d2", "d3"])
        #expect(batch[0].sequence < batch[1].sequence)
        #expect(try store.jobs().map(\.id) == [taken.id, batch[0].id, batch[1].id])
        let found = try #require(try store.job(key: "k3"))
        #expect(found.job.id == batch[1].id)
        #expect(found.job.key == "k3")
        #expect(found.digest == "d3")
        #expect(try store.job(key: "k1")?.digest == "d1")
    }

    /// What an unfinished job works on is found by index, from an insert alone or a group commit, and is gone once
    /// the job ends; a group commit stores its new jobs in order, all or nothing.
    @Test func duplicateKeysAreIndexedWhileAJobIsUnfinished() throws {
        let store = try JobStore(path: temporaryPath())
        var first = makeJob("0a000000-0000-4000-8000-0000000000d1")
        var firstOnly = [first]
        try store.insert(&firstOnly, digests: [nil], duplicateKeys: [["/a.jpg to file:///srv"]])
        first = firstOnly[0]
        var group = [makeJob("0a000000-0000-4000-8000-0000000000d2"), makeJob("0a000000-0000-4000-8000-0000000000d3")]
        try store.commitGroup(
            inserting: &group, duplicateKeys: [["/b.jpg to file:///srv"], []], updating: [], durable: true)
        #expect(group[0].sequence == first.sequence + 1 && group[1].sequence == first.sequence + 2)
        #expect(try store.unfinishedJobs(sharing: ["/a.jpg to file:///srv"], kind: "sleep").map(\.id) == [first.id])
        #expect(try store.unfinishedJobs(sharing: ["/b.jpg to file:///srv", "/c.jpg"], kind: "sleep").map(\.id) == [group[0].id])
        #expect(try store.unfinishedJobs(sharing: ["/a.jpg to file:///srv"], kind: "upload").isEmpty)
        first.state = .succeeded
        var none: [JobRecord] = []
        try store.commitGroup(inserting: &none, updating: [(first, false)], durable: true)
        #expect(try store.unfinishedJobs(sharing: ["/a.jpg to file:///srv"], kind: "sleep").isEmpty)
        // A duplicate id refuses the whole group: the other new job is not stored either.
        var clash = [makeJob("0a000000-0000-4000-8000-0000000000d4"), makeJob(first.id)]
        #expect(throws: SQLiteError.self) { try store.commitGroup(inserting: &clash, updating: [], durable: true) }
        #expect(try store.job(id: "0a000000-0000-4000-8000-0000000000d4") == nil)
    }

    /// A job's end that needs a clean-up is recorded with it (one transaction); the pending clean-up survives a
    /// reopen of the store, is rescheduled with its tries and last error, and is forgotten once done.
    @Test func aPendingCleanUpIsRecordedWithTheEndAndSurvivesAReopen() throws {
        let path = temporaryPath()
        var job = makeJob("0a000000-0000-4000-8000-0000000000c1")
        do {
            let store = try JobStore(path: path)
            try store.insert(&job)
            job.state = .failed
            try store.update(job, addingCleanUp: true)
            #expect(try store.dueCleanUps(now: Timestamp.now() + 1).map(\.jobID) == [job.id])
            try store.rescheduleCleanUp(jobID: job.id, tries: 2, nextAt: 5_000_000_000, error: "DELETE answered 503")
        }
        let reopened = try JobStore(path: path)
        #expect(try reopened.job(id: job.id)?.state == .failed)
        #expect(try reopened.dueCleanUps(now: .infinity).first?.nextAt == 5_000_000_000)
        #expect(try reopened.dueCleanUps(now: Timestamp.now()).isEmpty, "not due before next_at")
        let pending = try #require(try reopened.dueCleanUps(now: 5_000_000_000).first)
        #expect(pending.tries == 2)
        try reopened.removeCleanUp(jobID: job.id)
        #expect(try reopened.dueCleanUps(now: .infinity).isEmpty)
    }

    /// A job's end is committed with synchronous=FULL (it must outlive a power loss before kinds drop their own
    /// state); the connection goes back to NORMAL for everything else. (What the test can see is the way back: the
    /// fsync itself is not observed.)
    @Test func aDurableEndLeavesTheConnectionAtNormal() throws {
        let path = temporaryPath()
        let store = try JobStore(path: path)
        var job = makeJob("0a000000-0000-4000-8000-000000000009")
        try store.insert(&job)
        let synchronous = { try store.database.query("PRAGMA synchronous").first?.int(0) }
        #expect(try synchronous() == 1, "NORMAL")
        job.state = .succeeded
        try store.update(job)
        #expect(try synchronous() == 1, "back to NORMAL after the durable commit")
        #expect(try store.job(id: job.id)?.state == .succeeded)
    }

    @Test func queueOrderIsPriorityThenFIFO() throws {
        let store = try JobStore(path: temporaryPath())
        for (index, priority) in [0, 10, 0, 10].enumerated() {
            var job = makeJob("0b000000-0000-4000-8000-00000000000\(index)", priority: priority)
            try store.insert(&job)
        }
        let order = try store.queuedJobs(limit: 10, skipping: []).map { $0.id.suffix(1) }
        #expect(order == ["1", "3", "0", "2"])
        // Skipped ids (starts not written yet) are passed over and the limit still filled from the rest.
        let skipping: Set = ["0b000000-0000-4000-8000-000000000001", "0b000000-0000-4000-8000-000000000000"]
        #expect(try store.queuedJobs(limit: 2, skipping: skipping).map { $0.id.suffix(1) } == ["3", "2"])
        #expect(try store.queuedJobs(limit: 1, skipping: skipping).map { $0.id.suffix(1) } == ["3"])
        #expect(try store.highestQueuedPriority(skipping: []) == 10)
        #expect(try store.highestQueuedPriority(skipping: skipping) == 10)
        #expect(try store.highestQueuedPriority(skipping: skipping.union(["0b000000-0000-4000-8000-000000000003"])) == 0)
        // A job that leaves the queue leaves its index; the next start comes from the index, never a sort.
        var started = try #require(try store.job(id: "0b000000-0000-4000-8000-000000000001"))
        started.state = .running
        try store.update(started)
        #expect(try store.queuedJobs(limit: 10, skipping: []).map { $0.id.suffix(1) } == ["3", "0", "2"])
        let plan = try store.database.query("EXPLAIN QUERY PLAN " + JobStore.queueSelect)
            .compactMap { $0.text(3) }.joined(separator: "; ")
        #expect(plan.contains("jobs_queue") && !plan.contains("TEMP B-TREE"), "\(plan)")
    }

    /// A queued job this store inserted is read back as a decode of its row would read it (the store keeps it
    /// rather than decode it), and once its row is written the row is what is read.
    @Test func aJobReadBackFromTheQueueIsItsRowWhetherKeptOrDecoded() throws {
        let path = temporaryPath()
        let store = try JobStore(path: path)
        var jobs = (0..<3).map { makeJob("0e000000-0000-4000-8000-00000000000\($0)", priority: $0) }
        jobs[1].params = ["units": 3, "unit_ms": 1.5, "note": "ü \"q\"", "list": [1, .null, true]]
        jobs[2].key = "k-2"
        var one = makeJob("0e000000-0000-4000-8000-000000000009")
        try store.insert(&jobs, digests: [nil, nil, "d"])
        try store.insert(&one)
        #expect(jobs.allSatisfy { !$0.createdAt.isEmpty && $0.updatedAt == $0.createdAt && $0.sequence > 0 })
        let kept = try store.queuedJobs(limit: 10, skipping: [])
        let decoded = try JobStore(path: path).queuedJobs(limit: 10, skipping: [])
        #expect(kept == decoded)
        #expect(kept.map(\.id) == [jobs[2].id, jobs[1].id, jobs[0].id, one.id])
        #expect(kept.first == jobs[2], "the inserted record, as the insert gave it back")
        // Paused with new params and queued again: the row's new params, not the kept ones.
        var changed = try #require(try store.job(id: jobs[1].id))
        changed.state = .paused
        try store.update(changed)
        try store.updateParams(id: changed.id, ["units": 9])
        changed.state = .queued
        try store.update(changed)
        let again = try store.queuedJobs(limit: 10, skipping: [])
        #expect(again.first { $0.id == jobs[1].id }?.params == ["units": 9])
        #expect(again == (try JobStore(path: path).queuedJobs(limit: 10, skipping: [])))
    }

    /// A lifecycle write goes to the record's row by its sequence (rowid), and still by id when the sequence it
    /// carries is not its row's.
    @Test func aLifecycleWriteReachesItsRowByRowidOrById() throws {
        let store = try JobStore(path: temporaryPath())
        var first = makeJob("0d000000-0000-4000-8000-000000000001")
        var second = makeJob("0d000000-0000-4000-8000-000000000002")
        try store.insert(&first)
        try store.insert(&second)
        first.state = .running
        try store.update(first)
        second.state = .paused
        second.sequence = first.sequence  // wrong: must not touch the first job's row
        try store.update(second)
        #expect(try store.job(id: first.id)?.state == .running)
        #expect(try store.job(id: second.id)?.state == .paused)
    }

    /// `list --state S --limit N`: the newest N of the given states (and kind), merged in submission order, each
    /// state read newest first from `jobs_by_state_sequence` (no sort of every job in the state: issue 14).
    @Test func listsTheNewestOfSomeStatesByIndex() throws {
        let store = try JobStore(path: temporaryPath())
        let states: [JobState] = [.queued, .succeeded, .queued, .paused, .queued, .succeeded]
        for (index, state) in states.enumerated() {
            var job = makeJob("0c000000-0000-4000-8000-00000000000\(index)", state: state)
            if index == 4 { job.kind = "upload" }
            try store.insert(&job)
        }
        let suffixes = { (jobs: [JobRecord]) in jobs.map { String($0.id.suffix(1)) } }
        #expect(suffixes(try store.jobs(states: [.queued], limit: 2)) == ["2", "4"])
        #expect(suffixes(try store.jobs(states: [.queued, .paused], limit: 3)) == ["2", "3", "4"])
        #expect(suffixes(try store.jobs(states: [.queued, .succeeded], kind: "sleep", limit: 3)) == ["1", "2", "5"])
        #expect(suffixes(try store.jobs(states: [.running], limit: 3)) == [])
        #expect(suffixes(try store.jobs(limit: 2)) == ["4", "5"])
        #expect(suffixes(try store.jobs(kind: "upload", limit: 2)) == ["4"])
        let plan = try store.database.query(
            "EXPLAIN QUERY PLAN SELECT id FROM jobs WHERE state = 'queued' ORDER BY sequence DESC LIMIT 20"
        ).compactMap { $0.text(3) }.joined(separator: "; ")
        #expect(plan.contains("jobs_by_state_sequence") && !plan.contains("TEMP B-TREE"), "\(plan)")
    }

    @Test func findsJobsByIdPrefix() throws {
        let store = try JobStore(path: temporaryPath())
        var first = makeJob("abc00000-0000-4000-8000-000000000001")
        var second = makeJob("abd00000-0000-4000-8000-000000000002")
        try store.insert(&first)
        try store.insert(&second)
        #expect(try store.jobs(idPrefix: "abc").map(\.id) == [first.id])
        #expect(try store.jobs(idPrefix: "ab").count == 2)
        #expect(try store.jobs(idPrefix: "ff").isEmpty)
    }

    @Test func sequenceBlocksKeepIncreasingAcrossOpens() throws {
        let path = temporaryPath()
        let first = try JobStore(path: path).reserveSequenceBlock(count: 1_000)
        let second = try JobStore(path: path).reserveSequenceBlock(count: 1_000)
        #expect(second == first + 1_000)
    }

    @Test func refusesAStoreFromANewerVersion() throws {
        let path = temporaryPath()
        _ = try JobStore(path: path)
        try Database(path: path).execute("PRAGMA user_version = 99")
        #expect(throws: SQLiteError.self) { try JobStore(path: path) }
    }

    @Test func refusesAFileThatIsNotADatabase() throws {
        let path = temporaryPath()
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: path))
        #expect(throws: (any Error).self) { try JobStore(path: path) }
    }
}
