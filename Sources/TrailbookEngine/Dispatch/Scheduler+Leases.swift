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

// Leases (shared store): the lease tick, rescued jobs, lost leases and fenced-off writes.
extension Scheduler {
    /// Shared store: every third of a lease, renews the leases of this daemon's running jobs (a job whose lease is
    /// lost stops without writing its end), puts jobs whose lease expired and due retries back in the queue, and
    /// claims what can run (in case a notification was missed).
    func armLeaseTimer() {
        guard case .claiming(let claiming) = dispatcher, !claiming.heartbeat.isStarted else { return }
        claiming.listen(
            workAvailable: { [weak self] in self?.schedule() },
            control: { [weak self] id, control in self?.controlRequested(id, control) },
            leaseLost: { [weak self] id in if let active = self?.running[id] { self?.loseLease(active) } })
        claiming.heartbeat.start(milliseconds: claiming.heartbeatMilliseconds) { [weak self] in
            self?.leaseTick(claiming)
        }
    }

    /// One heartbeat (`ClaimingDispatch.tendLeases`), unless one is in flight or the daemon is shutting down.
    func leaseTick(_ claiming: ClaimingDispatch) {
        // One tick at a time: a store slower than the tick period must not pile them up.
        guard !isShuttingDown, claiming.heartbeat.begin() else { return }
        claiming.tendLeases { [weak self] found in
            self?.leasesTended(found, claiming)
        }
    }

    private func leasesTended(_ found: LeaseMaintenance, _ claiming: ClaimingDispatch) {
        claiming.heartbeat.end()
        guard !isShuttingDown else { return }
        // A lost lease found here was also reported through `onLeaseLost`; `loseLease` acts once.
        for id in found.lost { if let active = running[id] { loseLease(active) } }
        // Requests whose notification was lost (this daemon was reconnecting, or claimed the job after).
        for (id, control) in found.controls { controlRequested(id, control) }
        if !found.rescued.isEmpty {
            DaemonLog.write(
                "rescued \(found.rescued.count) jobs whose daemon's lease expired (queued to resume from their checkpoint): "
                    + found.rescued.map { String($0.id.prefix(8)) }.joined(separator: ", "))
            for job in found.rescued { announceRescue(job) }
        }
        // As `retryDue` announces a retry coming due on one daemon; here the store moved it, for every daemon.
        for job in found.queuedAgain where job.state == .queued { feed.stateChanged(job, from: .needsRetry) }
        // Other daemons submit and claim too: the summary is the store's count, kept fresh with the heartbeat.
        counts.refresh(from: store)
        schedule()
        preemptOnSharedStore(claiming)
    }

    /// Tells every watcher (through the feed, which the shared store relays to the other daemons) that a job whose
    /// daemon stopped renewing its lease is back in the queue: a `state` event `running` → `queued` and a `log`
    /// event saying why. Without them a watcher shows the job running on the dead daemon until another claims it.
    /// The counts need nothing: on a shared store they are the database's.
    private func announceRescue(_ rescued: JobRecord) {
        guard rescued.state == .queued else { return }
        var job = rescued
        // The stored last stop (if any) is an earlier run's; this is no stop of the job's.
        job.cancellation = nil
        feed.stateChanged(job, from: .running)
        feed.log(
            job: job.id, kind: job.kind, level: .warning,
            message: "rescued: the daemon that ran it stopped renewing its lease (killed or cut off); it resumes "
                + "from its last checkpoint on attempt \(job.attempt)")
    }

    /// Stops a job whose lease this daemon lost (another daemon rescued it): its end will not be written.
    private func loseLease(_ active: RunningJob) {
        guard !active.stop.isLeaseLost else { return }
        log(
            active.record, .warning,
            "this daemon lost the job's lease (it expired and another daemon may run the job now): stopping this run without recording its end")
        stop(active, .resourceReclaim, detail: "lease lost")
        active.stop = .leaseLost
    }

    /// A write the shared store fenced off (`JobStoreError.leaseLost`): a running job stops; any other write is
    /// dropped, since another daemon changed the job meanwhile.
    func fencedOff(_ id: String) {
        if let active = running[id] {
            loseLease(active)
        } else {
            DaemonLog.write("job \(id.prefix(8)): another daemon sharing the store changed it meanwhile; this daemon's write is dropped")
        }
    }

    /// A run whose lease was lost is over here: the slot is freed and nothing about it is written or announced
    /// (the daemon that rescued the job owns it now).
    func endWithoutLease(_ active: RunningJob) {
        active.watchdog.close()
        running.ended(active.record.id)
        store.forgetLostLease(of: active.record.id)
        activeCounts[.running, default: 0] -= 1
        DaemonLog.write("job \(active.record.id.prefix(8)) \(active.record.kind): run stopped after its lease was lost; its end is not written")
        active.waiters.resumeAll()
        schedule()
    }
}
