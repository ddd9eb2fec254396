import TrailbookLoop

/// Where the group commit is (`Scheduler.commitGroup`): what a loop turn's submits and transitions do with it.
enum GroupCommitPhase {
    /// What the turn queues goes in the next group, written at the end of the turn.
    case open
    /// A shared store's group is sent and not answered yet: what comes meanwhile waits for the next group, and
    /// `answered` holds the `groupAnswered()` callers.
    case inFlight(answered: WaitList)
    /// Shutdown wrote the last group: each transition is written alone, at once.
    case closed

    /// Whether a group is sent and not answered yet.
    var isInFlight: Bool {
        if case .inFlight = self { return true }
        return false
    }

    /// Whether shutdown closed the group commit.
    var isClosed: Bool {
        if case .closed = self { return true }
        return false
    }
}
