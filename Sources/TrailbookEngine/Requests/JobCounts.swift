import TrailbookLoop

/// How many unfinished jobs are in each state, for summaries (`list`'s counts, which `watch` shows, and the
/// service manager's status line).
///
/// On a store of one daemon these are the daemon's own counters (`local`): counted once on start, then kept up to
/// date by every transition, so a summary never loads or counts jobs. On a shared store the daemon's counters
/// cannot be right (other daemons submit and claim), so a summary is the store's own count of every daemon's
/// jobs (`fromStore`), read without holding the loop: with every heartbeat while someone listens (`onChange`),
/// and with each `list`.
@LoopActor
final class JobCounts {
    /// Whether summaries come from the store (a shared store) rather than from `local`.
    let fromStore: Bool
    /// This daemon's counters, by state: unfinished states only, transitions the store has not taken yet
    /// included.
    var local: [JobState: Int] = [:]
    /// The store's last count (shared store), `nil` until it first answered.
    private(set) var stored: [JobState: Int]?
    /// Called when a refreshed count differs from the one before (the status line follows it).
    var onChange: (@LoopActor () -> Void)?
    /// Whether a `refresh` is waiting for the store (one at a time).
    private var refreshing = false

    /// Counts kept by this daemon (`fromStore` false) or read from a shared store.
    init(fromStore: Bool) {
        self.fromStore = fromStore
    }

    /// The counts a summary shows: the store's last count on a shared store (this daemon's counters until it
    /// first answered), else this daemon's counters.
    var summary: [JobState: Int] { fromStore ? stored ?? local : local }

    /// Notes a count the store gave (`list` reads one with its page); `onChange` hears of a difference.
    func heard(_ counts: [JobState: Int]) {
        guard fromStore else { return }
        let changed = stored != counts
        stored = counts
        if changed { onChange?() }
    }

    /// Asks a shared store for its count without waiting, when someone listens for it; an unanswered count keeps
    /// the last one.
    func refresh(from store: any JobStoring) {
        guard fromStore, onChange != nil, !refreshing else { return }
        refreshing = true
        store.countUnfinished { [weak self] result in
            LoopIsolation.assume {
                guard let self else { return }
                self.refreshing = false
                if case .success(let counts) = result { self.heard(counts) }
            }
        }
    }
}
