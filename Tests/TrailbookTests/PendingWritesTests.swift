import Testing

@testable import TrailbookEngine

/// `PendingWrites`: the store retry's one value per job (kept state, deferred checkpoint), and how keeping,
/// replacing and forgetting change it.
struct PendingWritesTests {
    private func job(_ number: Int, _ state: JobState, sequence: Int64) -> JobRecord {
        JobRecord(
            id: "job-\(number)", kind: "upload", state: state,
            options: JobOptions(priority: 0, timeoutSeconds: 60, stallTimeoutSeconds: 10, maxAttempts: 3),
            attempt: 1, progress: JobProgress(total: 100, unit: .bytes), cancellation: nil, error: nil,
            createdAt: "", updatedAt: "", params: [:], result: .null, retryAt: nil, sequence: sequence)
    }

    private func checkpoint(_ n: Int) -> PendingWrites.KeptCheckpoint {
        PendingWrites.KeptCheckpoint(checkpoint: ["n": .number(Double(n))], progress: JobProgress(total: 1, unit: .bytes))
    }

    @Test func aKeptStateIsReadAndWrittenOldestJobFirst() {
        var writes = PendingWrites()
        #expect(writes.isEmpty)
        writes.keep(job(2, .failed, sequence: 20), addingCleanUp: false, unannouncedFrom: nil)
        writes.keep(job(1, .succeeded, sequence: 10), addingCleanUp: false, unannouncedFrom: nil)
        #expect(!writes.isEmpty)
        #expect(writes.record("job-1")?.state == .succeeded)
        #expect(writes.record("job-3") == nil)
        #expect(writes.statesInWriteOrder.map(\.job.id) == ["job-1", "job-2"])
        #expect(Set(writes.recordIDs) == ["job-1", "job-2"])
        #expect(Set(writes.records.keys) == ["job-1", "job-2"])
    }

    /// A newer refusal of the same job replaces its state; what the older one brought along stays: its clean-up,
    /// its cancelled wait, and the state announced before both (the change not announced yet goes from there).
    @Test func aNewerStateReplacesTheOlderAndKeepsWhatItBroughtAlong() {
        var writes = PendingWrites()
        writes.keep(job(1, .running, sequence: 1), addingCleanUp: true, unannouncedFrom: .queued)
        writes.markCancelledWhileWaiting("job-1")
        writes.keep(job(1, .failed, sequence: 1), addingCleanUp: false, unannouncedFrom: .running)
        let kept = writes["job-1"]?.state
        #expect(kept?.job.state == .failed)
        #expect(kept?.addsCleanUp == true)
        #expect(kept?.cancelledWhileWaiting == true)
        #expect(kept?.unannouncedFrom == .queued)
    }

    @Test func aCancelledWaitIsMarkedOnlyOnAKeptState() {
        var writes = PendingWrites()
        writes.markCancelledWhileWaiting("job-1")
        #expect(writes.isEmpty, "nothing kept, nothing marked")
        writes.keep(job(1, .cancelled, sequence: 1), addingCleanUp: false, unannouncedFrom: nil)
        #expect(writes["job-1"]?.state?.cancelledWhileWaiting == false)
        writes.markCancelledWhileWaiting("job-1")
        #expect(writes["job-1"]?.state?.cancelledWhileWaiting == true)
    }

    /// A job's entry goes once neither a state nor a checkpoint is left, so `isEmpty` says the retry is done.
    @Test func aJobLeavesOnceNothingOfItIsUnwritten() {
        var writes = PendingWrites()
        writes.keep(job(1, .failed, sequence: 1), addingCleanUp: true, unannouncedFrom: .running)
        writes.keepCheckpoint("job-1", checkpoint(1))
        let removed = writes.removeState("job-1")
        #expect(removed?.addsCleanUp == true)
        #expect(removed?.unannouncedFrom == .running)
        #expect(writes.record("job-1") == nil)
        #expect(writes.checkpoint("job-1")?.checkpoint == ["n": .number(1)], "the checkpoint is still unwritten")
        #expect(!writes.isEmpty)
        #expect(writes.removeState("job-1") == nil)
        writes.removeCheckpoint("job-1")
        #expect(writes.isEmpty)
        #expect(writes["job-1"] == nil)
    }

    /// A forgotten state takes what it brought along with it: a later state of the job starts clean.
    @Test func aRemovedStatesCleanUpAndCancelledWaitGoWithIt() {
        var writes = PendingWrites()
        writes.keep(job(1, .cancelled, sequence: 1), addingCleanUp: true, unannouncedFrom: .queued)
        writes.markCancelledWhileWaiting("job-1")
        writes.removeState("job-1")
        writes.keep(job(1, .running, sequence: 1), addingCleanUp: false, unannouncedFrom: nil)
        let kept = writes["job-1"]?.state
        #expect(kept?.addsCleanUp == false)
        #expect(kept?.cancelledWhileWaiting == false)
        #expect(kept?.unannouncedFrom == nil)
    }

    @Test func theNewestCheckpointIsKept() {
        var writes = PendingWrites()
        writes.keepCheckpoint("job-1", checkpoint(1))
        writes.keepCheckpoint("job-1", checkpoint(2))
        writes.keepCheckpoint("job-2", checkpoint(3))
        #expect(writes.checkpoint("job-1")?.checkpoint == ["n": .number(2)])
        #expect(writes.checkpoints.count == 2)
        #expect(writes.record("job-1") == nil, "a checkpoint alone keeps no state")
        #expect(writes.recordIDs.isEmpty)
    }
}
