import TrailbookProtocol

/// One `--include` / `--exclude` pattern of a folder upload, matched against a file's path relative to the folder
/// given (`day1/IMG_0001.JPG`), with rclone's filter syntax (https://rclone.org/filtering/):
///
/// - `*` matches any run of characters but `/`; `**` any run including `/`; `?` one character but `/`;
///   `[abc]`, `[a-z]`, `[!a-z]` (or `[^a-z]`) one character of (or not of) a class; `{jpg,jpeg}` one of the
///   alternatives; `\` makes the next character plain.
/// - A pattern that starts with `/` is anchored at the folder: `/day1/*.jpg` matches `day1/a.jpg` only. Any other
///   pattern matches the end of the path at a `/` boundary: `*.jpg` matches `a.jpg` and `day1/a.jpg`;
///   `phone/*.jpg` matches `phone/a.jpg` and `2026/phone/a.jpg`.
/// - A pattern that ends with `/` matches directories: every file under a matching directory matches
///   (`--exclude '.thumbnails/'` leaves out every file in every `.thumbnails` folder).
///
/// Matching is by Unicode scalar and case-sensitive; a byte of a name that is not UTF-8 is one character of its own.
public struct UploadGlob: Sendable, Equatable {
    /// The pattern as given.
    public let pattern: String
    /// Alternatives after `{…}` expansion, each a list of tokens.
    private let alternatives: [[Token]]
    /// Whether the pattern starts with `/`.
    private let anchored: Bool
    /// Whether the pattern ends with `/` (matches a directory and so everything below it).
    private let directoryOnly: Bool

    private enum Token: Sendable, Equatable {
        case scalar(UInt32)
        case anyOne
        case star
        case doubleStar
        case set(ranges: [ClosedRange<UInt32>], negated: Bool)
    }

    /// Compiles `pattern`.
    /// - Throws: `JobError` `invalid_params` for an empty pattern, an unclosed `[` or `{`, a `}` without `{`, or a
    ///   trailing `\`.
    public init(_ pattern: String) throws(JobError) {
        func bad(_ why: String) -> JobError {
            JobError(
                code: "invalid_params",
                message: "pattern '\(pattern)' \(why); see --include/--exclude: *, **, ?, [a-z], {a,b}, \\ to escape")
        }
        self.pattern = pattern
        var body = Substring(pattern)
        anchored = body.hasPrefix("/")
        if anchored { body = body.dropFirst() }
        directoryOnly = body.hasSuffix("/") && !body.hasSuffix("\\/")
        if directoryOnly { body = body.dropLast() }
        guard !body.isEmpty else { throw bad("is empty") }
        var expanded: [String] = []
        guard Self.expandBraces(String(body), into: &expanded) else { throw bad("has an unbalanced '{' or '}'") }
        var alternatives: [[Token]] = []
        for text in expanded {
            guard let tokens = Self.tokens(of: text) else { throw bad("has an unclosed '[' or a trailing '\\'") }
            alternatives.append(tokens)
        }
        self.alternatives = alternatives
    }

    /// Whether the file at `relativePath` (no leading `/`, components separated by `/`) matches.
    public func matches(_ relativePath: BytePath) -> Bool {
        let units = Self.units(of: relativePath.bytes)
        let slash = UInt32(UInt8(ascii: "/"))
        // The places a match may start: the path's start, and after each `/` unless anchored.
        var starts = [0]
        if !anchored { starts += units.indices.filter { units[$0] == slash }.map { $0 + 1 } }
        // The places a match may end: the path's end or, for a directory pattern, before each `/` (a directory
        // holding the file).
        var ends: [Int] = []
        if directoryOnly {
            ends = units.indices.filter { units[$0] == slash }
        } else {
            ends = [units.count]
        }
        for start in starts {
            for end in ends where end >= start {
                let part = units[start..<end]
                if alternatives.contains(where: { Self.match($0, Array(part)) }) { return true }
            }
        }
        return false
    }

    /// Path bytes as characters: each valid UTF-8 sequence is its scalar; an invalid byte is `0x11_0000 + byte`
    /// (beyond Unicode, so it equals no pattern character).
    static func units(of bytes: [UInt8]) -> [UInt32] {
        var units: [UInt32] = []
        units.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let length = BytePath.validSequenceLength(bytes, at: index)
            if length <= 1 {
                units.append(length == 1 ? UInt32(bytes[index]) : 0x11_0000 + UInt32(bytes[index]))
                index += 1
                continue
            }
            let scalar = String(decoding: bytes[index..<(index + length)], as: UTF8.self).unicodeScalars.first!
            units.append(scalar.value)
            index += length
        }
        return units
    }

    /// Expands `{a,b}` groups (nesting allowed) into every alternative; false when braces do not balance.
    private static func expandBraces(_ text: String, into out: inout [String]) -> Bool {
        let scalars = Array(text.unicodeScalars)
        var depth = 0
        var open: Int?
        var commas: [Int] = []
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "\\" {
                index += 2
                continue
            }
            if scalar == "[" {
                // A class is plain text to the brace expander.
                var end = index + 1
                if end < scalars.count, scalars[end] == "!" || scalars[end] == "^" { end += 1 }
                if end < scalars.count, scalars[end] == "]" { end += 1 }
                while end < scalars.count, scalars[end] != "]" { end += 1 }
                index = end + 1
                continue
            }
            if scalar == "{" {
                if depth == 0 { open = index }
                depth += 1
            } else if scalar == "}" {
                depth -= 1
                if depth < 0 { return false }
                if depth == 0, let start = open {
                    let head = String(String.UnicodeScalarView(scalars[..<start]))
                    let tail = String(String.UnicodeScalarView(scalars[(index + 1)...]))
                    var bounds = [start] + commas + [index]
                    bounds.sort()
                    for (from, to) in zip(bounds, bounds.dropFirst()) {
                        let choice = String(String.UnicodeScalarView(scalars[(from + 1)..<to]))
                        guard expandBraces(head + choice + tail, into: &out) else { return false }
                    }
                    return true
                }
            } else if scalar == ",", depth == 1 {
                commas.append(index)
            }
            index += 1
        }
        guard depth == 0 else { return false }
        out.append(text)
        return true
    }

    private static func tokens(of text: String) -> [Token]? {
        let scalars = Array(text.unicodeScalars)
        var tokens: [Token] = []
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            switch scalar {
            case "\\":
                guard index + 1 < scalars.count else { return nil }
                tokens.append(.scalar(scalars[index + 1].value))
                index += 2
            case "*":
                if index + 1 < scalars.count, scalars[index + 1] == "*" {
                    tokens.append(.doubleStar)
                    index += 2
                    while index < scalars.count, scalars[index] == "*" { index += 1 }
                } else {
                    tokens.append(.star)
                    index += 1
                }
            case "?":
                tokens.append(.anyOne)
                index += 1
            case "[":
                var end = index + 1
                var negated = false
                if end < scalars.count, scalars[end] == "!" || scalars[end] == "^" {
                    negated = true
                    end += 1
                }
                var ranges: [ClosedRange<UInt32>] = []
                var first = true
                while end < scalars.count, scalars[end] != "]" || first {
                    first = false
                    var low = scalars[end].value
                    if scalars[end] == "\\", end + 1 < scalars.count {
                        end += 1
                        low = scalars[end].value
                    }
                    if end + 2 < scalars.count, scalars[end + 1] == "-", scalars[end + 2] != "]" {
                        let high = scalars[end + 2].value
                        ranges.append(min(low, high)...max(low, high))
                        end += 3
                    } else {
                        ranges.append(low...low)
                        end += 1
                    }
                }
                guard end < scalars.count else { return nil }
                tokens.append(.set(ranges: ranges, negated: negated))
                index = end + 1
            default:
                tokens.append(.scalar(scalar.value))
                index += 1
            }
        }
        return tokens
    }

    /// Whether `tokens` match all of `text` (dynamic programming over token and character positions).
    private static func match(_ tokens: [Token], _ text: [UInt32]) -> Bool {
        let slash = UInt32(UInt8(ascii: "/"))
        // reachable[j]: the tokens so far can match text[..<j].
        var reachable = [Bool](repeating: false, count: text.count + 1)
        reachable[0] = true
        for token in tokens {
            var next = [Bool](repeating: false, count: text.count + 1)
            switch token {
            case .star, .doubleStar:
                var carried = false
                for j in 0...text.count {
                    if reachable[j] { carried = true }
                    next[j] = carried
                    if j < text.count, token == .star, text[j] == slash { carried = false }
                }
            case .anyOne:
                for j in 0..<text.count where reachable[j] && text[j] != slash { next[j + 1] = true }
            case .scalar(let value):
                for j in 0..<text.count where reachable[j] && text[j] == value { next[j + 1] = true }
            case .set(let ranges, let negated):
                for j in 0..<text.count where reachable[j] && text[j] != slash {
                    if ranges.contains(where: { $0.contains(text[j]) }) != negated { next[j + 1] = true }
                }
            }
            reachable = next
        }
        return reachable[text.count]
    }
}
