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

// Runs: launching a job, running its kind, its watchdog, stopping it, and recording how it ended.
extension Scheduler {
    /// Runs a job whose start is written. `firstStart`: the job never started before (its attempt was 0), so it
    /// has no checkpoint.
    func launch(_ job: JobRecord, kind: AnyJobKind, firstStart: Bool = false) {
        let active = RunningJob(record: job, context: makeContext(for: job, kind: kind), kind: kind)
        active.hasNoCheckpoint = firstStart
        running.launched(active)
        announce(job, from: .queued)
        armWatchdog(active)
        // One task a run: the kind's `run` runs in it and a stop cancels it (`JobContext.cancelOnStop`), so
        // `Task.checkCancellation()` and cancellation handlers in `run` see the stop. Only a stopped run takes a
        // second task, for `onCancel`, which must not be cancelled: it may still do I/O.
        let run = Task.onLoop {
            let outcome = await self.execute(active)
            active.context.runReturned()
            guard case .stopped(let reason) = outcome else { return self.finish(active, outcome) }
            Task.onLoop {
                await active.kind.onCancel(reason, active.record.params, active.context)
                self.finish(active, outcome)
            }
        }
        active.context.cancelOnStop(run)
    }

    func makeContext(for job: JobRecord, kind: AnyJobKind) -> JobContext {
        let context = JobContext(
            id: job.id, kind: job.kind, attempt: job.attempt, maxAttempts: job.options.maxAttempts, traits: kind.traits,
            progress: job.progress, giveUpAfterSeconds: job.options.giveUpAfterSeconds,
            stallTimeoutSeconds: job.options.stallTimeoutSeconds)
        context.host = self
        return context
    }

    /// Runs the kind's `run` (not `onCancel`) and says how it ended.
    func execute(_ active: RunningJob) async -> Outcome {
        let context = active.context
        do {
            try context.checkCancellation()
            return .succeeded(try await active.kind.run(active.record.params, context))
        } catch let error as JobError {
            return context.stopReason.map { .stopped($0) } ?? .failed(error)
        } catch {
            return context.stopReason.map { .stopped($0) }
                ?? .failed(JobError(code: "internal", message: "job failed unexpectedly: \(error)"))
        }
    }

    func finish(_ active: RunningJob, _ outcome: Outcome) {
        dispatcher.forgetClaimedCheckpoint(of: active.record.id)
        if active.stop.isLeaseLost { return endWithoutLease(active) }
        var job = live(active)
        var lifecycle = job.lifecycle
        let effect: JobLifecycle.Effect?
        var outcome = outcome
        if case .storeFailed(let failure) = active.stop {
            if case .succeeded = outcome {} else { outcome = .failed(failure) }
        }
        switch outcome {
        case .succeeded(let result):
            effect = lifecycle.handle(.succeed)
            job.result = result
            job.progress.etaSeconds = 0
            job.progress.isFinished = true
        case .failed(let error):
            effect = lifecycle.handle(error.pausesJob ? .blocked : .fail(retryable: error.retryable))
            job.error = error
        case .stopped(let reason):
            let (detail, thenPause) = active.stop.detailAndPause
            effect = lifecycle.handle(.stopped(reason, pausing: thenPause))
            job.cancellation = Cancellation(reason: reason, at: Timestamp.nowISO8601(), detail: detail)
            if reason == .timeout && lifecycle.state == .failed {
                job.error = JobError(
                    code: "timeout",
                    message: "\(detail); gave up after \(job.attempt) of \(job.options.maxAttempts) attempts")
            }
        }
        job.adopt(lifecycle)
        job.retryAt = nil
        if case .scheduleRetry(let attempt)? = effect {
            let delay = options.backoff.delay(afterAttempt: attempt, unitRandom: Double.random(in: 0...1))
            job.retryAt = Timestamp.now() + delay
            retries[job.id] = Timestamp.monotonic() + delay
        }
        if job.state != .running {
            // Nothing is under way once the run ended: what was in flight is either acknowledged or not.
            job.progress.inFlight = job.progress.inFlight.map { _ in 0 }
            job.progress.ratePerSecond = nil
            if job.state != .succeeded { job.progress.etaSeconds = nil }
        }
        active.watchdog.close()
        running.ended(job.id)
        job.updatedAt = Timestamp.nowISO8601()
        let cleansUp = active.kind.traits.cleansUpAfterEnd && (job.state == .failed || job.state == .cancelled)
        // Nothing waits for it after this (`waitUntilStopped` checks `running`): those waiting now are resumed
        // once its end is written.
        let waiters = active.waiters
        retries.arm()
        // Written with the turn's group commit. A refused write keeps the end in memory (announced, shown,
        // cancellable) until the store retry writes it; kinds drop their state, and clean up, only once it is
        // written. A restart before then recovers the job as after a crash.
        let ended = job
        commitAtTurnEnd(job, from: .running, addingCleanUp: cleansUp) { recorded in
            if recorded && ended.state.isTerminal && !cleansUp { active.kind.jobEnded(ended.id, ended.state) }
            guard cleansUp && recorded else {
                waiters.resumeAll()
                return
            }
            // The first clean-up try before `cancel` answers, so a cancelled upload is gone from the server by then.
            Task.onLoop {
                await self.tryCleanUp(ended.id)
                active.kind.jobEnded(ended.id, ended.state)
                waiters.resumeAll()
            }
        }
    }

    /// Asks `active` to stop for `reason` (`detail` says why); with `thenPause`, the job is paused afterwards
    /// instead of queued again. A run already stopping keeps its reason; `thenPause` still makes it a pause.
    func stop(_ active: RunningJob, _ reason: CancellationReason, detail: String, thenPause: Bool = false) {
        guard active.context.stopReason == nil else {
            if thenPause { active.stop = active.stop.pausedAfterwards }
            return
        }
        active.stop = .stopping(reason, detail: detail, thenPause: thenPause)
        active.context.stop(reason)
        log(active.record, .info, "stopping (\(reason.rawValue)): \(detail)")
    }

    func waitUntilStopped(_ active: RunningJob) async {
        guard running[active.record.id] === active else { return }
        await active.waiters.wait()
    }

    /// One timer per running job, due at whichever comes first: its deadline or its stall limit. Neither clock
    /// runs while the job waits out an outage (`JobContext.waitOut`): the timer is off then, the deadline is moved
    /// by the time waited, and the stall clock starts again when the wait ends.
    func armWatchdog(_ active: RunningJob) {
        guard active.waitingSince == nil else {
            active.watchdog.stop()
            return
        }
        let now = Timestamp.monotonic()
        let deadline = active.startedAt + active.record.options.timeoutSeconds + active.excusedSeconds
        let stallAt = active.lastMoveAt + active.record.options.stallTimeoutSeconds
        if now >= deadline {
            stop(active, .timeout, detail: "ran past its deadline of \(Self.seconds(active.record.options.timeoutSeconds))")
            return
        }
        if now >= stallAt {
            stop(active, .timeout, detail: "no progress for \(Self.seconds(active.record.options.stallTimeoutSeconds))")
            return
        }
        let due = min(deadline, stallAt) - now
        active.watchdog.start(seconds: due) { [weak self, weak active] in
            guard let self, let active, active.context.stopReason == nil else { return }
            self.armWatchdog(active)
        }
    }
}
