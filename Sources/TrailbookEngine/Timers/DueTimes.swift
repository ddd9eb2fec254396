import TrailbookLoop

/// When each of a set of jobs is next due (a retry, a clean-up's next try), in monotonic seconds
/// (`Timestamp.monotonic()`), and the one loop timer that fires at the earliest. The timer runs only while
/// something is due, so an idle daemon uses no CPU; a step of the wall clock neither delays nor hastens it.
@LoopActor
final class DueTimes {
    /// Called when the timer fires; it takes what is `due()` and calls `arm()` again.
    var onDue: (@LoopActor () -> Void)?
    private var dueAt: [String: Double] = [:]
    private var timer: LoopTimer?
    private var closed = false

    /// Nothing due, no timer.
    nonisolated init() {}

    /// When job `id` is due (monotonic seconds); `nil` for not at all. Setting it does not arm the timer.
    subscript(id: String) -> Double? {
        get { dueAt[id] }
        set { dueAt[id] = newValue }
    }

    /// How many jobs have a due time.
    var count: Int { dueAt.count }

    /// The jobs due now (within 1 ms: a timer may fire that much early), the earliest first. They stay due until
    /// set to `nil`.
    func due() -> [String] {
        let now = Timestamp.monotonic() + 0.001
        return dueAt.filter { $0.value <= now }.sorted { $0.value < $1.value }.map(\.key)
    }

    /// Starts the timer for the earliest due time, or stops it when nothing is due. Nothing once `close()`d.
    func arm() {
        guard !closed else { return }
        guard let next = dueAt.values.min() else {
            timer?.stop()
            return
        }
        let timer = self.timer ?? LoopTimer(loop: .main)
        self.timer = timer
        timer.start(seconds: max(0, next - Timestamp.monotonic())) { [weak self] in self?.onDue?() }
    }

    /// Closes the timer for good (shutdown); the due times stay readable.
    func close() {
        closed = true
        timer?.close()
        timer = nil
    }
}
