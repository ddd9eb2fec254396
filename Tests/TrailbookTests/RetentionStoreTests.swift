import Foundation
import Testing
@testable import TrailbookEngine
import TrailbookSQLite

/// The store's side of retention: which ended jobs `pruneEnded` deletes and which it keeps, in batches, and the
/// store giving the freed pages back to the file system (`auto_vacuum = INCREMENTAL`).
struct RetentionStoreTests {
    let path = NSTemporaryDirectory() + "/retention-\(UUID().uuidString).sqlite3"

    func job(_ number: Int, _ state: JobState, params: JSONValue = ["units": 3]) -> JobRecord {
        JobRecord(
            id: String(format: "0b000000-0000-4000-8000-%012d", number), kind: "sleep", state: state,
            options: JobOptions(priority: 0, timeoutSeconds: 60, stallTimeoutSeconds: 10, maxAttempts: 3),
            attempt: 1, progress: JobProgress(total: 100, unit: .items), cancellation: nil, error: nil,
            createdAt: "", updatedAt: "", params: params, result: .null, retryAt: nil, sequence: 0)
    }

    /// Stores `job` in its state, ended (last changed) at `endedAt` (Unix seconds).
    func add(
        _ store: JobStore, _ record: JobRecord, endedAt: Double, cleanUp: Bool = false, checkpoint: JSONValue? = nil
    ) throws {
        var record = record
        try store.insert(&record)
        if let checkpoint { try store.saveCheckpoint(id: record.id, checkpoint, progress: record.progress) }
        try store.update(record, addingCleanUp: cleanUp)
        try store.database.query("UPDATE jobs SET updated_at = ? WHERE id = ?", [.real(endedAt), .text(record.id)])
    }

    func ids(_ store: JobStore) throws -> Set<String> {
        Set(try store.jobs(limit: .max).map(\.id))
    }

    @Test func prunesOnlyEndedJobsPastTheCutoffAndNeverOnesAwaitingACleanUp() throws {
        let store = try JobStore(path: path)
        let old = 1_000.0, cutoff = 2_000.0, recent = 3_000.0
        let oldSucceeded = job(1, .succeeded), recentSucceeded = job(2, .succeeded), oldFailed = job(3, .failed)
        let failedAwaitingCleanUp = job(4, .failed), oldCancelled = job(5, .cancelled)
        let unfinished = [job(6, .queued), job(7, .running), job(8, .paused), job(9, .needsRetry)]
        try add(store, oldSucceeded, endedAt: old, checkpoint: ["offset": 8])
        try add(store, recentSucceeded, endedAt: recent)
        try add(store, oldFailed, endedAt: old)
        try add(store, failedAwaitingCleanUp, endedAt: old, cleanUp: true)
        try add(store, oldCancelled, endedAt: old)
        for record in unfinished { try add(store, record, endedAt: old) }

        #expect(try store.checkpoint(id: oldSucceeded.id) != nil)
        #expect(try store.pruneEnded(state: .succeeded, endedBefore: cutoff, limit: 500) == [PrunedJob(id: oldSucceeded.id, kind: "sleep")])
        #expect(try store.pruneEnded(state: .failed, endedBefore: cutoff, limit: 500).map(\.id) == [oldFailed.id])
        #expect(try store.endedJobsAwaitingCleanUp(state: .failed, endedBefore: cutoff) == 1)
        #expect(try store.pruneEnded(state: .cancelled, endedBefore: cutoff, limit: 500).map(\.id) == [oldCancelled.id])
        #expect(try store.checkpoint(id: oldSucceeded.id) == nil, "the checkpoint went with the row")
        #expect(try ids(store) == Set([recentSucceeded.id, failedAwaitingCleanUp.id] + unfinished.map(\.id)))

        // Once its clean-up is done, the failed job goes too.
        try store.removeCleanUp(jobID: failedAwaitingCleanUp.id)
        #expect(try store.pruneEnded(state: .failed, endedBefore: cutoff, limit: 500).map(\.id) == [failedAwaitingCleanUp.id])
        #expect(try store.endedJobsAwaitingCleanUp(state: .failed, endedBefore: cutoff) == 0)
    }

    @Test func prunesInBatchesOfTheGivenSize() throws {
        let store = try JobStore(path: path)
        for number in 0..<1_203 { try add(store, job(number, .succeeded), endedAt: 1_000) }
        var batches: [Int] = []
        while true {
            let batch = try store.pruneEnded(state: .succeeded, endedBefore: 2_000, limit: 500)
            batches.append(batch.count)
            if batch.count < 500 { break }
        }
        #expect(batches == [500, 500, 203])
        #expect(try ids(store).isEmpty)
    }

    /// A new store is created with incremental vacuum; pruning many jobs and reclaiming the free pages shrinks
    /// the file.
    @Test func aNewStoreShrinksAfterPruningAndReclaiming() throws {
        let store = try JobStore(path: path)
        #expect(try store.database.query("PRAGMA auto_vacuum").first?.int(0) == 2, "INCREMENTAL")
        let padding = JSONValue.string(String(repeating: "x", count: 2_000))
        for number in 0..<2_000 { try add(store, job(number, .succeeded, params: ["units": 3, "note": padding]), endedAt: 1_000) }
        let before = try store.sizeInBytes()
        #expect(before > 4_000_000)
        while try store.pruneEnded(state: .succeeded, endedBefore: 2_000, limit: 500).count == 500 {}
        #expect(try store.sizeInBytes() == before, "deleting alone frees pages inside the file")
        var steps = 0
        while try store.reclaimFreePages(atMost: 256) > 0 { steps += 1 }
        try store.checkpointLog()
        let after = try store.sizeInBytes()
        #expect(after < 200_000, "\(before) -> \(after) bytes")
        #expect(steps > 3, "reclaimed in steps of 256 pages, not at once")
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(Int64(info.st_size) == after, "the file itself shrank")
        #expect(stat(path + "-wal", &info) != 0 || info.st_size == 0, "the WAL is truncated")
    }

    /// A store made before retention (auto_vacuum NONE) is switched on open, keeping its jobs.
    @Test func anOlderStoreIsSwitchedToIncrementalVacuumOnOpen() throws {
        do {
            let old = try Database(path: path)
            try old.enableWriteAheadLog()
            try old.migrate(Array(JobStore.migrations.prefix(4)))
            #expect(try old.query("PRAGMA auto_vacuum").first?.int(0) == 0)
        }
        var record = job(1, .queued)
        do {
            let store = try JobStore(path: path)
            try store.insert(&record)
        }
        let store = try JobStore(path: path)
        #expect(try store.database.query("PRAGMA auto_vacuum").first?.int(0) == 2)
        #expect(try store.database.query("PRAGMA journal_mode").first?.text(0) == "wal")
        #expect(try store.job(id: record.id)?.state == .queued)
        #expect(try store.database.query("PRAGMA user_version").first?.int(0) == Int64(JobStore.migrations.count))
    }

    @Test func thePolicyDefaultsAndSweepInterval() {
        var policy = RetentionPolicy()
        #expect(policy.keepSeconds(.succeeded) == 7.0 * 86_400)
        #expect(policy.keepSeconds(.failed) == 30.0 * 86_400)
        #expect(policy.keepSeconds(.cancelled) == 7.0 * 86_400)
        #expect(policy.keepSeconds(.queued) == nil)
        #expect(policy.batchSize == 500)
        #expect(policy.sweepIntervalSeconds == 600)
        policy.keepSucceededSeconds = 4
        #expect(policy.sweepIntervalSeconds == 2)
        policy.keepSucceededSeconds = 0
        #expect(policy.sweepIntervalSeconds == 1)
    }
}
