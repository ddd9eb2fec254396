import TrailbookEngine

extension RatePacer {
    /// Bytes per read/write piece: at most 1 MiB, and a tenth of a second's worth when rate-limited (at least
    /// 16 KiB), so progress moves smoothly and a stop is noticed fast.
    public static func pieceSize(maxRate: Int64?) -> Int {
        let limit = 1 << 20
        guard let maxRate else { return limit }
        return Int(min(Int64(limit), max(16 << 10, maxRate / 10)))
    }
}
