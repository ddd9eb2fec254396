/// Preemption by priority on a shared store, decided from what one daemon runs (a pure function of its slots):
/// whether it should claim a queued job that outranks one of its runs, and which run gives up its slot.
///
/// Each daemon preempts only its own runs, for a job it claims itself: the store's claim (`FOR UPDATE SKIP
/// LOCKED`) hands a waiting job to one daemon only, so one job stops one run, however many daemons look at once.
/// Equal priorities never preempt; a run already stopping frees its slot for the highest job waiting anyway.
struct PreemptionChoice {
    /// A run holding one of the daemon's slots.
    struct Run: Equatable {
        /// The job's id.
        var id: String
        /// Its priority (higher runs first).
        var priority: Int
        /// When this run started, in monotonic seconds: among equal priorities the newest run stops first (it has
        /// the least work to lose).
        var startedAt: Double
        /// Whether something asked it to stop already (a cancel, a timeout, an earlier preemption).
        var isStopping: Bool
    }

    /// The runs holding the daemon's slots.
    var runs: [Run]
    /// How many jobs the daemon runs at once (`daemon --concurrency`).
    var concurrency: Int
    /// Jobs claimed to take the slot of a stopping run, not started yet: each holds a slot too.
    var held: Int

    /// The priority a queued job must be above for the daemon to claim it now, taking a run's slot; `nil` when
    /// it should not: a slot is free (the ordinary claim takes the highest job), a run that is stopping will free
    /// one for a job no claim has taken for it yet, or every run is stopping already.
    var claimAbove: Int? {
        guard runs.count + held >= concurrency else { return nil }
        let stopping = runs.filter(\.isStopping).count
        guard stopping <= held else { return nil }
        return runs.lazy.filter { !$0.isStopping }.map(\.priority).min()
    }

    /// Whether a job just claimed starts at once, in a free slot, instead of waiting for a run to stop.
    var hasFreeSlot: Bool { runs.count + held < concurrency }

    /// The run that gives its slot to a job of `priority`: the lowest-priority run not stopping, the newest among
    /// equals; `nil` if none is below `priority`.
    func victim(for priority: Int) -> Run? {
        let candidates = runs.filter { !$0.isStopping && $0.priority < priority }
        return candidates.min { ($0.priority, -$0.startedAt) < ($1.priority, -$1.startedAt) }
    }

    /// Why a preempted run stopped, as its `cancellation.detail`, its log line and `show` say it; the same words
    /// on both stores (`watch` shows "paused to free a slot — will resume" for it).
    static func detail(preemptedBy job: String, priority: Int) -> String {
        "paused to free a slot for job \(job) (priority \(priority))"
    }
}
