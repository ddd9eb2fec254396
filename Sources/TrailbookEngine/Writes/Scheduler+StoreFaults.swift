import TrailbookLoop
import TrailbookSQLite

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

// Store faults: writes the store refused, kept and retried until it takes them again.
extension Scheduler {
    /// Runs one store write. On a refusal the fault is noted (`storeHealth`: one warning naming its cause per
    /// episode) and the store retry armed; the caller decides what the refusal means for its write.
    func write(_ what: String, _ body: () throws -> Void) -> StoreWrite {
        do {
            try body()
        } catch {
            return settled(what, error)
        }
        return settled(what, nil)
    }

    /// Settles the outcome of a store write, made waiting (`write`) or not (a checkpoint on a shared store):
    /// `error` is `nil` when written. As `write`; a write fenced off also stops the job's run here, if any
    /// (`fencedOff(_:)`).
    func settled(_ what: String, _ error: (any Error)?) -> StoreWrite {
        guard let error else {
            if pendingWrites.isEmpty { storeHealth.recovered() }
            return .written
        }
        if let lost = error as? JobStoreError, case .leaseLost(let id) = lost {
            fencedOff(id)
            return .fencedOff
        }
        let refusal = StoreRefusal(error)
        storeHealth.refused(refusal, writing: what, retrying: !isShuttingDown) { [weak self] in self?.retryStoreWrites() }
        return .refused(refusal)
    }

    /// Writes what the store refused, oldest job first, then lets waiting work start. The fault is over only once
    /// a write succeeded: with nothing to write here (an idle daemon whose claim was refused), the next write
    /// proves it, the claim `schedule()` sends on a shared store; until then the retries back off.
    func retryStoreWrites() {
        storeHealth.retryFired()
        let writing = !pendingWrites.isEmpty
        for (id, unsaved) in pendingWrites.checkpoints {
            let written = write("the checkpoint of job \(id.prefix(8))", {
                try store.saveCheckpoint(id: id, unsaved.checkpoint, progress: unsaved.progress)
            })
            // Fenced off (the run's lease is lost or released): no one will take it; the rest goes on.
            if case .refused = written { return }
            pendingWrites.removeCheckpoint(id)
        }
        for kept in pendingWrites.statesInWriteOrder {
            let unsaved = kept.job
            // The refused start of a job still running: written with its run's latest progress, so it does not
            // undo a checkpoint written since (a job with an unsaved end is never started again before it is written).
            let job = running[unsaved.id].map(live) ?? unsaved
            let cleansUp = kept.addsCleanUp
            switch write("the state of job \(job.id.prefix(8))", { try store.update(job, addingCleanUp: cleansUp) }) {
            case .written: break
            case .refused: return
            case .fencedOff:
                // Another daemon sharing the store changed the job meanwhile: this write is dropped. Unless the
                // change is this very cancel of a waiting job: a write given up on (its answer lost) may have been
                // committed all the same, and what follows it must still run (a cancelled upload's partial output
                // removed); its cancellation (with its time) is this daemon's own. (A run's end that landed is
                // found by the store itself, by the run's lease token: `PostgresJobStore`'s fenced write.)
                guard kept.cancelledWhileWaiting, let stored = try? store.job(id: job.id),
                    stored.state == job.state, stored.cancellation == job.cancellation
                else {
                    dropUnsaved(job.id)
                    continue
                }
                DaemonLog.write("job \(job.id.prefix(8)): its end (\(job.state.rawValue)) was written by an earlier try whose answer was lost")
            }
            pendingWrites.removeState(job.id)
            if let previous = kept.unannouncedFrom { announce(job, from: previous) }
            let cancelled = kept.cancelledWhileWaiting
            guard job.state.isTerminal else { continue }
            Task.onLoop { await self.endWritten(job, cancelledWhileWaiting: cancelled, cleansUp: cleansUp) }
        }
        if writing { storeHealth.recovered() }
        retries.arm()
        schedule()
    }

    /// Stops a running job whose progress or checkpoint the store refused for good (disk full, I/O error): it
    /// ends with `failure` (retryable, so `needs_retry`) instead of running on with nothing recorded.
    func failForStore(_ active: RunningJob, _ failure: JobError) {
        guard active.context.stopReason == nil else { return }
        stop(active, .resourceReclaim, detail: failure.message)
        active.stop = .storeFailed(failure)
    }

    /// Inserts new jobs in one transaction; while another process holds the store's lock, tries again on a timer
    /// (the loop serves everything else meanwhile) for up to `storeLockWaitSeconds`.
    /// - Throws: `JobError` `store_busy` when the lock outlasts the wait, `store_write_failed` for any other refusal;
    ///   then none of the jobs is stored.
    func insertWaitingForLock(_ jobs: inout [JobRecord], digests: [String?], duplicateKeys: [[String]])
        async throws(JobError)
    {
        let started = Timestamp.monotonic()
        var delay = StoreHealth.firstRetryDelay
        let what = jobs.count == 1 ? "a new job" : "\(jobs.count) new jobs"
        while true {
            var inserted = jobs
            let error: StoreRefusal
            switch write(what, { try store.insert(&inserted, digests: digests, duplicateKeys: duplicateKeys) }) {
            case .written:
                jobs = inserted
                return
            case .refused(let refusal): error = refusal
            case .fencedOff:
                // Only updates of a job another daemon took are fenced off; an insert names no such job.
                throw JobError(
                    code: "store_write_failed",
                    message: "cannot store the job: another daemon sharing the store holds it; submit again")
            }
            let nothing = jobs.count == 1 ? "nothing was submitted" : "none of the \(jobs.count) jobs was submitted"
            if error.code == StoreRefusal.unavailableCode {
                // The shared store is down: fail fast (the CLI exits 3, as when the daemon is not reachable).
                throw JobError(
                    code: "store_unavailable",
                    message: "cannot store the job: \(error.cause) (\(error)); \(nothing): submit again once it is back")
            }
            guard error.isLocked else {
                throw JobError(
                    code: "store_write_failed",
                    message: "cannot store the job: \(error.cause) (\(error)); \(nothing): free space where "
                        + "the daemon keeps its state (TRAILBOOK_JOBS_HOME) and submit again")
            }
            guard Timestamp.monotonic() - started < options.storeLockWaitSeconds else {
                throw JobError(
                    code: "store_busy",
                    message: "cannot store the job: another process has held the job store's write lock for "
                        + "\(Self.seconds(options.storeLockWaitSeconds)) (\(error)); \(nothing): end that "
                        + "process (an open sqlite3 shell, a backup) and submit again")
            }
            await Self.wait(seconds: delay)
            delay = min(delay * 2, StoreHealth.longestRetryDelay)
        }
    }
}
