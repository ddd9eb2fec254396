#if canImport(Glibc)
    import Glibc
#endif

/// Parses the IMF-fixdate form of HTTP dates (RFC 9110 §5.6.7), `Sun, 06 Nov 1994 08:49:37 GMT`.
public enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since the Unix epoch, or `nil` if `text` is not an IMF-fixdate.
    public static func parse(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int64(parts[1]),
            let month = months.firstIndex(of: String(parts[2])), let year = Int64(parts[3])
        else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int64($0) }
        guard clock.count == 3 else { return nil }
        // Days from civil (Howard Hinnant's algorithm).
        let m = Int64(month + 1)
        let y = m <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return days * 86_400 + clock[0] * 3_600 + clock[1] * 60 + clock[2]
    }
}

/// `Retry-After` (RFC 9110 §10.2.3), which a server sends with `429 Too Many Requests` and `503 Service
/// Unavailable` to say how long to wait.
extension HTTPResponse {
    /// The wait `Retry-After` asks for, in seconds from `now`: its delay-seconds, or its HTTP-date minus `now`
    /// (0 for a date already past); `nil` when absent or malformed.
    /// - Parameter now: the current time in seconds since the Unix epoch (for the HTTP-date form).
    public func retryAfterSeconds(now: Double) -> Double? {
        guard let value = headers["Retry-After"]?.split(separator: " ", omittingEmptySubsequences: true)
            .joined(separator: " "), !value.isEmpty
        else { return nil }
        if value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            return value.count > 9 ? 1e9 : Double(value)
        }
        guard let at = HTTPDate.parse(value) else { return nil }
        return max(0, Double(at) - now)
    }
}

/// Clocks the HTTP layer reads.
public enum HTTPClock {
    /// Seconds on a clock that never jumps (`CLOCK_MONOTONIC`), for holds.
    public static func monotonic() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Seconds since the Unix epoch (`CLOCK_REALTIME`), for HTTP-dates.
    public static func unix() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
