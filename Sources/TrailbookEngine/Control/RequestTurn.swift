import TrailbookLoop

/// One request's turn on its control connection (`ControlServer`): over once the request is answered or, for a
/// submit, once its jobs wait for the group commit, whichever comes first; then the connection's next request
/// is handled.
@LoopActor
final class RequestTurn {
    private var ended = false
    private let waiters = WaitList()

    /// A turn under way.
    nonisolated init() {}

    /// Ends the turn (again: nothing more).
    func end() {
        guard !ended else { return }
        ended = true
        waiters.resumeAll()
    }

    /// Waits until the turn is over.
    func over() async {
        if !ended { await waiters.wait() }
    }
}
