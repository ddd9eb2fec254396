/// Paces writes to at most `bytesPerSecond` on average: before each piece, how long to wait.
///
/// A token bucket that holds one piece: a piece may go as soon as the bytes before it have had their time, and
/// time spent falling behind (a slow disk) is not saved up for a burst later.
public struct RatePacer: Sendable {
    /// The limit, in bytes per second.
    public let bytesPerSecond: Double
    private var start: Double?
    private var sent: Int64 = 0

    /// A pacer for `bytesPerSecond` (> 0).
    public init(bytesPerSecond: Int64) {
        precondition(bytesPerSecond > 0)
        self.bytesPerSecond = Double(bytesPerSecond)
    }

    /// Seconds to wait, from `now` (seconds on a monotonic clock), before sending `count` more bytes; counts
    /// them as sent.
    public mutating func delay(before count: Int, now: Double) -> Double {
        guard let start else {
            self.start = now
            sent = Int64(count)
            return 0
        }
        let due = start + Double(sent) / bytesPerSecond
        if due <= now {
            self.start = now
            sent = Int64(count)
            return 0
        }
        sent += Int64(count)
        return due - now
    }

    /// Bytes per read/write piece: at most 1 MiB, and a tenth of a second's worth when rate-limited (at least
    /// 16 KiB), so progress moves smoothly and a stop is noticed fast.
    public static func pieceSize(maxRate: Int64?) -> Int {
        let limit = 1 << 20
        guard let maxRate else { return limit }
        return Int(min(Int64(limit), max(16 << 10, maxRate / 10)))
    }
}
