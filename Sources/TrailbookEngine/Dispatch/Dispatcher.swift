import TrailbookLoop

/// How this daemon gets the jobs it runs, chosen once when the `Scheduler` is made, from its store: alone on a
/// SQLite store it reads its own ready queue (`LocalDispatch`); on a store several daemons share it claims jobs
/// under leases (`ClaimingDispatch`). The scheduler asks it the questions whose answer differs between the two
/// (each member below is one such policy), instead of testing which store it has.
@LoopActor
enum Dispatcher {
    /// Alone on its store: the queue is this daemon's, and so is every job's state.
    case local(LocalDispatch)
    /// Sharing its store: jobs are claimed under leases, and other daemons may change any job.
    case claiming(ClaimingDispatch)

    /// The dispatcher for `store`: claiming when it is shared (`LeasingJobStoring`), else local.
    init(store: any JobStoring) {
        if let shared = store as? any LeasingJobStoring {
            self = .claiming(ClaimingDispatch(store: shared))
        } else {
            self = .local(LocalDispatch(store: store))
        }
    }

    /// Whether other daemons share the store: the summary counts are then the store's (`JobCounts(fromStore:)`).
    var isShared: Bool {
        if case .claiming = self { return true }
        return false
    }

    /// Whether a transition the store refused for now (kept in `PendingWrites`, written by the store retry) is
    /// already the job's state: announced at once, and a `cancel` that kept its write has cancelled the job. On a
    /// shared store it is not: another daemon may change the job before the retry writes it (the write is then
    /// fenced off), so it is announced once written, and a cancel waiting for its write says so
    /// (`CancelVerdict.notYetWritten`).
    var keptWriteIsTheJobsState: Bool {
        if case .local = self { return true }
        return false
    }

    /// Whether a group commit takes at most `GroupCommit.maxGroupJobs` jobs (a shared store's group is a round trip
    /// the loop does not wait for; its answer sends the next), or all that wait (SQLite writes it at once).
    var capsGroups: Bool { isShared }

    /// Whether a written group commit is followed by a look for work (`Scheduler.schedule()`). A local look is a
    /// store read, made after every group; a claim is a round trip, made only when the group ended runs (their
    /// slots are free) or a claim waited for the group (`Claims.isPutOff`): submits alone wake the daemons that may
    /// claim their jobs through their notice.
    func looksForWork(afterGroupEndingRuns endedRuns: Bool) -> Bool {
        switch self {
        case .local: return true
        case .claiming(let claiming): return endedRuns || claiming.claims.isPutOff
        }
    }

    /// Whether the daemon's start puts the runs a crash left `running` back in the queue and arms a timer for
    /// each stored retry. On a shared store other daemons' runs are legitimate and the heartbeat rescues expired
    /// leases and queues due retries for every daemon (`maintainLeases`), so a start does neither.
    var recoversStoredJobsAtStart: Bool { keptWriteIsTheJobsState }

    /// Whether a running job's progress is sent without waiting for the store's answer (a shared store: the send
    /// renews its lease, and a lost lease comes back through `onLeaseLost`), rather than written on the loop with
    /// its refusal handled (SQLite).
    var sendsProgressWithoutWaiting: Bool { isShared }

    /// Whether submits may name a queue other than `JobRecord.defaultQueue` (queues are for daemons sharing a
    /// store: `daemon --queues`).
    var acceptsQueues: Bool { isShared }

    /// The host a submitted job that reads this host's files is pinned to (`JobRecord.pinnedHost`): this daemon's
    /// on a shared store, where other hosts could claim it; `nil` alone, where only this host runs it.
    var pinningHost: String? {
        if case .claiming(let claiming) = self { return claiming.host }
        return nil
    }

    /// The checkpoint a claim read with job `id` (`.some(nil)`: it had none), taken once; `nil` when there is none
    /// to take (never claimed, or already loaded, saved or ended). Always `nil` locally.
    func takeClaimedCheckpoint(of id: String) -> JSONValue?? {
        if case .claiming(let claiming) = self { return claiming.claims.takeCheckpoint(of: id) }
        return nil
    }

    /// Forgets the checkpoint a claim read with job `id` (its run saved a newer one or ended).
    func forgetClaimedCheckpoint(of id: String) {
        if case .claiming(let claiming) = self { claiming.claims.forgetCheckpoint(of: id) }
    }
}
