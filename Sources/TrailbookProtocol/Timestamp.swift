import Synchronization

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
    ///
    /// Written digit by digit into the string's own storage: it is called for every job record read and every
    /// feed event and log line, and the string interpolation it used was about a tenth of the daemon's
    /// instructions in bench/jobs.py (callgrind).
    public static func iso8601(unixSeconds: Double) -> String {
        let second = unixSeconds.rounded(.down)
        // Most calls ask for the second before (every event and log line of a busy second): the last text is
        // kept, so that costs a comparison instead of `gmtime_r` and a new string.
        if let hit = lastISO8601.withLock({ $0.second == second ? $0.text : nil }) { return hit }
        let text = formatISO8601(second)
        lastISO8601.withLock { $0 = (second, text) }
        return text
    }

    /// The last second `iso8601(unixSeconds:)` formatted and its text (shared by every thread that asks).
    private static let lastISO8601 = Mutex<(second: Double, text: String)>((.nan, ""))

    private static func formatISO8601(_ second: Double) -> String {
        var seconds = time_t(second)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let year = Int(parts.tm_year) + 1900
        // Years outside 0...9999 do not fit four digits; they never occur in practice but must not be wrong.
        guard (0...9999).contains(year) else {
            func pad(_ value: Int, _ width: Int) -> String {
                let text = String(value)
                return String(repeating: "0", count: max(0, width - text.count)) + text
            }
            return "\(pad(year, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))T"
                + "\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2))Z"
        }
        let fields = [
            (year, 4, UInt8(ascii: "-")), (Int(parts.tm_mon) + 1, 2, UInt8(ascii: "-")), (Int(parts.tm_mday), 2, UInt8(ascii: "T")),
            (Int(parts.tm_hour), 2, UInt8(ascii: ":")), (Int(parts.tm_min), 2, UInt8(ascii: ":")), (Int(parts.tm_sec), 2, UInt8(ascii: "Z")),
        ]
        return String(unsafeUninitializedCapacity: 20) { buffer in
            var at = 0
            for (value, width, separator) in fields {
                var rest = value
                for place in stride(from: width - 1, through: 0, by: -1) {
                    buffer[at + place] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                buffer[at + width] = separator
                at += width + 1
            }
            return at
        }
    }

    /// The current time as ISO 8601 UTC.
    public static func nowISO8601() -> String { iso8601(unixSeconds: now()) }
}
