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

// The `JobHost` a running job's context calls: progress and rate, checkpoints, logs, waits, stop requests.
extension Scheduler: JobHost {
    func jobDidReportProgress(_ job: JobContext) {
        guard let active = running.run(of: job) else { return }
        let now = Timestamp.monotonic()
        // Bytes under way count as movement (a large tus PATCH confirms nothing until it ends), and so does a step
        // of a phase that moves no unit (objects listed, files compared: `JobContext.reportPhase`).
        let completed = job.progress.completed + (job.progress.inFlight ?? 0)
        if completed != active.lastCompleted || job.progress.phase != active.lastPhase {
            active.lastCompleted = completed
            active.lastPhase = job.progress.phase
            active.lastMoveAt = now
        }
        // Rate: exponential moving average with a 3 s time constant over samples at least 200 ms apart. Samples
        // start at the first forward step after the job's first report, not at the start: the first report may
        // rewind to the checkpoint, and the work before that step (setup, or the first piece a rate limiter lets
        // through at once) would otherwise inflate the rate for several seconds.
        if !active.sampling {
            if let previous = active.previousReport, completed > previous {
                active.sampling = true
                active.lastSample = (now, completed)
            }
            active.previousReport = completed
        }
        let elapsed = now - active.lastSample.at
        if active.sampling, elapsed >= 0.2 {
            let instant = Double(completed - active.lastSample.completed) / elapsed
            let alpha = 1 - exp(-elapsed / 3)
            active.rate = active.rate.map { $0 + alpha * (instant - $0) } ?? instant
            active.lastSample = (now, completed)
        }
        let remaining = Double(max(0, job.progress.total - completed))
        let eta = active.rate.flatMap { $0 > 0 ? remaining / $0 : nil }
        job.setRate(active.rate.map { max(0, $0) }, eta: eta)
        feed.progress(job: job.id, kind: job.kind, job.progress)
        if now - active.lastPersistAt >= options.progressPersistInterval {
            active.lastPersistAt = now
            if dispatcher.sendsProgressWithoutWaiting {
                // Sent without waiting (the lease's renewal); a lost lease comes back through `onLeaseLost`, and an
                // answer is no news of the store's health.
                try? store.saveProgress(id: job.id, job.progress)
                return
            }
            // Locked: the next report writes it. Disk full: the job stops, retryable, rather than run on unrecorded.
            if case .refused(let error) = write("the progress of job \(job.id.prefix(8))", {
                try store.saveProgress(id: job.id, job.progress)
            }), !error.isLocked {
                failForStore(active, JobError(
                    code: "store_write_failed", message: "cannot save the progress: \(error.cause) (\(error))",
                    retryable: true))
            }
        }
    }

    func jobSaveCheckpoint(_ job: JobContext, _ checkpoint: JSONValue) throws {
        let id = job.id
        dispatcher.forgetClaimedCheckpoint(of: id)
        running.run(of: job)?.hasNoCheckpoint = false
        if case .claiming(let claiming) = dispatcher {
            // A shared store is a round trip away: the loop (every other job) does not wait for it. A checkpoint
            // describes work already durable, so landing one round trip later is as good; the answer settles it.
            let progress = job.progress
            running[id]?.lastPersistAt = Timestamp.monotonic()
            // This one subsumes a refused earlier one: the store retry must not write that one after it.
            pendingWrites.removeCheckpoint(id)
            claiming.sendCheckpoint(id: id, checkpoint, progress: progress) { [weak self] error in
                self?.checkpointSettled(job, checkpoint, progress, error)
            }
            return
        }
        let error: StoreRefusal
        switch write("the checkpoint of job \(id.prefix(8))", {
            try store.saveCheckpoint(id: id, checkpoint, progress: job.progress)
        }) {
        case .written:
            pendingWrites.removeCheckpoint(id)
            running[id]?.lastPersistAt = Timestamp.monotonic()
            return
        case .fencedOff:
            // Only a shared store fences writes off, and it takes checkpoints through `sendCheckpoint` (above).
            throw JobError(
                code: "store_write_failed", message: "cannot save the checkpoint: another daemon holds the job",
                retryable: true)
        case .refused(let refusal): error = refusal
        }
        if error.isLocked {
            // It describes work already durable, so writing it a little later is as good; the job runs on.
            pendingWrites.keepCheckpoint(id, .init(checkpoint: checkpoint, progress: job.progress))
            return
        }
        let failure = JobError(
            code: "store_write_failed", message: "cannot save the checkpoint: \(error.cause) (\(error))", retryable: true)
        if let active = running.run(of: job) { failForStore(active, failure) }
        throw failure
    }

    /// The answer to a checkpoint sent without waiting (`jobSaveCheckpoint` on a shared store), as
    /// `jobSaveCheckpoint` handles a refusal: kept for the store retry if the store is down, the run stopped if
    /// its lease is lost (`settled`), else the run fails retryably. Answers come in the order sent.
    private func checkpointSettled(
        _ job: JobContext, _ checkpoint: JSONValue, _ progress: JobProgress, _ error: (any Error)?
    ) {
        let id = job.id
        let refusal: StoreRefusal
        switch settled("the checkpoint of job \(id.prefix(8))", error) {
        case .written:
            pendingWrites.removeCheckpoint(id)
            return
        case .fencedOff: return
        case .refused(let refused): refusal = refused
        }
        let active = running.run(of: job)
        // Kept while its run goes on, or has ended with its end not written yet (a final checkpoint at a pause or
        // shutdown, refused in the same outage as the end): the retry writes it before the end.
        if refusal.isLocked, active != nil || pendingWrites.record(id) != nil {
            pendingWrites.keepCheckpoint(id, .init(checkpoint: checkpoint, progress: progress))
            return
        }
        guard let active else { return }
        failForStore(active, JobError(
            code: "store_write_failed", message: "cannot save the checkpoint: \(refusal.cause) (\(refusal))", retryable: true))
    }

    func jobLoadCheckpoint(_ job: JobContext) throws -> JSONValue? {
        if let unsaved = pendingWrites.checkpoint(job.id) { return unsaved.checkpoint }
        if let active = running.run(of: job), active.hasNoCheckpoint {
            active.hasNoCheckpoint = false
            return nil
        }
        if running.run(of: job) != nil, let claimed = dispatcher.takeClaimedCheckpoint(of: job.id) { return claimed }
        do {
            return try store.checkpoint(id: job.id)
        } catch {
            let refusal = StoreRefusal(error)
            if refusal.isLocked, let active = running.run(of: job) {
                // Not the job's failure (a lock, the shared store down as the run starts): back to the queue on the
                // same attempt, started again once the store answers.
                stop(active, .resourceReclaim, detail: "cannot read its checkpoint now (\(refusal.cause)); queued to start again")
            }
            throw error
        }
    }

    func jobLog(_ job: JobContext, level: LogLevel, message: String) {
        feed.log(job: job.id, kind: job.kind, level: level, message: message)
        if level == .warning || level == .error {
            DaemonLog.write("job \(job.id.prefix(8)) \(job.kind) \(level.rawValue): \(message)")
        }
    }

    func jobWaitBegan(_ job: JobContext) {
        guard let active = running.run(of: job), active.waitingSince == nil else { return }
        active.waitingSince = Timestamp.monotonic()
        armWatchdog(active)
    }

    func jobWaitEnded(_ job: JobContext) {
        guard let active = running.run(of: job), let since = active.waitingSince else { return }
        let now = Timestamp.monotonic()
        active.excusedSeconds += now - since
        active.waitingSince = nil
        active.lastMoveAt = now
        if active.context.stopReason == nil { armWatchdog(active) }
    }

    func jobRequestStop(_ job: JobContext, reason: CancellationReason, detail: String) {
        if let active = running.run(of: job) { stop(active, reason, detail: detail) }
    }
}
