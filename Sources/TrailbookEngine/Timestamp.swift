#if canImport(Glibc)
    import Glibc
#endif

/// Wall-clock time for records and events: Unix seconds and ISO 8601 UTC text.
public enum Timestamp {
    /// Seconds since the Unix epoch, with sub-second precision (`CLOCK_REALTIME`).
    public static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Seconds on a monotonic clock (`CLOCK_MONOTONIC`), for durations; unaffected by clock changes.
    public static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// `unixSeconds` as ISO 8601 in UTC with whole seconds, e.g. `2026-11-29T13:57:00Z` (RFC 3339 §5.6).
    public static func iso8601(unixSeconds: Double) -> String {
        var seconds = time_t(unixSeconds.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))Z"
    }

    /// The current time as ISO 8601 UTC.
    public static func nowISO8601() -> String { iso8601(unixSeconds: now()) }
}
