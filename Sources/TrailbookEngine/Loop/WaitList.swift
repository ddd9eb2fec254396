import TrailbookLoop

/// Tasks on the loop waiting for one thing to happen (a claim or a group answered, a run stopped, a submit's key
/// free again, a submit's group written), all resumed at once when it does. The engine's one list of waiting
/// continuations, so each wait reads as `await list.wait()` and each event as `list.resumeAll()`.
@LoopActor
final class WaitList {
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// An empty list.
    nonisolated init() {}

    /// Suspends the caller until the next `resumeAll()`.
    func wait() async {
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Resumes every task waiting now; a task that waits after this call waits for the next one.
    func resumeAll() {
        let resumed = waiting
        waiting.removeAll()
        for continuation in resumed { continuation.resume() }
    }
}
