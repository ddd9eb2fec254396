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

/// The engine's public face: it owns the rooms that drive every job (one property each: `dispatcher`, `running`,
/// `groupCommit`, `pendingWrites`, `admission`, `counts`, the due-time timers) and the order in which
/// the daemon starts and stops them. The rooms' work lives in its extensions, one folder per concern (`Requests/`,
/// `Dispatch/`, `Runs/`, `Writes/`, `Timers/`; see `docs/explanation/engine.md`): queueing by priority, the
/// concurrency limit, deadlines and stall timeouts, retries with backoff, preemption, pause, cancel and shutdown.
///
/// It applies `JobLifecycle` (the one place where transitions are decided), persists each transition in the
/// `JobStore` before announcing it on the `ProgressFeed`, and runs each job as a task on the loop. Timers exist only
/// while something is due (a running job's watchdog, the next retry), so an idle daemon uses no CPU.
@LoopActor
public final class Scheduler {
    /// The defaults and limits it was made with.
    public let options: SchedulerOptions
    /// The feed it announces every transition and progress report on.
    public let feed: ProgressFeed
    /// The worker processes job kinds reach through `JobContext.runInWorker`; `nil` until the daemon sets it.
    public var workerPool: WorkerPool?
    let store: any JobStoring
    /// How jobs get here, chosen once from `store`: read from this daemon's own queue, or claimed from a shared
    /// store under leases (which then owns the claims, the lease heartbeat and the waits for other daemons' runs).
    let dispatcher: Dispatcher
    var kinds: [String: AnyJobKind] = [:]
    /// The runs holding this daemon's slots and the clean-ups being tried now.
    var running = RunningJobs()
    /// When each `needs_retry` job is due, on the monotonic clock (`Timestamp.monotonic()`): a step of the wall
    /// clock neither delays nor hastens a retry. The stored `retry_at` (wall clock) is for display and for the
    /// next start, which turns it back into a monotonic due time (clamped, see `start()`).
    let retries = DueTimes()
    /// When each pending clean-up's next try is due, on the monotonic clock, like `retries` (the store's
    /// `next_at` is wall-clock time for the next start).
    let cleanUps = DueTimes()
    var isShuttingDown = false
    /// The unfinished jobs by state, for summaries.
    let counts: JobCounts
    /// What the submits under way hold: their idempotency keys and duplicate keys, their numbers.
    let admission = Admission()

    /// Writes the store refused (another process holds its lock, or its disk is full), one value per job, written by
    /// the store retry; reads overlay them on the store's last committed state.
    var pendingWrites = PendingWrites()
    /// The store's health as writes find it, and the retry of what it refused.
    let storeHealth = StoreHealth()

    /// The group commit: what the turn queued for it (submits, starts, ends of runs) and where it is.
    let groupCommit = GroupCommit()
    /// Called after each group commit that was written, with its new jobs and transitions (tests count them).
    var groupCommitted: ((_ submits: Int, _ transitions: Int) -> Void)?

    /// Makes a scheduler over `store`, publishing to `feed`.
    public init(store: any JobStoring, feed: ProgressFeed, options: SchedulerOptions) {
        self.store = store
        dispatcher = Dispatcher(store: store)
        counts = JobCounts(fromStore: dispatcher.isShared)
        self.feed = feed
        self.options = options
        retries.onDue = { [weak self] in self?.retryDue() }
        cleanUps.onDue = { [weak self] in self?.cleanUpsDue() }
    }

    /// Makes `kind` available to `submit`.
    public func register<K: JobKind>(_ kind: K) {
        kinds[K.name] = AnyJobKind(kind)
    }

    /// The names of the registered kinds.
    public var kindNames: [String] { kinds.keys.sorted() }

    /// The jobs holding a slot now.
    public var runningCount: Int { running.count }

    /// How many jobs are queued, running, paused and waiting to retry, as the daemon knows them (transitions the
    /// store has not taken yet included). Counted once on `start()` (an index-only scan), then kept up to date by
    /// every transition, so summaries (`watch`, the service status) never load or count jobs. Ended jobs are not
    /// counted (they are pruned). On a shared store only this daemon's part: see `summaryCounts()`.
    public internal(set) var activeCounts: [JobState: Int] {
        get { counts.local }
        set { counts.local = newValue }
        // In place: through `get` and `set`, each `activeCounts[state] += 1` copied the whole dictionary (the copy
        // got and the one kept share storage), several times a job.
        _modify { yield &counts.local }
    }

    /// The counts of unfinished jobs by state for a summary (`list`'s `counts`, which `watch` shows, and the service
    /// status line): this daemon's counters on SQLite; on a shared store every daemon's jobs, as the store last
    /// counted them (read without holding the loop: with each `list`, and with each heartbeat while
    /// `onSummaryChanged` is set), this daemon's counters until it first answered.
    public func summaryCounts() -> [JobState: Int] { counts.summary }

    /// Called on the loop thread when a shared store's count changed (`summaryCounts()`); setting it makes every
    /// heartbeat count the store's jobs (one more statement per heartbeat). Never called with the SQLite store,
    /// whose counts change only with the transitions the feed announces.
    public var onSummaryChanged: (@LoopActor () -> Void)? {
        get { counts.onChange }
        set { counts.onChange = newValue }
    }

    /// On daemon start: puts jobs left `running` by a crash back in the queue (they resume from their checkpoint),
    /// arms the retry timer and starts what can run.
    /// - Throws: `SQLiteError` if the store cannot be read or written.
    public func start() throws {
        activeCounts = try store.countsByState().filter { !$0.key.isTerminal }
        if try !store.duplicateKeysIndexed() {
            try store.indexDuplicateKeys { [kinds] job in kinds[job.kind]?.duplicateKeys(job.params) ?? [] }
        }
        // On a shared store other daemons' jobs are running legitimately: a job of a daemon that died is rescued
        // when its lease expires, and every daemon's due retries are put back in the queue, by the heartbeat
        // (`maintainLeases`, on the database's clock). A timer per waiting retry here would repeat that, one
        // round trip per job per daemon.
        if dispatcher.recoversStoredJobsAtStart {
            try requeueRunsLeftByACrash()
            try armStoredRetries()
        }
        // Clean-ups waiting for their next try: due in what is left of their wait, at most the longest wait
        // between tries (a `next_at` further ahead means the wall clock stepped back while the daemon was down).
        let wallNow = Timestamp.now()
        for pending in try store.dueCleanUps(now: .infinity) {
            let remaining = min(max(0, pending.nextAt - wallNow), options.cleanUpMaxDelaySeconds)
            cleanUps[pending.jobID] = Timestamp.monotonic() + remaining
        }
        store.failFastOnLocks()
        retries.arm()
        cleanUps.arm()
        armLeaseTimer()
        schedule()
    }


    /// Stops every running job with `resource_reclaim` ("daemon shutting down") and waits up to
    /// `shutdownGraceSeconds` for them to checkpoint. Jobs still running after that are left `running` in the store
    /// and resume on the next start, as after a crash.
    public func shutdown() async {
        isShuttingDown = true
        retries.close()
        cleanUps.close()
        if case .claiming(let claiming) = dispatcher {
            claiming.heartbeat.close()
            // A claim in flight may hold jobs for this daemon: they run (its answer launches them) and stop with
            // the rest.
            await claiming.claims.settled()
            launchHeldClaims(claiming)
        }
        let active = Array(running.values)
        for job in active { stop(job, .resourceReclaim, detail: "daemon shutting down") }
        let deadline = LoopTimer(loop: .main)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            var resumed = false
            let finish = {
                if !resumed {
                    resumed = true
                    continuation.resume()
                }
            }
            deadline.start(milliseconds: UInt64(options.shutdownGraceSeconds * 1000)) { finish() }
            Task.onLoop {
                for job in active { await self.waitUntilStopped(job) }
                finish()
            }
        }
        deadline.close()
        for job in running.values { job.watchdog.close() }
        // What ended meanwhile is written now, after a group still in flight; later ends (after the grace) are
        // written at once.
        while groupCommit.isInFlight { await groupAnswered() }
        commitGroup(waiting: true)
        groupCommit.close()
        // One last try at what the store refused; what is still unwritten resumes from the store's state next time.
        storeHealth.close()
        if !pendingWrites.isEmpty { retryStoreWrites() }
    }


    /// Puts the jobs a crash left `running` back in the queue (on start, SQLite store): same attempt, resumed from
    /// their checkpoint (`JobEvent.recoverAfterCrash`).
    /// - Throws: `SQLiteError` if the store cannot be read or written.
    func requeueRunsLeftByACrash() throws {
        for var job in try store.jobs(states: [.running], kind: nil, limit: Int.max) {
            var lifecycle = job.lifecycle
            guard lifecycle.handle(.recoverAfterCrash) != nil else { continue }
            job.adopt(lifecycle)
            job.progress.inFlight = job.progress.inFlight.map { _ in 0 }
            try store.update(job, addingCleanUp: false)
            announce(job, from: .running)
            log(job, .warning, "was running when the daemon stopped unexpectedly; queued to resume from its checkpoint")
        }
    }

    /// Arms a retry timer for each `needs_retry` job of the store (on start, SQLite store): due in what is left of
    /// its backoff, at most the longest backoff (a `retry_at` further ahead means the wall clock stepped back).
    /// - Throws: `SQLiteError` if the store cannot be read or written.
    private func armStoredRetries() throws {
        let now = Timestamp.now()
        let longest = options.longestRetryDelaySeconds
        for var job in try store.jobs(states: [.needsRetry], kind: nil, limit: Int.max) {
            let remaining = (job.retryAt ?? now) - now
            if remaining > longest {
                job.retryAt = now + longest
                try store.update(job, addingCleanUp: false)
                log(
                    job, .warning,
                    "its retry was due in \(Int(remaining)) s, further ahead than the longest backoff "
                        + "(\(Self.seconds(longest))), so the wall clock stepped back; due in \(Self.seconds(longest)) instead")
            }
            retries[job.id] = Timestamp.monotonic() + min(max(0, remaining), longest)
        }
    }

    /// Tells each kind which of its ended jobs retention deleted (`JobKind.jobsPruned`), one call per kind.
    func forgetPruned(_ jobs: [PrunedJob]) {
        for (kind, pruned) in Dictionary(grouping: jobs, by: \.kind) { kinds[kind]?.jobsPruned(pruned.map(\.id)) }
    }

    nonisolated static func seconds(_ value: Double) -> String {
        value >= 1 && value < 1e15 && value.rounded() == value ? "\(Int(value)) s" : "\(value) s"
    }
}
