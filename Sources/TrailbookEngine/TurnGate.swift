import TrailbookLoop

/// Lets one piece of heavy work (a `list` reply of up to 100 000 jobs) run per turn of the loop, in arrival order.
///
/// Without it, many clients asking for big lists at once (half-closed ones that never read the answers among
/// them) had every reply built back to back before the loop polled again: a new client waited seconds for a
/// `ping`. Through the gate, each build is followed by a turn (`Scheduler.nextTurn`) in which the loop polls and
/// serves everyone else before the next one starts.
@LoopActor
final class TurnGate {
    private var held = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Waits for the gate (at once when it is free).
    func enter() async {
        guard held else {
            held = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Passes the gate to the next waiter, on the loop's next turn; frees it if none waits.
    func leave() {
        guard !waiting.isEmpty else {
            held = false
            return
        }
        let next = waiting.removeFirst()
        Task.onLoop {
            await Scheduler.nextTurn()
            next.resume()
        }
    }
}
