import Foundation
import Testing
@testable import TrailbookEngine
@testable import TrailbookProtocol

/// `JSONValueDecoder`, the fast path of `JSONCoding.convert`: where it decodes, it gives what Foundation's decoder
/// gives for the value's text; where Foundation refuses, so does it (and `convert` then reports Foundation's error).
struct JSONValueDecoderTests {
    struct Sample: Codable, Equatable {
        enum Mode: String, Codable { case fast, slow }
        struct Part: Codable, Equatable {
            var name: String
            var size: Int64
        }
        var count: Int
        var ratio: Double
        var flag: Bool?
        var mode: Mode
        var parts: [Part]
        var tags: [String: Int]
        var extra: JSONValue?
        var small: UInt8?

        enum CodingKeys: String, CodingKey {
            case count, ratio, flag, mode, parts, tags, extra, small = "small_number"
        }
    }

    func foundation<T: Decodable>(_ type: T.Type, _ value: JSONValue) -> T? {
        try? JSONDecoder().decode(type, from: Data(JSONCoding.encode(value)))
    }

    @Test func decodesWhatFoundationDecodesTheSameWay() throws {
        let values: [JSONValue] = [
            ["count": 3, "ratio": 0.1, "mode": "fast", "parts": [["name": "a", "size": 9_007_199_254_740_992]], "tags": [:]],
            ["count": -7, "ratio": 1e300, "flag": true, "mode": "slow", "parts": [], "tags": ["x": 1, "y": 2],
             "extra": ["nested": [1, "two", nil]], "small_number": 255, "unknown": "ignored"],
            ["count": 3.0, "ratio": 2, "flag": nil, "mode": "fast", "parts": [], "tags": [:], "extra": nil],
        ]
        for value in values {
            let fast = try JSONValueDecoder.decode(Sample.self, from: value)
            #expect(fast == foundation(Sample.self, value), "\(value)")
            #expect(try JSONCoding.convert(value, to: Sample.self) == fast)
        }
        let options: JSONValue = ["priority": 5, "timeout_s": 1.5, "max_attempts": 2]
        #expect(try JSONValueDecoder.decode(SubmitOptions.self, from: options) == foundation(SubmitOptions.self, options))
        #expect(try JSONValueDecoder.decode([JSONValue].self, from: [1, "a"]) == [1, "a"])
    }

    @Test func refusesWhereFoundationRefusesOrDecodesItsOwnWay() throws {
        let refused: [JSONValue] = [
            ["count": 1.5, "ratio": 0, "mode": "fast", "parts": [], "tags": [:]],  // not a whole number
            ["count": "1", "ratio": 0, "mode": "fast", "parts": [], "tags": [:]],  // a string for a number
            ["count": 1, "ratio": 0, "mode": "quick", "parts": [], "tags": [:]],  // no such case
            ["count": 1, "ratio": 0, "mode": "fast", "parts": [["name": "a"]], "tags": [:]],  // a member missing
            ["count": nil, "ratio": 0, "mode": "fast", "parts": [], "tags": [:]],  // null for a number
            ["count": 1, "ratio": 0, "mode": "fast", "parts": [], "tags": [:], "small_number": 256],  // out of range
            ["count": 1e17, "ratio": 0, "mode": "fast", "parts": [], "tags": [:]],  // past 2^53: Foundation's way
            ["count": 1, "ratio": 0, "flag": 1, "mode": "fast", "parts": [], "tags": [:]],  // a number for a Bool
        ]
        for value in refused {
            #expect(throws: (any Error).self, "\(value)") { try JSONValueDecoder.decode(Sample.self, from: value) }
        }
        // Types Foundation's decoder treats in its own way are left to it.
        #expect(throws: (any Error).self) { try JSONValueDecoder.decode(URL.self, from: "https://example.com/") }
        #expect(throws: (any Error).self) { try JSONValueDecoder.decode(Data.self, from: [1, 2]) }
        #expect(try JSONCoding.convert("https://example.com/", to: URL.self) == URL(string: "https://example.com/"))
        // Foundation's error (naming the member) still comes through convert.
        #expect(throws: DecodingError.self) { try JSONCoding.convert(refused[0], to: Sample.self) }
    }
}
