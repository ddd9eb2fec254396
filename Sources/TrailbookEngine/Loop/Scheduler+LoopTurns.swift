import TrailbookLoop
import TrailbookSQLite

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

// Loop turns: helpers that let long work on the loop take turns (used by other files too).
extension Scheduler {
    /// Suspends until the loop's next turn, after it has polled for I/O, so a long piece of work lets other
    /// clients and jobs in between its slices. `Task.yield()` would not: the loop runs every ready task before
    /// it polls again.
    public static func nextTurn() async { await wait(seconds: 0) }

    /// Long work on the loop (a big batch's entries) done in slices of at most `seconds` of the loop's time each:
    /// `pause()` lets the loop take a turn once the current slice has run that long, and costs a clock read
    /// otherwise.
    ///
    /// On the loop's actor, as its callers are: a nested type does not take its outer type's actor, and a
    /// nonisolated `pause()` made every call hop to the global executor's threads and back (two thread switches
    /// per entry of every batch: a futex wake each way, 45 000 futex calls for 10 000 jobs in `strace -c`).
    @LoopActor
    public struct LoopSlice {
        /// How long one slice may hold the loop, in seconds.
        public let seconds: Double
        private var start = Timestamp.monotonic()

        /// A slice starting now; `seconds` is its length (20 ms unless given).
        public init(seconds: Double = 0.02) { self.seconds = seconds }

        /// Takes a loop turn (`nextTurn`) when the slice has run for `seconds`, then starts the next one.
        /// - Returns: whether it took a turn (other work ran meanwhile).
        public mutating func pause() async -> Bool {
            guard Timestamp.monotonic() - start >= seconds else { return false }
            await Scheduler.nextTurn()
            start = Timestamp.monotonic()
            return true
        }
    }

    /// Suspends for `seconds` on a loop timer (the loop serves everything else meanwhile).
    static func wait(seconds: Double) async {
        let timer = LoopTimer(loop: .main)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            timer.start(seconds: seconds) { continuation.resume() }
        }
        timer.close()
    }
}
