import TrailbookLoop

/// A `cancel`/`pause` asked of another daemon, waiting for the run's end (`Scheduler.awaitEnd`): it sleeps between
/// reads of the job, woken early by a notice that the end is written.
@LoopActor
final class ControlledEndWait {
    /// How many notices came so far: one that came during a read means the read may be too old.
    private(set) var notices = 0
    private var sleeper: CheckedContinuation<Void, Never>?
    private let timer = LoopTimer(loop: .main)

    init() {}

    /// A notice that the run's end is written: ends the sleep at once.
    func heard() {
        notices += 1
        wake()
    }

    /// Sleeps `seconds` at most, less if a notice comes.
    func sleep(seconds: Double) async {
        await withCheckedContinuation { continuation in
            sleeper = continuation
            timer.start(seconds: seconds) { [weak self] in LoopIsolation.assume { self?.wake() } }
        }
    }

    /// The wait is over: its timer is closed.
    func close() { timer.close() }

    private func wake() {
        timer.stop()
        sleeper?.resume()
        sleeper = nil
    }
}
