import Synchronization

/// Raised from the loop when a job is stopped, read by a copy running on the thread pool between its pieces.
final class CopyStop: Sendable {
    private let raised = Atomic<Bool>(false)
    /// Whether the copy should return now.
    var isRaised: Bool { raised.load(ordering: .relaxed) }
    /// Tells the copy to return after its current piece.
    func raise() { raised.store(true, ordering: .relaxed) }
}
