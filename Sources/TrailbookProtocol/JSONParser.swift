/// A strict JSON parser (RFC 8259) with a bound on every dimension of its input, for text from outside the
/// daemon (control requests).
///
/// Why not Foundation's `JSONDecoder`: it traps (SIGILL, taking the daemon down) on input nested deeper than its own
/// limit, silently keeps the first of two duplicate keys and accepts trailing commas. This parser reads the bytes
/// once, builds `JSONValue`s directly, and refuses before it allocates anything past a limit, so the memory one
/// request can cost is bounded by its length. Recursion depth is bounded by `Limits.maxDepth`.
///
/// Refused (as `JSONParser.Failure`): anything RFC 8259 does not allow (trailing commas, comments, single quotes,
/// leading zeros, a byte order mark, raw control characters in strings, text after the value), invalid UTF-8
/// (overlong forms, surrogates, bytes past U+10FFFF, truncated sequences), lone `\u` surrogate escapes,
/// U+0000 anywhere in a string (C APIs would cut a path there), numbers that do not fit a `Double`, duplicate keys
/// in one object (compared after unescaping, by Swift string equality), and input past a limit.
public struct JSONParser {
    /// The bounds a parse enforces.
    public struct Limits: Sendable {
        /// Arrays and objects nested inside each other, counting the outermost as 1.
        public var maxDepth = 64
        /// Bytes of one string after unescaping (UTF-8).
        public var maxStringBytes = 64 << 10
        /// Elements of one array or members of one object.
        public var maxMembers = 100_000
        /// Values in the whole document (every string, number, literal, array and object counts one).
        public var maxValues = 200_000
        /// Characters of one number literal.
        public var maxNumberBytes = 64

        /// The defaults: depth 64, strings of 64 KiB, 100 000 members per container, 200 000 values, numbers of
        /// 64 characters.
        public init() {}
    }

    /// Why a text was refused, and where.
    public struct Failure: Error, Equatable, Sendable {
        /// What kind of refusal.
        public enum Kind: Equatable, Sendable {
            /// Not JSON (RFC 8259), or not UTF-8.
            case syntax
            /// An object has the same key twice.
            case duplicateKey
            /// A dimension of the text is past its limit.
            case limit
        }

        /// What kind of refusal.
        public var kind: Kind
        /// What is wrong, in words ("trailing comma before ']'").
        public var reason: String
        /// Byte offset (0-based) in the text where the problem was found.
        public var offset: Int

        /// A sentence for an error reply: the reason and the byte offset.
        public var message: String { "\(reason) at byte \(offset)" }
    }

    /// Parses `bytes` as one JSON value.
    /// - Throws: `Failure` for text that is not strict JSON or exceeds `limits`.
    public static func parse(_ bytes: some Collection<UInt8>, limits: Limits = Limits()) throws(Failure) -> JSONValue {
        let array = Array(bytes)
        return try array.withUnsafeBufferPointer { (buffer) throws(Failure) -> JSONValue in
            var parser = JSONParser(bytes: buffer, limits: limits)
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            guard parser.position == buffer.count else {
                throw parser.failure(.syntax, "unexpected text after the JSON value")
            }
            return value
        }
    }

    /// The members of the JSON object in `bytes`, in the order written: each one's key and the range of `bytes`
    /// its value's text takes, every value checked as `parse` checks it (the same refusals, the same limits) but
    /// not built. For a reader that needs a few members and would copy the rest as text (a feed line relayed
    /// between daemons, `FeedRelay`); `parse(bytes[range])` decodes one value.
    /// - Throws: `Failure` for text that is not one strict JSON object or exceeds `limits`.
    public static func members(
        ofObject bytes: ArraySlice<UInt8>, limits: Limits = Limits()
    ) throws(Failure) -> [(key: String, value: Range<Int>)] {
        let base = bytes.startIndex
        return try bytes.withUnsafeBufferPointer { (buffer) throws(Failure) -> [(key: String, value: Range<Int>)] in
            var parser = JSONParser(bytes: buffer, limits: limits)
            parser.building = false
            parser.skipWhitespace()
            guard parser.current == UInt8(ascii: "{") else {
                throw parser.failure(.syntax, "expected an object, found \(parser.found)")
            }
            let members = try parser.objectMembers()
            parser.skipWhitespace()
            guard parser.position == buffer.count else {
                throw parser.failure(.syntax, "unexpected text after the JSON value")
            }
            return members.map { ($0.key, base + $0.value.lowerBound..<base + $0.value.upperBound) }
        }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private let limits: Limits
    private var position = 0
    private var values = 0
    /// Whether values are built (`parse`) or only checked (`members(ofObject:)`: strings, arrays and objects
    /// inside a member come back as `.null`, their text checked all the same).
    private var building = true

    private init(bytes: UnsafeBufferPointer<UInt8>, limits: Limits) {
        self.bytes = bytes
        self.limits = limits
    }

    private func failure(_ kind: Failure.Kind, _ reason: String, at offset: Int? = nil) -> Failure {
        Failure(kind: kind, reason: reason, offset: offset ?? position)
    }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { position += 1 }
    }

    /// What the byte at the cursor is, for messages ("'}'", "byte 0xFF", "the end of the request").
    private var found: String {
        guard let byte = current else { return "the end of the request" }
        return Self.describe(byte)
    }

    /// A byte for a message: printable ASCII quoted, anything else in hex (never raw, it may be a control byte).
    private static func describe(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x" + String(byte, radix: 16, uppercase: true)
    }

    private mutating func countValue() throws(Failure) {
        values += 1
        if values > limits.maxValues {
            throw failure(.limit, "more than \(limits.maxValues) values in the request")
        }
    }

    private mutating func parseValue(depth: Int) throws(Failure) -> JSONValue {
        try countValue()
        guard let byte = current else { throw failure(.syntax, "expected a value, found \(found)") }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""):
            let string = try parseString()
            return building ? .string(string) : .null
        case UInt8(ascii: "t"): return try parseLiteral("true", .bool(true))
        case UInt8(ascii: "f"): return try parseLiteral("false", .bool(false))
        case UInt8(ascii: "n"): return try parseLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw failure(.syntax, "expected a value, found \(found)")
        }
    }

    private mutating func parseLiteral(_ word: StaticString, _ value: JSONValue) throws(Failure) -> JSONValue {
        for expected in UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount) {
            guard current == expected else { throw failure(.syntax, "expected \(word), found \(found)") }
            position += 1
        }
        return value
    }

    private mutating func enter(_ depth: Int) throws(Failure) {
        if depth > limits.maxDepth {
            throw failure(.limit, "arrays and objects nested deeper than \(limits.maxDepth) levels")
        }
        position += 1  // the opening bracket
        skipWhitespace()
    }

    private mutating func parseArray(depth: Int) throws(Failure) -> JSONValue {
        try enter(depth)
        var elements: [JSONValue] = []
        var count = 0
        if current == UInt8(ascii: "]") {
            position += 1
            return .array(elements)
        }
        while true {
            if count == limits.maxMembers {
                throw failure(.limit, "an array has more than \(limits.maxMembers) elements")
            }
            let element = try parseValue(depth: depth)
            count += 1
            if building { elements.append(element) }
            if try closes(UInt8(ascii: "]"), "an array") { return building ? .array(elements) : .null }
        }
    }

    /// After a member: past a `,` (false: another member follows) or the container's closing bracket (true).
    private mutating func closes(_ bracket: UInt8, _ container: String) throws(Failure) -> Bool {
        let shown = Character(Unicode.Scalar(bracket))
        skipWhitespace()
        switch current {
        case UInt8(ascii: ","):
            position += 1
            skipWhitespace()
            if current == bracket { throw failure(.syntax, "trailing comma before '\(shown)'") }
            return false
        case bracket:
            position += 1
            return true
        default: throw failure(.syntax, "expected ',' or '\(shown)' in \(container), found \(found)")
        }
    }

    private mutating func parseObject(depth: Int) throws(Failure) -> JSONValue {
        if building {
            var members: [String: JSONValue] = [:]
            try forEachMember(depth: depth) { (key, value, _) in members.updateValue(value, forKey: key) == nil }
            return .object(members)
        }
        var keys = ObjectKeys()
        try forEachMember(depth: depth) { (key, _, _) in keys.insert(key) }
        return .null
    }

    /// The top-level object's members (`members(ofObject:)`): keys and value ranges, values checked, not built.
    private mutating func objectMembers() throws(Failure) -> [(key: String, value: Range<Int>)] {
        var members: [(key: String, value: Range<Int>)] = []
        var keys = ObjectKeys()
        try forEachMember(depth: 1) { (key, _, range) in
            members.append((key, range))
            return keys.insert(key)
        }
        return members
    }

    /// The keys of one object read without building it, to find a duplicate: compared one by one while the
    /// object is small, as most are (a feed line has about ten), hashed into a set past `linearLimit`. Hashing
    /// every key was a twentieth of a daemon's CPU when three daemons shared a store and each checked the
    /// others' feed lines (issue 40).
    private enum ObjectKeys {
        static let linearLimit = 16
        /// Up to `linearLimit` keys, compared one by one.
        case few([String])
        /// More, hashed.
        case many(Set<String>)

        init() { self = .few([]) }

        /// Adds `key`; false if the object had it already.
        mutating func insert(_ key: String) -> Bool {
            switch self {
            case .many(var keys):
                let inserted = keys.insert(key).inserted
                self = .many(keys)
                return inserted
            case .few(var keys):
                if keys.contains(key) { return false }
                keys.append(key)
                self = keys.count > Self.linearLimit ? .many(Set(keys)) : .few(keys)
                return true
            }
        }
    }

    /// Reads an object from its opening brace, handing each member to `take` (its key, its value, the range of
    /// the value's text); `take` answers false for a key the object already had.
    private mutating func forEachMember(
        depth: Int, _ take: (String, JSONValue, Range<Int>) -> Bool
    ) throws(Failure) {
        try enter(depth)
        if current == UInt8(ascii: "}") {
            position += 1
            return
        }
        var count = 0
        while true {
            guard current == UInt8(ascii: "\"") else {
                throw failure(.syntax, "expected a member name in double quotes, found \(found)")
            }
            if count == limits.maxMembers {
                throw failure(.limit, "an object has more than \(limits.maxMembers) members")
            }
            let keyStart = position
            try countValue()
            let wasBuilding = building
            building = true  // a key is always read
            let key = try parseString()
            building = wasBuilding
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw failure(.syntax, "expected ':' after a member name, found \(found)") }
            position += 1
            skipWhitespace()
            let valueStart = position
            let value = try parseValue(depth: depth)
            count += 1
            guard take(key, value, valueStart..<position) else {
                throw failure(.duplicateKey, "duplicate key \(Self.quoted(key)) in an object", at: keyStart)
            }
            if try closes(UInt8(ascii: "}"), "an object") { return }
        }
    }

    /// A key for a message: quoted, control characters escaped, cut at 64 characters.
    private static func quoted(_ key: String) -> String {
        let shown = key.unicodeScalars.prefix(64).map { $0.value < 0x20 || $0.value == 0x7F ? $0.escaped(asASCII: true) : String($0) }
        return "\"" + shown.joined() + (key.unicodeScalars.count > 64 ? "…" : "") + "\""
    }

    private mutating func parseNumber() throws(Failure) -> JSONValue {
        let start = position
        func digits(_ parser: inout JSONParser) -> Int {
            let first = parser.position
            while let byte = parser.current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { parser.position += 1 }
            return parser.position - first
        }
        if current == UInt8(ascii: "-") { position += 1 }
        if current == UInt8(ascii: "0") {
            position += 1
            if let byte = current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                throw failure(.syntax, "a number has a leading zero")
            }
        } else if digits(&self) == 0 {
            throw failure(.syntax, "expected a digit, found \(found)")
        }
        if current == UInt8(ascii: ".") {
            position += 1
            guard digits(&self) > 0 else { throw failure(.syntax, "expected a digit after '.', found \(found)") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard digits(&self) > 0 else { throw failure(.syntax, "expected a digit in an exponent, found \(found)") }
        }
        guard position - start <= limits.maxNumberBytes else {
            throw failure(.limit, "a number is longer than \(limits.maxNumberBytes) characters", at: start)
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        // Out of range both ways: past Double's largest, or a non-zero literal that rounds to 0 (1e-400), which
        // would silently become another number (and Foundation's decoder refuses it too).
        let nonZeroLiteral = text.utf8.prefix { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }
            .contains { $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "9") }
        guard let value = Double(text), value.isFinite, value != 0 || !nonZeroLiteral else {
            throw failure(.limit, "the number \(text) is out of range", at: start)
        }
        return .number(value)
    }

    /// Reads a string from its opening quote to its closing one; validates UTF-8 and unescapes. When not
    /// `building`, keeps nothing but the escapes' bytes and answers "" (the length limit counts the same).
    private mutating func parseString() throws(Failure) -> String {
        let start = position
        position += 1  // the opening quote
        var utf8: [UInt8] = []
        var uncopied = 0  // bytes of the string not copied into `utf8` (not `building`)
        while true {
            guard let byte = current else { throw failure(.syntax, "a string is not closed", at: start) }
            if utf8.count + uncopied > limits.maxStringBytes {
                throw failure(.limit, "a string is longer than \(limits.maxStringBytes) bytes", at: start)
            }
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                guard utf8.count + uncopied <= limits.maxStringBytes else {
                    throw failure(.limit, "a string is longer than \(limits.maxStringBytes) bytes", at: start)
                }
                return building ? String(decoding: utf8, as: UTF8.self) : ""  // already validated byte by byte
            case UInt8(ascii: "\\"):
                try parseEscape(into: &utf8)
            case 0x00:
                throw failure(.syntax, "a string contains U+0000")
            case 0x01..<0x20:
                throw failure(.syntax, "a raw control character (byte 0x\(String(byte, radix: 16, uppercase: true))) in a string; escape it")
            case 0x20..<0x80:
                if building { utf8.append(byte) } else { uncopied += 1 }
                position += 1
            default:
                let length = try copyMultibyte(into: &utf8)
                if !building { uncopied += length }
            }
        }
    }

    /// Copies one UTF-8 sequence of 2–4 bytes, refusing what Unicode 15 §3.9 (table 3-7) calls ill-formed.
    /// - Returns: the sequence's length; copied only when `building`.
    @discardableResult
    private mutating func copyMultibyte(into utf8: inout [UInt8]) throws(Failure) -> Int {
        let lead = bytes[position]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: (length, low) = (3, 0xA0)  // no overlong forms
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: (length, high) = (3, 0x9F)  // no UTF-16 surrogates
        case 0xF0: (length, low) = (4, 0x90)
        case 0xF1...0xF3: length = 4
        case 0xF4: (length, high) = (4, 0x8F)  // nothing past U+10FFFF
        default: throw failure(.syntax, "invalid UTF-8 (byte 0x\(String(lead, radix: 16, uppercase: true)))")
        }
        for index in 1..<length {
            guard position + index < bytes.count else { throw failure(.syntax, "invalid UTF-8 (a malformed sequence)") }
            let next = bytes[position + index]
            let range = index == 1 ? low...high : 0x80...0xBF
            guard range.contains(next) else { throw failure(.syntax, "invalid UTF-8 (a malformed sequence)") }
        }
        if building { utf8.append(contentsOf: bytes[position..<position + length]) }
        position += length
        return length
    }

    private mutating func parseEscape(into utf8: inout [UInt8]) throws(Failure) {
        let start = position
        position += 1  // the backslash
        guard let byte = current else { throw failure(.syntax, "a string is not closed") }
        position += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(byte)
        case UInt8(ascii: "b"): utf8.append(0x08)
        case UInt8(ascii: "f"): utf8.append(0x0C)
        case UInt8(ascii: "n"): utf8.append(0x0A)
        case UInt8(ascii: "r"): utf8.append(0x0D)
        case UInt8(ascii: "t"): utf8.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4()
            if (0xD800...0xDBFF).contains(scalar) {
                guard current == UInt8(ascii: "\\"), position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "u") else {
                    throw failure(.syntax, "a lone UTF-16 surrogate escape", at: start)
                }
                position += 2
                let low = try parseHex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw failure(.syntax, "a lone UTF-16 surrogate escape", at: start) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw failure(.syntax, "a lone UTF-16 surrogate escape", at: start)
            }
            guard scalar != 0 else { throw failure(.syntax, "a string contains U+0000", at: start) }
            utf8.append(contentsOf: String(Unicode.Scalar(scalar)!).utf8)
        default:
            throw failure(.syntax, "unknown escape (backslash, then \(Self.describe(byte))) in a string", at: start)
        }
    }

    private mutating func parseHex4() throws(Failure) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = current else { throw failure(.syntax, "a \\u escape needs 4 hex digits") }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure(.syntax, "a \\u escape needs 4 hex digits")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }
}
