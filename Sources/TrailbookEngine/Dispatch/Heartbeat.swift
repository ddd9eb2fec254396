import TrailbookLoop

/// Owns a shared store's heartbeat timer (every third of a lease: renewals, rescues, due retries, a claim) and
/// whether a beat is in flight: one at a time, so a store slower than the period does not pile them up.
@LoopActor
final class Heartbeat {
    private var timer: LoopTimer?
    private var inFlight = false

    /// No timer yet.
    nonisolated init() {}

    /// Whether `start` armed the timer (and `close` did not stop it).
    var isStarted: Bool { timer != nil }

    /// Calls `beat` every `milliseconds` until `close`.
    func start(milliseconds: UInt64, _ beat: @escaping @LoopActor () -> Void) {
        let timer = LoopTimer(loop: .main)
        self.timer = timer
        timer.start(milliseconds: milliseconds, repeatMilliseconds: milliseconds) {
            LoopIsolation.assume { beat() }
        }
    }

    /// Marks a beat in flight; `false` when one already is (this one is skipped).
    func begin() -> Bool {
        guard !inFlight else { return false }
        inFlight = true
        return true
    }

    /// The beat in flight was answered.
    func end() {
        inFlight = false
    }

    /// Stops the timer (shutdown).
    func close() {
        timer?.close()
        timer = nil
    }
}
