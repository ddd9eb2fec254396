import TrailbookLoop

/// Lets one piece of heavy work (a `list` reply of up to 100 000 jobs, a watcher's replay) run at a time, in
/// arrival order, and at most about half of the loop's time.
///
/// The requests of many connections wait in the loop's inbox together and ran back to back in one drain of it:
/// with 200 half-closed clients asking for the longest list, a new client was not even accepted for 93 s (debug
/// build, 1 100 jobs: 0.5 s a list). Through the gate, the next piece starts only after a pause as long as the
/// last one took (at least 1 ms, on a timer), so the loop polls in between and serves everyone else.
@LoopActor
final class TurnGate {
    private var held = false
    /// When the next piece may start (`Timestamp.monotonic()` seconds).
    private var readyAt = 0.0
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private var handingOver = false

    /// Waits for the gate: at once when it is free, no one waits and the last pause is over.
    func enter() async {
        if !held, waiting.isEmpty, Timestamp.monotonic() >= readyAt {
            held = true
            return
        }
        await withCheckedContinuation { continuation in
            waiting.append(continuation)
            handOver()
        }
    }

    /// Frees the gate; the next waiter gets it after `pause` seconds (the time the work took; at least 1 ms).
    func leave(pause: Double) {
        held = false
        readyAt = Timestamp.monotonic() + max(pause, 0.001)
        handOver()
    }

    /// Gives the gate to the first waiter once the pause is over, from a timer (so the loop polls first).
    private func handOver() {
        guard !held, !waiting.isEmpty, !handingOver else { return }
        handingOver = true
        Task.onLoop {
            await Scheduler.wait(seconds: max(0, self.readyAt - Timestamp.monotonic()))
            self.handingOver = false
            guard !self.held, !self.waiting.isEmpty else { return }
            guard Timestamp.monotonic() >= self.readyAt else { return self.handOver() }
            self.held = true
            self.waiting.removeFirst().resume()
        }
    }
}
