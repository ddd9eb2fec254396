import TrailbookLoop

// Preemption by priority on a shared store: a daemon whose slots are all taken claims a waiting job that outranks
// its lowest run, and that run stops (`resource_reclaim`) to give the job its slot.
extension Scheduler {
    /// Shared store, on the lease tick: when every slot is taken and a queued job this daemon may run (its queues,
    /// kinds and host) has a higher priority than its lowest run, claims that job (one per tick) and stops that
    /// run with `resource_reclaim`; the claimed job starts once the run has stopped (checkpointed, back in the
    /// queue on the same attempt). The store gives a waiting job to one daemon only, so one job stops one run.
    /// Uses the claim's turn (`claims`): never beside a claim or while a group is in flight.
    func preemptOnSharedStore(_ claiming: ClaimingDispatch) {
        let claims = claiming.claims
        guard !isShuttingDown, let floor = preemptionChoice(claims).claimAbove,
            claims.askAlone(groupInFlight: groupCommit.isInFlight)
        else { return }
        claiming.claim(outranking: floor, kinds: kindNames) { [weak self] result in
            self?.outrankingClaimAnswered(result, claims: claims, floor: floor)
        }
    }

    /// This daemon's slots as `PreemptionChoice` weighs them, with the jobs `claims` holds for stopping runs.
    func preemptionChoice(_ claims: Claims) -> PreemptionChoice {
        PreemptionChoice(runs: Array(preemptionRuns), concurrency: options.concurrency, held: claims.heldCount)
    }

    /// Starts the claims `claiming` holds while slots are free (all of them while shutting down: `shutdown` then
    /// stops them with the rest, and they go back to the queue).
    func launchHeldClaims(_ claiming: ClaimingDispatch) {
        while isShuttingDown || running.count < options.concurrency, let run = claiming.claims.takeHeld() {
            guard let kind = kinds[run.job.kind] else { continue }
            launch(prepared(run.job, kind: kind), kind: kind)
        }
    }

    private func outrankingClaimAnswered(_ result: Result<[ClaimedRun], any Error>, claims: Claims, floor: Int) {
        guard let again = claims.answered() else { return }
        let what = "a claim of a job above priority \(floor)"
        switch result {
        case .success(let claimed):
            _ = settled(what, nil)
            for run in claimed { take(run, claims: claims) }
        case .failure(let error):
            _ = settled(what, error)
        }
        claims.resumeWaiters()
        if again { schedule() }
    }

    /// A job claimed over the daemon's runs: it starts now if a slot freed meanwhile, else it is held and the
    /// lowest run below it stops for it. If no run is below it any more (those ended meanwhile and higher jobs
    /// took their slots), it is held for the next free slot: it is the highest job waiting.
    private func take(_ run: ClaimedRun, claims: Claims) {
        guard let kind = kinds[run.job.kind] else { return }  // claims only registered kinds
        claims.remember(run)
        let choice = preemptionChoice(claims)
        if isShuttingDown || choice.hasFreeSlot { return launch(prepared(run.job, kind: kind), kind: kind) }
        claims.hold(run)
        let priority = run.job.options.priority
        guard let victim = choice.victim(for: priority), let active = running[victim.id] else {
            return DaemonLog.write(
                "job \(run.job.id.prefix(8)) \(run.job.kind) (priority \(priority)) claimed to preempt a run; none is "
                    + "below it any more: it starts in the next free slot")
        }
        stop(active, .resourceReclaim, detail: PreemptionChoice.detail(preemptedBy: run.job.id, priority: priority))
    }
}
