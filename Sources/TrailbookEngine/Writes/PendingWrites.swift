import TrailbookSQLite

/// What the store refused and the store retry (`Scheduler.retryStoreWrites`) still has to write, one value per job:
/// its kept state (with what follows its write) and its newest deferred checkpoint.
///
/// The store refuses a write when another process holds its lock, its disk is full or (shared store) the database
/// is down. The new state is kept here (on SQLite already announced) and reads overlay it on the store's last
/// committed state, so the daemon keeps answering with the truth.
struct PendingWrites {
    /// A job state the store refused, kept for the retry, with what its write brings along.
    struct KeptState {
        /// The job as it is now (its newest state).
        var job: JobRecord
        /// Its write records a pending clean-up (`JobStore.update(_:addingCleanUp:)`).
        var addsCleanUp: Bool
        /// A cancelled waiting job: its `onCancel(user_stop)` waits until the cancellation is written.
        var cancelledWhileWaiting: Bool
        /// Shared store: the state announced before `job`'s, whose change is announced only once written (until
        /// the store has it another daemon may take the job over and fence the write off); `nil` when announced
        /// already (always on SQLite, where no other writer can).
        var unannouncedFrom: JobState?
    }

    /// A checkpoint deferred while the store was locked (the newest of its job; each describes durable work).
    struct KeptCheckpoint {
        /// The kind's checkpoint.
        var checkpoint: JSONValue
        /// The job's progress when it was saved.
        var progress: JobProgress
    }

    /// What one job has unwritten: a state, a checkpoint, or both.
    struct Unwritten {
        /// The kept state, if any.
        var state: KeptState?
        /// The deferred checkpoint, if any.
        var checkpoint: KeptCheckpoint?
    }

    /// By job id; a job with nothing unwritten has no entry.
    private var jobs: [String: Unwritten] = [:]

    /// Whether nothing waits for the store retry.
    var isEmpty: Bool { jobs.isEmpty }

    /// What job `id` has unwritten, `nil` if nothing.
    subscript(id: String) -> Unwritten? { jobs[id] }

    /// The kept state of job `id`, if any.
    func record(_ id: String) -> JobRecord? { jobs[id]?.state?.job }

    /// The deferred checkpoint of job `id`, if any.
    func checkpoint(_ id: String) -> KeptCheckpoint? { jobs[id]?.checkpoint }

    /// Every kept state, by job id.
    var records: [String: JobRecord] { jobs.compactMapValues { $0.state?.job } }

    /// The ids of the jobs with a kept state.
    var recordIDs: [String] { jobs.compactMap { $0.value.state == nil ? nil : $0.key } }

    /// The kept states, oldest job first (by submission sequence): the order the retry writes them.
    var statesInWriteOrder: [KeptState] {
        jobs.values.compactMap(\.state).sorted { $0.job.sequence < $1.job.sequence }
    }

    /// The deferred checkpoints, by job id.
    var checkpoints: [(id: String, kept: KeptCheckpoint)] {
        jobs.compactMap { id, unwritten in unwritten.checkpoint.map { (id, $0) } }
    }

    /// Keeps `job`'s refused state. A state kept before it is replaced; what that one brought along stays (a
    /// clean-up to record, a cancelled wait, the state announced before both).
    /// - Parameters:
    ///   - addingCleanUp: its write records a pending clean-up.
    ///   - unannouncedFrom: shared store: the state announced before it; `nil` when it is announced now.
    mutating func keep(_ job: JobRecord, addingCleanUp: Bool, unannouncedFrom: JobState?) {
        var unwritten = jobs[job.id] ?? Unwritten()
        let earlier = unwritten.state
        unwritten.state = KeptState(
            job: job, addsCleanUp: addingCleanUp || earlier?.addsCleanUp == true,
            cancelledWhileWaiting: earlier?.cancelledWhileWaiting == true,
            unannouncedFrom: earlier?.unannouncedFrom ?? unannouncedFrom)
        jobs[job.id] = unwritten
    }

    /// Marks the kept state of job `id` as a cancelled waiting job's (`KeptState.cancelledWhileWaiting`); nothing
    /// if it has none.
    mutating func markCancelledWhileWaiting(_ id: String) {
        jobs[id]?.state?.cancelledWhileWaiting = true
    }

    /// Forgets job `id`'s kept state (written, superseded or fenced off).
    /// - Returns: what it was, `nil` if none.
    @discardableResult
    mutating func removeState(_ id: String) -> KeptState? {
        guard let state = jobs[id]?.state else { return nil }
        update(id) { $0.state = nil }
        return state
    }

    /// Keeps `checkpoint` as job `id`'s newest deferred checkpoint.
    mutating func keepCheckpoint(_ id: String, _ checkpoint: KeptCheckpoint) {
        jobs[id, default: Unwritten()].checkpoint = checkpoint
    }

    /// Forgets job `id`'s deferred checkpoint (written, or subsumed by a newer one).
    mutating func removeCheckpoint(_ id: String) {
        guard jobs[id]?.checkpoint != nil else { return }
        update(id) { $0.checkpoint = nil }
    }

    private mutating func update(_ id: String, _ change: (inout Unwritten) -> Void) {
        guard var unwritten = jobs[id] else { return }
        change(&unwritten)
        jobs[id] = unwritten.state == nil && unwritten.checkpoint == nil ? nil : unwritten
    }
}
