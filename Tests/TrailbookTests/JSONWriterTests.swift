import Foundation
import Testing

@testable import TrailbookEngine

/// `JSONCoding.encode` of a `JSONValue` writes it itself (issue 14): the same bytes as Foundation's encoder with the
/// options it used, for every shape the daemon writes.
struct JSONWriterTests {
    static func foundation(_ value: JSONValue) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(value)) ?? Data("null".utf8))
    }

    static let samples: [JSONValue] = [
        .null, true, false, 0, -0.0, 1, -1, 42, 0.1, 1e-7, 1e300, -2.5e-300, 123_456.789, 9.5e15, 1.5e16, 8_999_999_999_999_998,
        0.30000000000000004, 1_764_550_350.123456,
        "", "plain", "\u{1}\u{8}\u{c}\n\r\t\u{1f}\"\\/ \u{7f}\u{2028}é😀", "/photos/a b/ü.jpg",
        ["A": 11, "B": 3, "Z": 7, "_x": 5, "a": 4, "a10": 1, "a9": 2, "a_b": 9, "ab": 10, "b": 8, "é": 6],
        [1, "two", [3, [4, ["five": .null]]], ["nested": ["deeper": [true, false, 0.5]]]],
        [:], [],
        ["progress": ["completed": 52_428_800, "total": 104_857_600, "unit": "bytes", "rate_per_s": 73_400_320.5, "eta_s": 0.7]],
    ]

    @Test func writesWhatFoundationsEncoderWrote() {
        for sample in Self.samples {
            #expect(JSONCoding.encode(sample) == Self.foundation(sample), "\(sample)")
        }
        #expect(JSONCoding.encode(JSONValue.number(.nan)) == Array("null".utf8))
        #expect(JSONCoding.encode(["a": JSONValue.number(.infinity)] as JSONValue) == Array("null".utf8))
    }

    @Test func readsBackWhatItWrote() throws {
        for sample in Self.samples {
            #expect(try JSONCoding.decode(JSONValue.self, from: JSONCoding.encode(sample)) == sample)
        }
        // Text our parser refuses (a duplicate key) still decodes as before, the general way.
        #expect(try JSONCoding.decode(JSONValue.self, from: Array(#"{"a":1,"a":2}"#.utf8))["a"] != nil)
    }
}
