import TrailbookLoop

/// The job store's health as this daemon's writes find it, and the timer that retries what it refused: one
/// fault episode runs from the first refused write until everything refused is written again, with one warning
/// in the daemon's log at each end. Retries back off from 50 ms, doubling up to 1 s.
@LoopActor
final class StoreHealth {
    /// Where the store is.
    enum State {
        /// No write refused since the last episode ended.
        case healthy
        /// It refused a write: `cause` in a few words, `since` on the monotonic clock (seconds).
        case refusing(cause: String, since: Double)
    }

    /// The wait before the first retry of an episode, in seconds.
    static let firstRetryDelay = 0.05
    /// The longest wait between two retries, in seconds.
    static let longestRetryDelay = 1.0

    /// Where the store is now.
    private(set) var state = State.healthy
    /// Whether a retry is due (its timer runs).
    private var retryArmed = false
    private var retryDelay = StoreHealth.firstRetryDelay
    private var timer: LoopTimer?

    /// A healthy store, no retry armed.
    init() {}

    /// Whether the store refuses writes now.
    var isRefusing: Bool {
        if case .refusing = state { return true }
        return false
    }

    /// Notes that the store refused `what` for `refusal`: the first refusal of an episode is logged; then the
    /// retry is armed, unless one is already due or `retrying` is false (shutdown began), to run `retry`.
    func refused(
        _ refusal: StoreRefusal, writing what: String, retrying: Bool, retry: @escaping @LoopActor () -> Void
    ) {
        if case .healthy = state {
            state = .refusing(cause: refusal.cause, since: Timestamp.monotonic())
            DaemonLog.write(
                "warning: the job store refused a write (\(what)): \(refusal.cause) (\(refusal)); it is retried every "
                    + "\(Scheduler.seconds(Self.longestRetryDelay)) at most, and reads show the daemon's own state meanwhile")
        }
        guard !retryArmed, retrying else { return }
        retryArmed = true
        let timer = self.timer ?? LoopTimer(loop: .main)
        self.timer = timer
        timer.start(seconds: retryDelay) { retry() }
        retryDelay = min(retryDelay * 2, Self.longestRetryDelay)
    }

    /// The retry's timer fired: a later refusal arms it again.
    func retryFired() {
        retryArmed = false
    }

    /// Ends the episode (everything refused is written): logged with its length and cause; the backoff starts
    /// over. Nothing happens when the store is healthy.
    func recovered() {
        guard case .refusing(let cause, let since) = state else { return }
        state = .healthy
        retryDelay = Self.firstRetryDelay
        let seconds = ((Timestamp.monotonic() - since) * 10).rounded() / 10
        DaemonLog.write("the job store takes writes again (it refused them for \(seconds) s: \(cause))")
    }

    /// Stops the retry timer for good (shutdown).
    func close() {
        timer?.close()
        timer = nil
    }
}
