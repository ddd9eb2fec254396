import XCTest

@testable import TrailbookEngine

/// The control server's strict, bounded JSON parser: what it accepts, what it refuses and where.
final class JSONParserTests: XCTestCase {
    private func parse(_ text: String) throws(JSONParser.Failure) -> JSONValue {
        try JSONParser.parse(Array(text.utf8))
    }

    private func refusal(_ bytes: [UInt8], limits: JSONParser.Limits = .init()) -> JSONParser.Failure? {
        do {
            _ = try JSONParser.parse(bytes, limits: limits)
            return nil
        } catch {
            return error
        }
    }

    private func refusal(_ text: String) -> JSONParser.Failure? { refusal(Array(text.utf8)) }

    func testParsesEveryKindOfValue() throws {
        let value = try parse(#" {"op": "submit", "n": -12.5e1, "z": 0, "ok": true, "no": false, "nil": null, "a": [1, [], {}], "s": "a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"} "#)
        XCTAssertEqual(
            value,
            [
                "op": "submit", "n": -125, "z": 0, "ok": true, "no": false, "nil": nil, "a": [1, [], [:]],
                "s": .string("a\"\\/\u{08}\u{0C}\n\r\té😀"),
            ])
        XCTAssertEqual(try parse("[1.5, 1E2, 2e-1]"), [1.5, 100, 0.2])
        // Raw UTF-8 in strings is kept exactly.
        XCTAssertEqual(try parse("\"Cão 東京\""), "Cão 東京")
    }

    func testNestingPastTheDepthLimitIsRefusedAsALimitNotATrap() throws {
        XCTAssertNoThrow(try parse(String(repeating: "[", count: 64) + String(repeating: "]", count: 64)))
        for count in [65, 512, 513, 514, 100_000] {
            let failure = refusal(String(repeating: "[", count: count))
            XCTAssertEqual(failure?.kind, .limit, "\(count) brackets")
            XCTAssertEqual(failure?.offset, 64, "the 65th bracket is where it stops")
            XCTAssertEqual(failure?.reason, "arrays and objects nested deeper than 64 levels")
        }
        XCTAssertEqual(refusal(String(repeating: "{\"a\":", count: 65) + "1" + String(repeating: "}", count: 65))?.kind, .limit)
    }

    func testDuplicateKeysAreRefusedWhereTheSecondStarts() {
        let failure = refusal(#"{"op": "list", "op": "ping"}"#)
        XCTAssertEqual(failure?.kind, .duplicateKey)
        XCTAssertEqual(failure?.offset, 15)
        XCTAssertEqual(failure?.message, #"duplicate key "op" in an object at byte 15"#)
        // Compared after unescaping: "\u006fp" is "op".
        XCTAssertEqual(refusal(#"{"op": 1, "\u006fp": 2}"#)?.kind, .duplicateKey)
        XCTAssertEqual(refusal(#"{"a": {"b": 1, "b": 1}}"#)?.kind, .duplicateKey)
        // The same key in two different objects is fine.
        XCTAssertNoThrow(try parse(#"[{"a": 1}, {"a": 2}]"#))
    }

    /// Objects past the few keys compared one by one (then hashed) refuse a duplicate all the same, at the top of
    /// `members(ofObject:)` and inside a member.
    func testDuplicateKeysOfLargeObjectsAreRefusedWhenNotBuilt() throws {
        let keys = (0..<40).map { "\"k\($0)\": \($0)" }
        let distinct = "{" + keys.joined(separator: ", ") + "}"
        XCTAssertEqual(try JSONParser.members(ofObject: Array(distinct.utf8)[...]).count, 40)
        XCTAssertNoThrow(try JSONParser.members(ofObject: Array(#"{"o": \#(distinct)}"#.utf8)[...]))
        for late in [3, 16, 17, 39] {
            let duplicated = "{" + (keys + ["\"k\(late)\": 0"]).joined(separator: ", ") + "}"
            XCTAssertThrowsError(try JSONParser.members(ofObject: Array(duplicated.utf8)[...])) { error in
                XCTAssertEqual((error as? JSONParser.Failure)?.kind, .duplicateKey, "\(late)")
            }
            let nested = Array(#"{"o": \#(duplicated)}"#.utf8)
            XCTAssertThrowsError(try JSONParser.members(ofObject: nested[...])) { error in
                XCTAssertEqual((error as? JSONParser.Failure)?.kind, .duplicateKey, "\(late)")
            }
        }
    }

    func testTrailingCommasAndOtherNonJSONAreSyntaxErrors() {
        let cases: [(String, String, Int)] = [
            ("[1,]", "trailing comma before ']'", 3),
            (#"{"a": 1,}"#, "trailing comma before '}'", 8),
            ("[,1]", "expected a value, found ','", 1),
            ("", "expected a value, found the end of the request", 0),
            ("{", "expected a member name in double quotes, found the end of the request", 1),
            (#"{"op": "ping"} x"#, "unexpected text after the JSON value", 15),
            ("[01]", "a number has a leading zero", 2),
            ("[1.]", "expected a digit after '.', found ']'", 3),
            ("[-]", "expected a digit, found ']'", 2),
            ("[1e]", "expected a digit in an exponent, found ']'", 3),
            ("{'a': 1}", "expected a member name in double quotes, found '''", 1),
            ("[tru]", "expected true, found ']'", 4),
            (#""abc"#, "a string is not closed", 0),
            (#""\x""#, "unknown escape (backslash, then 'x') in a string", 1),
            (#""\u12""#, "a \\u escape needs 4 hex digits", 5),
            (#""\ud800""#, "a lone UTF-16 surrogate escape", 1),
            (#""\udc00x""#, "a lone UTF-16 surrogate escape", 1),
            (#""\u0000""#, "a string contains U+0000", 1),
            ("[1] // comment", "unexpected text after the JSON value", 4),
            ("\u{FEFF}{}", "expected a value, found byte 0xEF", 0),
        ]
        for (text, reason, offset) in cases {
            let failure = refusal(text)
            XCTAssertEqual(failure?.kind, .syntax, text)
            XCTAssertEqual(failure?.reason, reason, text)
            XCTAssertEqual(failure?.offset, offset, text)
        }
    }

    func testInvalidUTF8NULAndRawControlBytesAreRefused() {
        let quote = UInt8(ascii: "\"")
        let cases: [([UInt8], String)] = [
            ([quote, 0x63, 0x61, 0x66, 0xE9, quote], "invalid UTF-8 (a malformed sequence)"),  // Latin-1 "café"
            ([quote, 0xC0, 0x80, quote], "invalid UTF-8 (byte 0xC0)"),  // overlong NUL
            ([quote, 0xED, 0xA0, 0x80, quote], "invalid UTF-8 (a malformed sequence)"),  // a surrogate
            ([quote, 0xF4, 0x90, 0x80, 0x80, quote], "invalid UTF-8 (a malformed sequence)"),  // past U+10FFFF
            ([quote, 0xFF, quote], "invalid UTF-8 (byte 0xFF)"),
            ([quote, 0xE6, 0x9D, quote], "invalid UTF-8 (a malformed sequence)"),
            ([quote, 0x61, 0x00, 0x62, quote], "a string contains U+0000"),
            ([quote, 0x61, 0x1B, quote], "a raw control character (byte 0x1B) in a string; escape it"),
            ([0x00], "expected a value, found byte 0x0"),
            ([UInt8(ascii: "["), 0x31, 0x00, UInt8(ascii: "]")], "expected ',' or ']' in an array, found byte 0x0"),
        ]
        for (bytes, reason) in cases {
            let failure = refusal(bytes)
            XCTAssertEqual(failure?.kind, .syntax, "\(bytes)")
            XCTAssertEqual(failure?.reason, reason, "\(bytes)")
        }
    }

    func testEveryOtherDimensionIsBounded() {
        var limits = JSONParser.Limits()
        limits.maxStringBytes = 8
        limits.maxMembers = 3
        limits.maxValues = 6
        limits.maxNumberBytes = 5
        XCTAssertNil(refusal(Array(#"["12345678"]"#.utf8), limits: limits))
        XCTAssertEqual(refusal(Array(#"["123456789"]"#.utf8), limits: limits)?.reason, "a string is longer than 8 bytes")
        // Escapes count as what they stand for: 9 bytes after unescaping.
        XCTAssertEqual(refusal(Array(#"["\u00e9\u00e9\u00e9\u00e9a"]"#.utf8), limits: limits)?.kind, .limit)
        XCTAssertNil(refusal(Array("[1,2,3]".utf8), limits: limits))
        XCTAssertEqual(refusal(Array("[1,2,3,4]".utf8), limits: limits)?.reason, "an array has more than 3 elements")
        var fewMembers = JSONParser.Limits()
        fewMembers.maxMembers = 3
        XCTAssertEqual(
            refusal(Array(#"{"a":1,"b":2,"c":3,"d":4}"#.utf8), limits: fewMembers)?.reason, "an object has more than 3 members")
        XCTAssertEqual(refusal(Array("[[1,2],[3,4]]".utf8), limits: limits)?.reason, "more than 6 values in the request")
        XCTAssertNil(refusal(Array("[12345]".utf8), limits: limits))
        XCTAssertEqual(refusal(Array("[123456]".utf8), limits: limits)?.reason, "a number is longer than 5 characters")
        // A number that does not fit a Double is refused, not turned into infinity.
        XCTAssertEqual(refusal("1e400")?.reason, "the number 1e400 is out of range")
        XCTAssertEqual(refusal("1e400")?.kind, .limit)
        // A non-zero literal that would round to 0 is out of range too; zero written any way is zero.
        XCTAssertEqual(refusal("1e-400")?.reason, "the number 1e-400 is out of range")
        XCTAssertEqual(refusal("-0.5E-999")?.kind, .limit)
        XCTAssertEqual(try parse("0e-400"), .number(0))
        XCTAssertEqual(try parse("-0.000"), .number(0))
        XCTAssertEqual(try parse("0e4"), .number(0))
        // The defaults.
        let defaults = JSONParser.Limits()
        XCTAssertEqual(
            [defaults.maxDepth, defaults.maxStringBytes, defaults.maxMembers, defaults.maxValues, defaults.maxNumberBytes],
            [64, 65_536, 100_000, 200_000, 64])
    }

    /// Input number `round` of a fuzz run: random bytes of `alphabet`, `seed` with 1-4 bytes changed, or a
    /// prefix of `seed`, in turn.
    private static func fuzzed(
        _ round: Int, seed: [UInt8], alphabet: [UInt8], using generator: inout SplitMix64
    ) -> [UInt8] {
        switch round % 3 {
        case 0:
            return (0..<Int.random(in: 0...40, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
        case 1:
            var bytes = seed
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = alphabet.randomElement(using: &generator)!
            }
            return bytes
        default:
            return Array(seed.prefix(Int.random(in: 0...seed.count, using: &generator)))
        }
    }

    /// Random bytes, random mutations of a valid request and random truncations: the parser returns or throws, and
    /// whatever it accepts is also valid JSON for Foundation's decoder (it never accepts what is not JSON).
    func testRandomInputNeverTrapsAndWhatItAcceptsIsJSON() throws {
        // Seeded, so a failure is the same on every run and can be replayed.
        var generator = SplitMix64(seed: 0x7472_6169_6C62_6F6F)
        let seed = Array(#"{"op": "submit", "kind": "sleep", "params": {"seconds": 1.5, "names": ["a", "b\u00e9"]}, "options": {"priority": 3}}"#.utf8)
        let alphabet = Array(#"{}[]":,\ 0123456789.eE+-truefalsnl"#.utf8) + [0x00, 0x0A, 0xC3, 0xA9, 0xFF, 0xED]
        var accepted = 0
        for round in 0..<20_000 {
            let bytes = Self.fuzzed(round, seed: seed, alphabet: alphabet, using: &generator)
            guard let value = try? JSONParser.parse(bytes) else { continue }
            accepted += 1
            let text = String(decoding: bytes, as: UTF8.self)
            guard let foundation = try? JSONCoding.decode(JSONValue.self, from: bytes) else {
                // Foundation refuses a zero with an exponent ("0e4", "0E-2"), which RFC 8259 §6 allows (its
                // grammar: int [frac] [exp], int may be 0). Any other refusal is a disagreement to look at.
                XCTAssertTrue(text.contains("0e") || text.contains("0E"), "Foundation refuses what the parser accepted: \(text)")
                continue
            }
            XCTAssertEqual(value, foundation, text)
        }
        XCTAssertGreaterThan(accepted, 100, "some mutations stay valid JSON, or this test checks nothing")
    }

    /// `members(ofObject:)` checks what `parse` checks: on a fuzz corpus like the one above (and objects past each
    /// limit) it refuses exactly what `parse` refuses, with the same failure, and each member's range parses to the
    /// value `parse` gives that key.
    func testMembersOfAnObjectAgreeWithParse() throws {
        var generator = SplitMix64(seed: 0x6D65_6D62_6572_7321)
        let seed = Array(#"{"relay": "o 7 h\"x", "job": "j\u00e9", "n": -1.5e2, "ok": true, "a": [1, {"k": null}], "o": {"s": "café"}}"#.utf8)
        let alphabet = Array(#"{}[]":,\ 0123456789.eE+-truefalsnl"#.utf8) + [0x00, 0x0A, 0xC3, 0xA9, 0xFF, 0xED]
        var limits = JSONParser.Limits()
        limits.maxStringBytes = 8
        limits.maxMembers = 3
        limits.maxNumberBytes = 5
        limits.maxDepth = 3
        let bounded: [[UInt8]] = [
            #"{"a": "123456789"}"#, #"{"a": "12345678"}"#, #"{"a": ["\u00e9\u00e9\u00e9\u00e9a"]}"#,
            #"{"a": "ééééé"}"#, #"{"a": 1, "b": 2, "c": 3, "d": 4}"#, #"{"a": [1, 2, 3, 4]}"#,
            #"{"a": 123456}"#, #"{"a": [[[1]]]}"#, #"{"a": [[1]]}"#, #"{"a": 1, "a": 2}"#, #"{"a": {"b": 1, "b": 2}}"#,
        ].map { Array($0.utf8) }
        var objects = 0
        for round in 0..<(20_000 + bounded.count) {
            var bytes: [UInt8]
            let bound = round >= 20_000
            if bound {
                bytes = bounded[round - 20_000]
            } else {
                bytes = Self.fuzzed(round, seed: seed, alphabet: alphabet, using: &generator)
            }
            let chosen = bound ? limits : JSONParser.Limits()
            let text = String(decoding: bytes, as: UTF8.self)
            var parsed: JSONValue?
            var parseFailure: JSONParser.Failure?
            do { parsed = try JSONParser.parse(bytes, limits: chosen) } catch { parseFailure = error }
            var found: [(key: String, value: Range<Int>)]?
            var membersFailure: JSONParser.Failure?
            do { found = try JSONParser.members(ofObject: bytes[...], limits: chosen) } catch { membersFailure = error }
            if case .object(let object)? = parsed {
                objects += 1
                guard let found else {
                    XCTFail("members(ofObject:) refuses an object parse accepts: \(text): \(membersFailure!)")
                    continue
                }
                XCTAssertEqual(found.map(\.key).count, object.count, text)
                for (key, range) in found {
                    XCTAssertEqual(try JSONParser.parse(bytes[range]), object[key], text)
                }
            } else if parsed != nil {
                // Not an object at the top: the one refusal parse does not make.
                XCTAssertTrue(membersFailure?.reason.hasPrefix("expected an object") == true, text)
            } else if let membersFailure, !membersFailure.reason.hasPrefix("expected an object") {
                XCTAssertEqual(membersFailure, parseFailure, text)
            } else if membersFailure == nil {
                XCTFail("members(ofObject:) accepts what parse refuses: \(text): \(parseFailure!)")
            }
        }
        XCTAssertGreaterThan(objects, 100, "some mutations stay valid objects, or this test checks nothing")
    }
}

/// A small deterministic random number generator (SplitMix64, https://prng.di.unimi.it/splitmix64.c) for
/// reproducible fuzz rounds.
private struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
