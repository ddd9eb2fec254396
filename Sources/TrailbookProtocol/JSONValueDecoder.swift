#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Decodes a `Decodable` type straight from a `JSONValue`, without writing it out as text and parsing it again
/// with Foundation's `JSONDecoder` (what `JSONCoding.convert` did alone: a tenth of the daemon's CPU per no-op job,
/// issue 14, from the params, options and checkpoints converted for every job).
///
/// It is only a fast path: it succeeds exactly where Foundation's decoder of `JSONCoding.encode(value)` would
/// succeed with the same result, and refuses (throws `Unsupported`) whatever it is not sure of — types Foundation
/// treats specially (`Data`, `Date`, `URL`, `Decimal`, `Float`), a number that is not exactly the integer type's —
/// so `JSONCoding.convert` then takes Foundation's way, whose `DecodingError` names the bad member.
struct JSONValueDecoder {
    /// Why the fast path gave up; never shown (the caller falls back to Foundation's decoder).
    struct Unsupported: Error {}

    /// `value` as a `T`.
    /// - Throws: `Unsupported` when the value does not have `T`'s shape or `T` needs Foundation's own handling.
    static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try Node(value: value).decode(type)
    }

    /// One value being decoded; the `Decoder` and all three kinds of container over it.
    fileprivate struct Node: Decoder, SingleValueDecodingContainer {
        let value: JSONValue
        var codingPath: [any CodingKey] = []
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        init(value: JSONValue) { self.value = value }

        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            if type == JSONValue.self, let value = value as? T { return value }
            if type == String.self, case .string(let text) = value, let text = text as? T { return text }
            if type == Double.self, case .number(let number) = value, let number = number as? T { return number }
            if type == Bool.self, case .bool(let flag) = value, let flag = flag as? T { return flag }
            if type == Data.self || type == Date.self || type == URL.self || type == Decimal.self || type == Float.self {
                throw Unsupported()
            }
            return try T(from: self)
        }

        // MARK: Decoder

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            guard case .object(let members) = value else { throw Unsupported() }
            return KeyedDecodingContainer(Keyed<Key>(members: members))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard case .array(let elements) = value else { throw Unsupported() }
            return Unkeyed(elements: elements)
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

        // MARK: SingleValueDecodingContainer

        func decodeNil() -> Bool { value.isNull }
        func decode(_ type: Bool.Type) throws -> Bool {
            guard case .bool(let flag) = value else { throw Unsupported() }
            return flag
        }
        func decode(_ type: String.Type) throws -> String {
            guard case .string(let text) = value else { throw Unsupported() }
            return text
        }
        func decode(_ type: Double.Type) throws -> Double {
            guard case .number(let number) = value else { throw Unsupported() }
            return number
        }
        func decode(_ type: Float.Type) throws -> Float { throw Unsupported() }
        func decode(_ type: Int.Type) throws -> Int { try integer(type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
        func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

        /// A whole number that the integer type holds exactly, as Foundation would parse the written digits; a
        /// number past 2^53 is left to Foundation (its text may not be the digits a `Double` holds).
        private func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
            guard case .number(let number) = value, abs(number) <= 9_007_199_254_740_992, let integer = T(exactly: number)
            else { throw Unsupported() }
            return integer
        }
    }

    private struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let members: [String: JSONValue]
        var codingPath: [any CodingKey] { [] }
        var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }

        func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

        private func node(_ key: Key) throws -> Node {
            guard let value = members[key.stringValue] else { throw Unsupported() }
            return Node(value: value)
        }

        /// The member's node unless it is absent or `null`: what `decodeIfPresent` decodes, found with one lookup
        /// (the protocol's default asks `contains`, then `decodeNil`, then `decode`: three).
        private func present(_ key: Key) -> Node? {
            guard let value = members[key.stringValue], !value.isNull else { return nil }
            return Node(value: value)
        }

        func decodeNil(forKey key: Key) throws -> Bool { try node(key).value.isNull }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try node(key).decode(type) }
        // The scalar types straight to the node's own methods, past the generic `decode`'s type tests.
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try node(key).decode(type) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try node(key).decode(type) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try node(key).decode(type) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try node(key).decode(type) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try node(key).decode(type) }
        func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try present(key)?.decode(type) }
        func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try present(key)?.decode(type) }
        func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try present(key)?.decode(type) }
        func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try present(key)?.decode(type) }
        func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try present(key)?.decode(type) }
        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            try present(key)?.decode(type)
        }
        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
            -> KeyedDecodingContainer<NestedKey>
        { try node(key).container(keyedBy: type) }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try node(key).unkeyedContainer()
        }
        func superDecoder() throws -> any Decoder { throw Unsupported() }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw Unsupported() }
    }

    private struct Unkeyed: UnkeyedDecodingContainer {
        let elements: [JSONValue]
        var codingPath: [any CodingKey] { [] }
        var count: Int? { elements.count }
        var isAtEnd: Bool { currentIndex >= elements.count }
        var currentIndex = 0

        init(elements: [JSONValue]) { self.elements = elements }

        private mutating func next() throws -> Node {
            guard !isAtEnd else { throw Unsupported() }
            defer { currentIndex += 1 }
            return Node(value: elements[currentIndex])
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd else { throw Unsupported() }
            guard elements[currentIndex].isNull else { return false }
            currentIndex += 1
            return true
        }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decode(type) }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
            -> KeyedDecodingContainer<NestedKey>
        { try next().container(keyedBy: type) }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
        mutating func superDecoder() throws -> any Decoder { throw Unsupported() }
    }
}
