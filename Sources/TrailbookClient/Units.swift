// Sizes and durations as people type them on the command line (docs/reference/configuration.md, "Units": sizes are
// plain bytes or IEC suffixes …; durations take 500ms, 30s, 5m, 1h).

/// Byte counts on the command line: parsing sizes such as `8MiB` and formatting them for people.
///
/// Accepted units, case-insensitive, optionally separated from the number by spaces:
///
/// | unit | bytes |
/// |---|---|
/// | none, `B` | 1 |
/// | `KiB`, `MiB`, `GiB`, `TiB` | 1024ⁿ (IEC, as docs/reference/configuration.md says) |
/// | `K`, `M`, `G`, `T` | 1024ⁿ as well (shorthand for the IEC units, like `dd` and `sort -S`) |
/// | `KB`, `MB`, `GB`, `TB` | 1000ⁿ (SI decimal, like `dd`), for sizes copied from a spec sheet |
///
/// A unit larger than bytes allows a fraction of up to 6 decimal places (`1.5KiB` is 1536 bytes); the result is
/// rounded down to a whole byte. Rates such as `--max-rate 20MiB` are bytes per second in the same form.
public enum ByteCount {
    /// The number of decimal places `parse` accepts after the point.
    static let maximumFractionDigits = 6

    /// Units by lowercased spelling, in bytes.
    private static let multipliers: [String: Int64] = [
        "": 1, "b": 1,
        "k": 1 << 10, "kib": 1 << 10, "kb": 1_000,
        "m": 1 << 20, "mib": 1 << 20, "mb": 1_000_000,
        "g": 1 << 30, "gib": 1 << 30, "gb": 1_000_000_000,
        "t": 1 << 40, "tib": 1 << 40, "tb": 1_000_000_000_000,
    ]

    private static let hint =
        "use bytes or a number with a unit: KiB, MiB, GiB, TiB (1024-based), KB, MB, GB, TB (1000-based)"

    /// Parses a size such as `1048576`, `512KiB`, `8MiB`, `1.5GiB` or `20MB`.
    ///
    /// - Parameter text: the size as typed; surrounding spaces are ignored.
    /// - Returns: the size in bytes, zero or more.
    /// - Throws: `UsageError` if `text` is empty, negative, not a number with a known unit, has a fraction of
    ///   plain bytes or more than 6 decimal places, or is larger than `Int64.max` bytes.
    public static func parse(_ text: String) throws(UsageError) -> Int64 {
        let trimmed = text.trimmedOfSpaces
        guard !trimmed.isEmpty else { throw UsageError("empty size; \(hint)") }
        if trimmed.hasPrefix("-") { throw UsageError("size must not be negative, got '\(text)'") }

        let number = trimmed.prefix { $0.isASCIIDigit || $0 == "." }
        let unit = trimmed[number.endIndex...].trimmedOfSpaces.lowercased()
        guard let multiplier = multipliers[unit] else {
            throw UsageError("'\(text)' is not a size; \(hint)")
        }
        guard let decimal = DecimalText(number) else {
            throw UsageError("'\(text)' is not a size; \(hint)")
        }
        if !decimal.fraction.isEmpty && multiplier == 1 {
            throw UsageError("'\(text)' is not a whole number of bytes")
        }
        if decimal.fraction.count > maximumFractionDigits {
            throw UsageError("'\(text)' has more than \(maximumFractionDigits) decimal places")
        }

        let tooLarge = UsageError("size '\(text)' is too large (the limit is \(Int64.max) bytes, about 8 EiB)")
        var whole: Int64 = 0
        for digit in decimal.whole {
            let (shifted, overflowA) = whole.multipliedReportingOverflow(by: 10)
            let (next, overflowB) = shifted.addingReportingOverflow(digit.asciiDigitValue)
            if overflowA || overflowB { throw tooLarge }
            whole = next
        }
        // The fraction is below 10^6 and the largest multiplier is 2^40, so this product stays below 2^60.
        var fraction: Int64 = 0
        var scale: Int64 = 1
        for digit in decimal.fraction {
            fraction = fraction * 10 + digit.asciiDigitValue
            scale *= 10
        }
        let (wholeBytes, overflowA) = whole.multipliedReportingOverflow(by: multiplier)
        let (bytes, overflowB) = wholeBytes.addingReportingOverflow(fraction * multiplier / scale)
        if overflowA || overflowB { throw tooLarge }
        return bytes
    }

    /// Formats a byte count for people, with IEC units and one decimal place above 1 KiB.
    ///
    /// `512` → `"512 B"`, `1536` → `"1.5 KiB"`, `8388608` → `"8.0 MiB"`. Negative counts get a leading `-`.
    /// - Parameter bytes: the count, in bytes.
    /// - Returns: the count with the largest unit (up to EiB) that keeps the number at 1 or more.
    public static func format(_ bytes: Int64) -> String {
        let sign = bytes < 0 ? "-" : ""
        let magnitude = bytes.magnitude
        if magnitude < 1024 { return "\(sign)\(magnitude) B" }
        let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
        var unitIndex = 0
        var value = Double(magnitude) / 1024
        // Move up while the value would print as 1024.0 or more.
        while (value * 10).rounded() >= 10240 && unitIndex < units.count - 1 {
            value /= 1024
            unitIndex += 1
        }
        let tenths = UInt64((value * 10).rounded())
        return "\(sign)\(tenths / 10).\(tenths % 10) \(units[unitIndex])"
    }
}

/// Parses a duration such as `500ms`, `30s`, `5m`, `1h`, `1.5s` or `1h30m`; a plain number is seconds.
///
/// Units: `ms` (milliseconds), `s` (seconds), `m` (minutes), `h` (hours), `d` (days of 24 h). Several number-unit pairs add up
/// (`1h30m` is 5400 seconds). Zero is accepted; whether it makes sense is up to the option.
/// - Parameter text: the duration as typed; surrounding spaces are ignored.
/// - Returns: the duration in seconds, zero or more.
/// - Throws: `UsageError` if `text` is empty, negative, has an unknown unit or no number, or is not finite.
public func parseDuration(_ text: String) throws(UsageError) -> Double {
    let hint = "use a number with a unit: ms, s, m, h, d (e.g. 500ms, 30s, 5m, 1h, 7d)"
    let trimmed = text.trimmedOfSpaces
    guard !trimmed.isEmpty else { throw UsageError("empty duration; \(hint)") }
    if trimmed.hasPrefix("-") { throw UsageError("duration must not be negative, got '\(text)'") }
    let seconds: [String: Double] = ["ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86_400]

    var rest = Substring(trimmed)
    var total = 0.0
    var pairs = 0
    while !rest.isEmpty {
        let number = rest.prefix { $0.isASCIIDigit || $0 == "." }
        let unit = rest[number.endIndex...].prefix { $0.isLetter }
        rest = rest[unit.endIndex...]
        guard let decimal = DecimalText(number), let value = Double(decimal.text) else {
            throw UsageError("'\(text)' is not a duration; \(hint)")
        }
        pairs += 1
        if unit.isEmpty {
            // A unit-less number is seconds, but only on its own: "1h30" is ambiguous.
            guard pairs == 1 && rest.isEmpty else { throw UsageError("'\(text)' is not a duration; \(hint)") }
            total = value
        } else {
            guard let scale = seconds[unit.lowercased()] else {
                throw UsageError("'\(text)' is not a duration; unknown unit '\(unit)'; \(hint)")
            }
            total += value * scale
        }
    }
    guard total.isFinite else { throw UsageError("duration '\(text)' is too large") }
    return total
}

/// A non-negative decimal number split at its point: `"1.50"` → whole `"1"`, fraction `"50"`.
private struct DecimalText {
    var whole: Substring
    var fraction: Substring
    var text: String { fraction.isEmpty ? String(whole) : "\(whole.isEmpty ? "0" : whole).\(fraction)" }

    /// Fails unless `text` is ASCII digits with at most one point and at least one digit.
    init?(_ text: Substring) {
        let parts = text.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count <= 2, parts.allSatisfy({ $0.allSatisfy(\.isASCIIDigit) }) else { return nil }
        whole = parts[0]
        fraction = parts.count == 2 ? parts[1] : ""
        if whole.isEmpty && fraction.isEmpty { return nil }
    }
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
    /// The value of an ASCII digit; only meaningful when `isASCIIDigit`.
    var asciiDigitValue: Int64 { Int64(asciiValue! - 48) }
}

extension StringProtocol {
    /// The text without leading and trailing spaces, tabs and newlines.
    var trimmedOfSpaces: Substring {
        let text = Substring(self)
        guard let first = text.firstIndex(where: { !$0.isWhitespace }) else { return "" }
        let last = text.lastIndex(where: { !$0.isWhitespace })!
        return text[first...last]
    }
}
