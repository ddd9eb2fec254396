#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A JSON value: what the control protocol, the feed and a job's params, result and checkpoint are made of.
///
/// Unlike a `Codable` struct with optionals, `.null` is written out as `null`, so the shapes of docs/reference/json.md keep
/// every key (`"cancellation": null`).
public enum JSONValue: Sendable, Equatable, Codable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value):
            // Whole numbers print without a fraction (byte counts, sequence numbers).
            if value.rounded() == value, abs(value) < 9.0e15 {
                try container.encode(Int64(value))
            } else {
                try container.encode(value)
            }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The member `key` of an object, or `nil`.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The string, if this is one.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number, if this is one.
    public var doubleValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The number as an integer, if this is a whole number.
    public var intValue: Int64? {
        if case .number(let value) = self, value.rounded() == value, abs(value) < 9.2e18 { return Int64(value) }
        return nil
    }

    /// The Boolean, if this is one.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// Whether this is `null`.
    public var isNull: Bool { self == .null }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue {
    /// `value` as a JSON number, or `null` when `nil`.
    public static func number<N: BinaryInteger>(_ value: N?) -> JSONValue {
        value.map { .number(Double($0)) } ?? .null
    }

    /// `value` as a JSON string, or `null` when `nil`.
    public static func string(_ value: String?) -> JSONValue {
        value.map { .string($0) } ?? .null
    }
}

/// Encoding and decoding between JSON text and values, with the project's settings: sorted keys (stable output
/// for tests and diffs) and unescaped slashes (paths and URLs stay readable).
public enum JSONCoding {
    /// One line of compact JSON of the object with `members` (distinct keys, in any order), without a trailing
    /// newline: the bytes `encode(JSONValue.object(…))` gives, without hashing the keys into a dictionary; `null`
    /// if a number is not finite.
    public static func encode(members: [(key: String, value: JSONValue)]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        return JSONValue.write(members: members, into: &out) ? out : Array("null".utf8)
    }

    /// One line of compact JSON, without a trailing newline.
    public static func encode<T: Encodable>(_ value: T) -> [UInt8] {
        if let json = value as? JSONValue {
            var out: [UInt8] = []
            out.reserveCapacity(256)
            return json.write(into: &out) ? out : Array("null".utf8)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding our own Codable values cannot fail (no floats that are NaN or infinite are produced).
        return Array((try? encoder.encode(value)) ?? Data("null".utf8))
    }

    /// Human-readable JSON, indented, for `show --json` on a terminal.
    public static func encodePretty<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
        return String(decoding: (try? encoder.encode(value)) ?? Data("null".utf8), as: UTF8.self)
    }

    /// Decodes `T` from JSON `bytes`.
    /// - Throws: `DecodingError` with the path of the bad member.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        // A `JSONValue` (what the store and the feed read back) through our own parser, much cheaper than
        // Foundation's; anything it refuses goes the general way, which says why.
        if type == JSONValue.self, let value = try? JSONParser.parse(bytes, limits: storedLimits) as? T { return value }
        return try JSONDecoder().decode(type, from: Data(bytes))
    }

    /// The parser's bounds for text the daemon wrote itself (stored params, checkpoints, results): wide, as that
    /// text is trusted.
    private static let storedLimits: JSONParser.Limits = {
        var limits = JSONParser.Limits()
        limits.maxDepth = 512
        limits.maxStringBytes = Int.max
        limits.maxMembers = Int.max
        limits.maxValues = Int.max
        limits.maxNumberBytes = 1_024
        return limits
    }()

    /// Converts a `Codable` value to a `JSONValue` (through its JSON text).
    public static func value<T: Encodable>(of value: T) -> JSONValue {
        (try? decode(JSONValue.self, from: encode(value))) ?? .null
    }

    /// Converts a `JSONValue` to a `Decodable` type.
    /// - Throws: `DecodingError` when the value does not have the type's shape.
    public static func convert<T: Decodable>(_ value: JSONValue, to type: T.Type) throws -> T {
        // Straight from the value when it can be sure of the result; else as text through Foundation's decoder,
        // whose error names the bad member.
        if let fast = try? JSONValueDecoder.decode(type, from: value) { return fast }
        return try decode(type, from: encode(value))
    }

    /// A readable one-line account of a `DecodingError` ("params.files: expected an array").
    public static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func path(_ codingPath: [any CodingKey]) -> String {
            let text = codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return text.isEmpty ? "the value" : text
        }
        switch error {
        case .typeMismatch(let type, let context): return "\(path(context.codingPath)): expected \(type)"
        case .valueNotFound(let type, let context): return "\(path(context.codingPath)): missing \(type)"
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])): required but missing"
        case .dataCorrupted(let context):
            // The decoder reports a number that does not fit its field (1.5 or 1e300 for an integer) as "not valid
            // JSON" with no path; the text was valid JSON, so say what is likely instead.
            if context.codingPath.isEmpty, context.debugDescription.contains("not valid JSON") {
                return "a number is not a whole number or is out of range for its field"
            }
            return "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}

// MARK: - Writing

extension JSONValue {
    /// Appends this value's compact JSON to `out`: byte for byte what `JSONCoding.encode` gave through Foundation's
    /// `JSONEncoder` (keys sorted, `/` unescaped, whole numbers under 9e15 without a fraction, other numbers as
    /// Swift prints them less a trailing `.0`), at a fraction of its cost: the daemon writes one or more of these
    /// per job and per event (issue 14: encoding was a third of the daemon's time per no-op job).
    /// - Returns: `false`, with `out` partly written, for a number that is not finite (no JSON for it).
    func write(into out: inout [UInt8]) -> Bool {
        switch self {
        case .null: out.append(contentsOf: Self.nullBytes)
        case .bool(let value): out.append(contentsOf: value ? Self.trueBytes : Self.falseBytes)
        case .number(let value):
            guard value.isFinite else { return false }
            if value.rounded() == value, abs(value) < 9.0e15 {
                out.append(contentsOf: String(Int64(value)).utf8)
            } else {
                var text = value.description
                if text.hasSuffix(".0") { text.removeLast(2) }
                out.append(contentsOf: text.utf8)
            }
        case .string(let value): Self.write(string: value, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                guard item.write(into: &out) else { return false }
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            // The members sorted as pairs: sorting the keys and looking each up again hashed every key twice.
            return Self.write(sortedMembers: members.sorted(by: { $0.key < $1.key }), into: &out)
        }
        return true
    }

    /// Appends the compact JSON of the object whose members are `members` (distinct keys, in any order): the same
    /// bytes as `JSONValue.object` of them, without building the dictionary. The daemon's hottest objects (a
    /// job's progress in every stored row, every feed event) are written this way: hashing their keys into a
    /// dictionary only to sort them out again was a tenth of its instructions per no-op job (issue 14, callgrind).
    /// - Returns: `false`, with `out` partly written, for a number that is not finite.
    static func write(members: [(key: String, value: JSONValue)], into out: inout [UInt8]) -> Bool {
        var sorted = members
        // Insertion sort: these lists are short (under 20) and often nearly in order already.
        for index in sorted.indices.dropFirst() {
            var at = index
            while at > 0, sorted[at].key < sorted[at - 1].key {
                sorted.swapAt(at, at - 1)
                at -= 1
            }
        }
        return write(sortedMembers: sorted, into: &out)
    }

    static func write(sortedMembers members: [(key: String, value: JSONValue)], into out: inout [UInt8]) -> Bool {
        out.append(UInt8(ascii: "{"))
        for (index, member) in members.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            write(string: member.key, into: &out)
            out.append(UInt8(ascii: ":"))
            guard member.value.write(into: &out) else { return false }
        }
        out.append(UInt8(ascii: "}"))
        return true
    }

    private static let nullBytes = Array("null".utf8)
    private static let trueBytes = Array("true".utf8)
    private static let falseBytes = Array("false".utf8)
    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// A JSON string: `"` and `\` escaped, control characters as `\b \f \n \r \t` or `\u00xx`, the rest as UTF-8.
    ///
    /// The runs between bytes that need escaping are copied whole (most strings have none): appending byte by
    /// byte was the daemon's costliest Swift function in bench/jobs.py (5 % of its instructions, callgrind).
    static func write(string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = string
        text.withUTF8 { bytes in
            var start = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                escape(byte, into: &out)
                start = index + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func escape(_ byte: UInt8, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(byte)
        case 0x08: out.append(UInt8(ascii: "b"))
        case 0x0C: out.append(UInt8(ascii: "f"))
        case 0x0A: out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(UInt8(ascii: "r"))
        case 0x09: out.append(UInt8(ascii: "t"))
        default:
            out.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0xF)])
        }
    }
}

/// Writes one compact JSON object member by member, straight into its bytes: the same bytes as `JSONCoding.encode`
/// of the object (keys sorted, the same number and string forms), without building a dictionary or a member list.
/// For the daemon's hottest lines (every feed event), whose members are known where they are written.
///
/// The caller gives the members in ascending key order (byte order, as `JSONCoding` sorts ASCII keys); keys are
/// written as they are, so they must not need escaping (the feed's names: lowercase letters and `_`).
public struct JSONObjectWriter {
    /// The object so far: `{` and the members written; `finish()` closes it.
    public private(set) var bytes: [UInt8]
    private var empty = true
    /// Whether every number written was finite (JSON has no other numbers); a line with one that is not should not
    /// be sent.
    public private(set) var isValid = true

    /// Starts an object, reserving `capacity` bytes.
    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    private mutating func key(_ key: StaticString) {
        if !empty { bytes.append(UInt8(ascii: ",")) }
        empty = false
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
    }

    /// Writes member `key` with any value.
    public mutating func member(_ key: StaticString, _ value: JSONValue) {
        self.key(key)
        if !value.write(into: &bytes) { isValid = false }
    }

    /// Writes member `key` with a string value (escaped as JSON needs).
    public mutating func member(_ key: StaticString, string: String) {
        self.key(key)
        JSONValue.write(string: string, into: &bytes)
    }

    /// Writes member `key` with a whole number (below 2^53 in magnitude, as JSON readers take numbers as doubles).
    public mutating func member(_ key: StaticString, integer: Int64) {
        self.key(key)
        bytes.append(contentsOf: String(integer).utf8)
    }

    /// Writes member `key` whose value is the object of `members`, given in ascending key order.
    public mutating func member(_ key: StaticString, sortedObject members: [(key: String, value: JSONValue)]) {
        self.key(key)
        if !JSONValue.write(sortedMembers: members, into: &bytes) { isValid = false }
    }

    /// The finished object's bytes, with `}`, and `suffix` appended (a newline for a line of a feed).
    public consuming func finish(appending suffix: UInt8? = nil) -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        if let suffix { bytes.append(suffix) }
        return bytes
    }
}
