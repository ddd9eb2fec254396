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

// Dispatch: what starts when (local queue reads and preemption on SQLite, claims on a shared store).
extension Scheduler {
    /// Starts what can run now: reads this daemon's queue (`LocalDispatch`) or claims from the shared store
    /// (`ClaimingDispatch`). Nothing while shutting down.
    func schedule() {
        guard !isShuttingDown else { return }
        switch dispatcher {
        case .local(let local): scheduleLocally(local)
        case .claiming(let claiming): claim(claiming)
        }
    }

    /// Starts queued jobs while slots are free, then preempts for a waiting job of higher priority.
    private func scheduleLocally(_ local: LocalDispatch) {
        // A job that ends as it starts (a kind this daemon lacks) frees its slot at once: look again, until the
        // slots are full or nothing more could start. Each pass ends at least one job for good, so this stops.
        var again = true
        while again {
            again = false
            let free = options.concurrency - running.count
            guard free > 0, let queued = local.ready(limit: free, skipping: queuedButNotWaiting) else { break }
            // `firstStart`: its attempt was 0, so no run of it saved a checkpoint (its run skips reading one).
            var starting: [(job: JobRecord, kind: AnyJobKind, firstStart: Bool)] = []
            for job in queued {
                if let kind = kinds[job.kind] {
                    if let started = startable(job, kind: kind) { starting.append((started, kind, job.attempt == 0)) }
                } else if startUnknownKind(job) == .endedAtOnce {
                    again = true
                }
            }
            guard !starting.isEmpty else { continue }
            // A healthy store: the starts go with the turn's group commit (not fsynced: a crash puts a `running`
            // job back in the queue anyway), the jobs run now.
            if !storeHealth.isRefusing, !groupCommit.isClosed {
                for (job, kind, firstStart) in starting {
                    groupCommit.queueStart(job)
                    launch(job, kind: kind, firstStart: firstStart)
                }
                armGroupCommit()
                continue
            }
            // While the store refuses writes, every start of this pass in one transaction first: a refused write
            // leaves them all queued; the store retry runs `schedule()` again once writes succeed.
            var none: [JobRecord] = []
            guard write("the start of \(starting.count) jobs", {
                try store.commitGroup(
                    inserting: &none, digests: [], duplicateKeys: [], updating: starting.map { ($0.job, false) },
                    durable: false)
            }).isWritten else { break }
            for (job, kind, firstStart) in starting { launch(job, kind: kind, firstStart: firstStart) }
        }
        preemptIfNeeded(local)
    }

    /// Shared store: claims as many queued jobs of the kinds this daemon has as it has free slots (the store
    /// starts them, atomically with the row lock) and runs them once the claim is answered. A refused claim is
    /// retried by the store retry and the lease timer.
    ///
    /// The claim does not wait on the loop: the loop answers pings, reads and controls during its round trip.
    /// One is in flight at a time, its answer claims again if asked to meanwhile, so notices arriving together cost
    /// two claims, not one each. (A claim sent without waiting once held up an idle daemon's reads, one claim per
    /// job another daemon queued; the notices now name the queue and pinned host, and a daemon claims only for
    /// work it may take.)
    private func claim(_ claiming: ClaimingDispatch) {
        let claims = claiming.claims
        launchHeldClaims(claiming)
        let free = options.concurrency - running.count - claims.heldCount
        guard free > 0 else { return }
        // Not beside a claim in flight (its answer claims again), nor while a group is in flight: a job it puts
        // back in the queue must be announced (and its lease released) before it can be claimed again. The
        // group's answer schedules again.
        guard claims.ask(groupInFlight: groupCommit.isInFlight) == .send else { return }
        claiming.claim(limit: free, kinds: kindNames) { [weak self] result in
            self?.claimAnswered(result, claims: claims, what: "a claim of \(free) jobs")
        }
    }

    /// Runs what a claim took (also while shutting down: `shutdown` waits for the claim, then stops its jobs with
    /// the others), or settles its refusal; then claims again if asked to meanwhile.
    private func claimAnswered(_ result: Result<[ClaimedRun], any Error>, claims: Claims, what: String) {
        guard let again = claims.answered() else { return }
        switch result {
        case .success(let claimed):
            _ = settled(what, nil)
            for run in claimed {
                guard let kind = kinds[run.job.kind] else { continue }  // claims only registered kinds
                claims.remember(run)
                launch(prepared(run.job, kind: kind), kind: kind)
            }
        case .failure(let error):
            _ = settled(what, error)
        }
        claims.resumeWaiters()
        if again { schedule() }
    }

    /// What `startUnknownKind` did with a queued job.
    private enum StartOutcome {
        /// It ended as it started (its kind is unknown here), and that is recorded.
        case endedAtOnce
        /// Nothing changed (not startable now, or its new state could not be recorded).
        case unchanged
    }

    /// When a job of higher priority waits and every slot is taken, stops the lowest-priority running job
    /// (the most recently started among equals) with `resource_reclaim`; it goes back to the queue
    /// (`LocalDispatch.preemptions`). A shared store preempts on the lease tick instead (`preemptOnSharedStore`):
    /// a slot freed here could be claimed by another daemon for another job.
    private func preemptIfNeeded(_ local: LocalDispatch) {
        guard running.count >= options.concurrency else { return }
        // The usual case first, from one row: the most urgent waiting job outranks no running one.
        guard let lowest = LocalDispatch.preemptionFloor(runs: preemptionRuns, concurrency: options.concurrency),
            let first = local.highestReadyPriority(skipping: queuedButNotWaiting), first > lowest,
            let waiting = local.ready(limit: options.concurrency, skipping: queuedButNotWaiting), !waiting.isEmpty
        else { return }
        for preemption in LocalDispatch.preemptions(runs: Array(preemptionRuns), waiting: waiting) {
            guard let victim = running[preemption.run] else { continue }
            let detail = PreemptionChoice.detail(preemptedBy: preemption.job, priority: preemption.priority)
            stop(victim, .resourceReclaim, detail: detail)
        }
    }

    /// Records the start of a queued job of a kind this daemon lacks: a stored job an older or newer version
    /// wrote. It starts and fails at once, through the lifecycle like any other failure, so the feed and the
    /// attempt count stay true. One write (queued -> failed), then both transitions announced: a failed write
    /// leaves it queued, never half-way in `running`.
    private func startUnknownKind(_ queued: JobRecord) -> StartOutcome {
        var job = queued
        var lifecycle = job.lifecycle
        guard lifecycle.handle(.start) == .run else { return .unchanged }
        job.adopt(lifecycle)
        let started = job
        _ = lifecycle.handle(.fail(retryable: false))
        job.adopt(lifecycle)
        job.error = JobError(code: "unknown_kind", message: "this daemon has no job kind '\(job.kind)'")
        guard write("the state of job \(job.id.prefix(8))", { try store.update(job, addingCleanUp: false) }).isWritten else {
            return .unchanged
        }
        announce(started, from: .queued)
        announce((try? store.job(id: job.id)) ?? job, from: .running)
        return .endedAtOnce
    }

    /// A queued job as it starts (state `running`, its attempt counted), or `nil` if it cannot start.
    private func startable(_ queued: JobRecord, kind: AnyJobKind) -> JobRecord? {
        var job = queued
        var lifecycle = job.lifecycle
        guard lifecycle.handle(.start) == .run else { return nil }
        job.adopt(lifecycle)
        return prepared(job, kind: kind)
    }

    /// A started job (state `running`) as its run begins: no error of an earlier attempt, the kind's unit, no rate.
    func prepared(_ started: JobRecord, kind: AnyJobKind) -> JobRecord {
        var job = started
        job.error = nil
        job.progress.unit = kind.traits.unit
        job.progress.ratePerSecond = nil
        job.progress.etaSeconds = nil
        job.updatedAt = Timestamp.nowISO8601()
        return job
    }

    /// This daemon's runs as preemption weighs them (`LocalDispatch`, `PreemptionChoice`), made as they are read.
    var preemptionRuns: some Collection<PreemptionChoice.Run> {
        running.values.lazy.map {
            PreemptionChoice.Run(
                id: $0.record.id, priority: $0.record.options.priority, startedAt: $0.startedAt,
                isStopping: $0.context.stopReason != nil)
        }
    }

    /// The jobs the store still has queued whose newer state is not written yet (refused writes, starts waiting
    /// for the turn's group commit): the queue reads pass over them.
    var queuedButNotWaiting: Set<String> {
        Set(pendingWrites.recordIDs).union(groupCommit.starts.keys)
    }
}
