import TrailbookLoop

/// The group commit's state (issue 14): what one loop turn queued for it (submits, starts and ends of runs) and
/// where it is (`GroupCommitPhase`). Its transitions say what the caller does next; the writing itself, and what
/// follows it, is `Scheduler.commitGroup`'s.
///
/// Submits and the ends of runs that arrive within one loop turn are written in one transaction with one fsync at
/// the end of the turn (a check handle, after the loop's I/O callbacks), and only then acknowledged: a submit's
/// reply and a kind's `jobEnded` wait for it. On a shared store one group is in flight at a time; what arrives
/// meanwhile goes in the next one.
@LoopActor
final class GroupCommit {
    /// A run's end (or other transition out of `running`) waiting for the turn's commit.
    struct PendingEnd {
        /// The job in its new state.
        var job: JobRecord
        /// The state it leaves.
        var from: JobState
        /// Its write records a pending clean-up.
        var cleansUp: Bool
        /// What follows the write: `true` when it is written, `false` when the store refused it (then it is in
        /// `Scheduler.pendingWrites`, as a refused write always is).
        var written: @LoopActor (Bool) -> Void
    }

    /// A submit (a batch of one or more new jobs, stored all or none) waiting for the turn's commit.
    struct PendingSubmit {
        /// The new jobs, in order.
        var jobs: [JobRecord]
        /// Each job's parameter digest (duplicate check), `nil` if none.
        var digests: [String?]
        /// Each job's duplicate keys.
        var duplicateKeys: [[String]]
        /// Answered once the group is written or refused.
        var reply: SubmitTicket
    }

    /// What one commit writes: submits, starts of runs (not fsynced) and transitions out of `running`.
    struct Group {
        /// The submits, oldest first.
        var submits: [PendingSubmit]
        /// The starts of runs not written yet, as queued (the caller adds the runs' latest progress).
        var starts: [JobRecord]
        /// The transitions, in the order they came.
        var ends: [PendingEnd]

        /// Whether it writes nothing.
        var isEmpty: Bool { submits.isEmpty && starts.isEmpty && ends.isEmpty }
    }

    /// What became of a transition queued with `queue(_:)`.
    enum Queueing {
        /// It waits for the turn's commit: arm the check (`armCheck`).
        case queued
        /// Shutdown closed the group commit: write it alone, at once.
        case writeAlone
    }

    /// The most new jobs one group commit on a shared store takes (unless its first submit alone has more):
    /// pipelined submits wait for their commit together (`ControlServer`), and one group of all of them (hundreds
    /// of batches) could outlast the store's request timeout, after which each submit would be tried alone.
    static let maxGroupJobs = 2_000

    /// Open, a shared store's group in flight, or closed by shutdown.
    private(set) var phase = GroupCommitPhase.open
    /// Submits waiting for the next group, oldest first.
    private(set) var submits: [PendingSubmit] = []
    /// Transitions waiting for the next group.
    private var ends: [PendingEnd] = []
    /// The records of the queued and in-flight ends by id, for the duplicate check. Reads (`show`, `list`) do not
    /// overlay them: until the end is written and announced they show the job as the feed last did (at most one
    /// loop turn, or on a shared store the group's round trip).
    private(set) var endRecords: [String: JobRecord] = [:]
    /// Starts of runs (the jobs as they started: `running`, attempt counted) not yet written, by id: written with
    /// the turn's group commit, or not at all when the run's end is in the same group (the end's row says all the
    /// start's would, a no-op job's start and end cost one write). Until then the store says `queued`; reads
    /// overlay these (as they do `Scheduler.pendingWrites`) and `queuedJobs` skips them. A crash before the write
    /// leaves the job queued on its earlier attempt, as a crash before the start always did.
    private(set) var starts: [String: JobRecord] = [:]
    /// The check handle that commits at the end of the turn: started by what the turn queues, also from the
    /// commit's own check callback (`schedule()`'s starts), whose next call then comes at once (see `CheckHandle`).
    private var check: CheckHandle?

    /// An open group commit with nothing queued.
    nonisolated init() {}

    /// Whether shutdown closed it.
    var isClosed: Bool { phase.isClosed }

    /// Whether a shared store's group is sent and not answered yet.
    var isInFlight: Bool { phase.isInFlight }

    /// Whether submits or transitions wait for a group (starts alone do not call for one).
    var hasQueuedWrites: Bool { !submits.isEmpty || !ends.isEmpty }

    /// Queues a run's transition for the next group, unless shutdown closed the group commit.
    func queue(_ end: PendingEnd) -> Queueing {
        guard !phase.isClosed else { return .writeAlone }
        ends.append(end)
        endRecords[end.job.id] = end.job
        return .queued
    }

    /// Queues a submit for the next group.
    func queue(_ submit: PendingSubmit) {
        submits.append(submit)
    }

    /// Queues the start of a run for the next group (its newest start, if the job started twice meanwhile).
    func queueStart(_ job: JobRecord) {
        starts[job.id] = job
    }

    /// Takes what the next group writes: every queued transition, the starts of runs that did not end in it, and
    /// the submits (all, or with `capped` up to `maxGroupJobs` new jobs, at least one submit; the others wait for
    /// the group after it).
    /// - Returns: `nil` while a group is in flight (its answer arms the next) or when nothing is queued.
    func take(capped: Bool) -> Group? {
        check?.stop()
        guard !phase.isInFlight else { return nil }
        let taking = capped ? cappedSubmitCount() : submits.count
        let group = Group(
            submits: Array(submits.prefix(taking)),
            starts: startsOutside(ends),
            ends: ends)
        submits.removeFirst(taking)
        ends.removeAll()
        starts.removeAll()
        return group.isEmpty ? nil : group
    }

    /// A group taken with `take` is sent, and answered later (a shared store).
    /// - Returns: the list `answered()` callers wait in, resumed with `finish(_:)`.
    func send() -> WaitList {
        let answered = WaitList()
        phase = .inFlight(answered: answered)
        return answered
    }

    /// A group's writes are settled: its phase is open again (unless shutdown closed it meanwhile) and its ends
    /// leave `endRecords`. The caller then resumes the list `send()` returned.
    func finish(_ group: Group) {
        if phase.isInFlight { phase = .open }
        for end in group.ends { endRecords[end.job.id] = nil }
    }

    /// Waits until no group is in flight.
    func answered() async {
        guard case .inFlight(let answered) = phase else { return }
        await answered.wait()
    }

    /// Closes it (shutdown wrote the last group): each later transition is written alone, at once.
    func close() {
        phase = .closed
        check?.close()
        check = nil
    }

    /// Starts the check handle that runs `commit` at the end of the loop turn.
    func armCheck(_ commit: @escaping @LoopActor () -> Void) {
        let handle = check ?? CheckHandle(loop: .main)
        check = handle
        handle.start { LoopIsolation.assume { commit() } }
    }

    /// How many of the oldest submits make a capped group (see `take`).
    private func cappedSubmitCount() -> Int {
        var count = 0
        var jobs = 0
        for submit in submits {
            if count > 0, jobs + submit.jobs.count > Self.maxGroupJobs { break }
            jobs += submit.jobs.count
            count += 1
        }
        return count
    }

    /// The queued starts whose run has no end in `ends`: a start whose run ended in the same group is not written
    /// (the end's row holds all of it).
    private func startsOutside(_ ends: [PendingEnd]) -> [JobRecord] {
        let ended = Set(ends.lazy.map(\.job.id))
        return starts.values.filter { !ended.contains($0.id) }
    }
}
