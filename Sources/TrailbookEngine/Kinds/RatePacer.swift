/// Paces work to at most `unitsPerSecond` on average (bytes for an upload, photos for a tag job): before each
/// piece of work, how long to wait.
///
/// A token bucket that holds one piece: a piece may go as soon as the units before it have had their time, and
/// time spent falling behind (a slow disk, a busy loop) is not saved up for a burst later.
public struct RatePacer: Sendable {
    /// The limit, in units per second.
    public let unitsPerSecond: Double
    private var start: Double?
    private var sent: Int64 = 0

    /// A pacer for `unitsPerSecond` (> 0).
    public init(unitsPerSecond: Int64) {
        precondition(unitsPerSecond > 0)
        self.unitsPerSecond = Double(unitsPerSecond)
    }

    /// Seconds to wait, from `now` (seconds on a monotonic clock, e.g. `Timestamp.monotonic()`), before doing
    /// `count` more units; counts them as done.
    public mutating func delay(before count: Int, now: Double) -> Double {
        guard let start else {
            self.start = now
            sent = Int64(count)
            return 0
        }
        let due = start + Double(sent) / unitsPerSecond
        if due <= now {
            self.start = now
            sent = Int64(count)
            return 0
        }
        sent += Int64(count)
        return due - now
    }
}
