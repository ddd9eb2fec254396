/// The dispatch of a daemon alone on its (SQLite) store: it owns the ready queue (the store's queued jobs, in run
/// order, read past those whose newer state is not written yet) and preemption by priority (which runs stop, with
/// `resource_reclaim`, so that waiting jobs of higher priority take their slots). Starting, launching and stopping
/// stay the `Scheduler`'s (`Scheduler+Dispatch.swift`).
struct LocalDispatch {
    /// The store whose queue this daemon alone reads.
    let store: any JobStoring

    /// A run that stops to free its slot for a waiting job of higher priority (`preemptions`).
    struct Preemption: Equatable {
        /// The run that stops (its job id).
        var run: String
        /// The waiting job it stops for.
        var job: String
        /// That job's priority.
        var priority: Int
    }

    /// The queued jobs in run order (priority, then submission), at most `limit`, passing over `skipping` (jobs
    /// whose newer state is not written yet); `nil` if the store cannot be read.
    func ready(limit: Int, skipping: Set<String>) -> [JobRecord]? {
        try? store.queuedJobs(limit: limit, skipping: skipping)
    }

    /// The priority of the first job `ready(limit:skipping:)` would return; `nil` if none waits or the store
    /// cannot be read.
    func highestReadyPriority(skipping: Set<String>) -> Int? {
        (try? store.highestQueuedPriority(skipping: skipping)) ?? nil
    }

    /// The priority a waiting job must be above to preempt one of `runs` when all `concurrency` slots are taken:
    /// the lowest priority of a run not stopping already; `nil` when a slot is free or every run is stopping
    /// (nothing to preempt). Read before the queue, so the usual case costs one row.
    static func preemptionFloor(runs: some Collection<PreemptionChoice.Run>, concurrency: Int) -> Int? {
        guard runs.count >= concurrency else { return nil }
        return runs.lazy.filter { !$0.isStopping }.map(\.priority).min()
    }

    /// Which of `runs` stop for which of `waiting` (in run order): each run already stopping frees its slot for
    /// the next waiting job; then each further waiting job takes the slot of the lowest-priority run not stopping
    /// (the most recently started among equals) if it is below the job's priority. Equal priorities never
    /// preempt; the first waiting job no run is below ends the choice.
    static func preemptions(runs: [PreemptionChoice.Run], waiting: [JobRecord]) -> [Preemption] {
        var freeing = runs.filter(\.isStopping).count
        var candidates = runs.filter { !$0.isStopping }
            .sorted { ($0.priority, -$0.startedAt) < ($1.priority, -$1.startedAt) }
        var chosen: [Preemption] = []
        for job in waiting {
            if freeing > 0 {
                freeing -= 1
                continue
            }
            guard let victim = candidates.first, victim.priority < job.options.priority else { break }
            candidates.removeFirst()
            chosen.append(Preemption(run: victim.id, job: job.id, priority: job.options.priority))
        }
        return chosen
    }
}
