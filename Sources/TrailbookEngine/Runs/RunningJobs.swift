import TrailbookLoop

/// What is under way on this daemon: the runs holding its slots (one `Scheduler.RunningJob` per running job, by
/// job id) and the ended jobs whose clean-up is being tried now (one try at a time per job).
///
/// A run is added as it launches and removed as it ends (its end recorded, or its lease lost); the slots in use
/// are `count`. A context's calls (`JobHost`) reach their run through `run(of:)`, which ignores a context of an
/// earlier run of the same job.
@LoopActor
struct RunningJobs {
    /// The runs by job id.
    private var runs: [String: Scheduler.RunningJob] = [:]
    /// The jobs whose clean-up is being tried now.
    private var cleaningUp: Set<String> = []

    /// No run, no clean-up.
    nonisolated init() {}

    /// How many runs hold a slot.
    var count: Int { runs.count }

    /// Every run, in no particular order.
    var values: Dictionary<String, Scheduler.RunningJob>.Values { runs.values }

    /// The run of job `id`, `nil` if it is not running here.
    subscript(id: String) -> Scheduler.RunningJob? { runs[id] }

    /// The run `context` belongs to: `nil` if its job is not running here, or runs with another context (a later
    /// attempt; the context is of a run that ended).
    func run(of context: JobContext) -> Scheduler.RunningJob? {
        guard let run = runs[context.id], run.context === context else { return nil }
        return run
    }

    /// A run launched: it holds a slot until `ended(_:)`.
    mutating func launched(_ run: Scheduler.RunningJob) {
        runs[run.record.id] = run
    }

    /// The run of job `id` ended: its slot is free.
    mutating func ended(_ id: String) {
        runs[id] = nil
    }

    /// Whether the clean-up of job `id` is being tried now.
    func isCleaningUp(_ id: String) -> Bool {
        cleaningUp.contains(id)
    }

    /// A try of the clean-up of job `id` begins.
    /// - Returns: `false` if one is being tried already (then this one does not begin).
    mutating func beginCleanUp(_ id: String) -> Bool {
        cleaningUp.insert(id).inserted
    }

    /// The try of the clean-up of job `id` ended.
    mutating func endCleanUp(_ id: String) {
        cleaningUp.remove(id)
    }
}
