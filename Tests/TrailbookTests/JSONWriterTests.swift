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

    /// An object written from its members (`encode(members:)`: feed events, stored progress) is the object's JSON,
    /// whatever order the members come in.
    @Test func anObjectWrittenFromItsMembersInAnyOrderIsTheObjectsJSON() {
        for sample in Self.samples {
            guard case .object(let members) = sample else { continue }
            let pairs = members.map { (key: $0.key, value: $0.value) }
            for order in [pairs, pairs.reversed(), pairs.sorted { $0.key > $1.key }, pairs.shuffled()] {
                #expect(JSONCoding.encode(members: order) == Self.foundation(sample), "\(order)")
            }
        }
        #expect(JSONCoding.encode(members: [("a", .number(.nan))]) == Array("null".utf8))
    }

    /// A job's stored progress (`jsonText`) is `json` encoded, for every optional member present or not.
    @Test func progressTextIsItsJSON() {
        var samples = [
            JobProgress(unit: .bytes),
            JobProgress(completed: 5, total: 10, unit: .photos, ratePerSecond: 12.34, etaSeconds: 0.44, current: "b.jpg"),
            JobProgress(
                completed: 7, total: 9, unit: .bytes, current: "/photos/ü \"x\".jpg",
                items: [ProgressItem(label: "a", completed: 1, total: 2)], inFlight: 3),
        ]
        var finished = JobProgress(unit: .bytes)
        finished.isFinished = true
        samples.append(finished)
        samples.append(JobProgress(completed: 1 << 60, total: (1 << 60) + 1, unit: .bytes, ratePerSecond: 1e300))
        for progress in samples {
            #expect(Array(progress.jsonText.utf8) == Self.foundation(progress.json), "\(progress)")
            #expect(Array(progress.jsonText.utf8) == JSONCoding.encode(members: progress.jsonMembers), "\(progress)")
            #expect(progress.jsonMembers.map(\.key) == progress.jsonMembers.map(\.key).sorted(), "in sorted order")
        }
        #expect(JobProgress(unit: .bytes, etaSeconds: .nan).jsonText == "null", "as the member list encodes it")
    }

    /// An object written member by member in key order (`JSONObjectWriter`) is the object's JSON.
    @Test func anObjectWrittenMemberByMemberIsTheObjectsJSON() {
        var writer = JSONObjectWriter()
        writer.member("a", .array([1, "x"]))
        writer.member("b_c", integer: -42)
        writer.member("d", sortedObject: [("k", "v\n"), ("z", .null)])
        writer.member("e", string: "\u{1}\"quoted\" é/😀")
        writer.member("f", 0.25)
        #expect(writer.isValid)
        let expected: JSONValue = [
            "a": [1, "x"], "b_c": -42, "d": ["k": "v\n", "z": .null], "e": "\u{1}\"quoted\" é/😀", "f": 0.25,
        ]
        #expect(writer.finish(appending: 0x0A) == Self.foundation(expected) + [0x0A])
        var empty = JSONObjectWriter()
        empty.member("n", .number(.infinity))
        #expect(!empty.isValid, "no JSON for an infinite number")
    }
}

/// Every feed event line, written member by member (`ProgressFeed.publish`), is its members' JSON: the bytes the
/// generic encoder gives, keys sorted, for each type and each optional member.
struct FeedLineTests {
    @Test func eachEventLineIsItsMembersJSON() async throws {
        try await onLoop {
            let feed = ProgressFeed(firstSeq: 41)
            var published: [ProgressFeed.PublishedEvent] = []
            feed.host = "host-\"a\""
            feed.onLocalEvent = { published.append($0) }
            let options = JobOptions(priority: 0, timeoutSeconds: 30, stallTimeoutSeconds: 30, maxAttempts: 3)
            var job = JobRecord(
                id: "9b2f0000-0000-4000-8000-000000000001", kind: "upload", state: .queued, options: options, attempt: 0,
                progress: JobProgress(unit: .bytes), createdAt: "2026-12-06T00:00:00Z", updatedAt: "2026-12-06T00:00:00Z",
                params: ["files": ["/p/a.jpg"]], result: .null, sequence: 7)
            feed.submitted(job)
            job.state = .running
            job.attempt = 1
            feed.stateChanged(job, from: .queued)
            feed.progress(job: job.id, kind: job.kind, JobProgress(completed: 5, total: 10, unit: .bytes, current: "a.jpg"))
            feed.log(job: job.id, kind: job.kind, level: .warning, message: "slow \"server\"\n")
            job.state = .needsRetry
            job.error = JobError(code: "http_503", message: "busy", retryable: true)
            job.cancellation = Cancellation(reason: .timeout, at: "2026-12-06T00:00:01Z", detail: "no progress")
            job.retryAt = Timestamp.now() + 30
            feed.stateChanged(job, from: .running)
            job.state = .succeeded
            job.error = nil
            job.result = ["bytes": 10, "files": ["a.jpg"]]
            feed.stateChanged(job, from: .running)
            job.state = .cancelled
            job.cancellation = Cancellation(reason: .userStop, at: "2026-12-06T00:00:02Z", detail: "cancelled by user")
            feed.stateChanged(job, from: .queued)
            let events = Array(feed.bufferedEvents)
            #expect(events.count == 7 && published.count == 7)
            var members: [[String: JSONValue]] = []
            for (event, local) in zip(events, published) {
                // The relay is handed the very line the feed published.
                #expect(Array(local.line) + [0x0A] == event.line)
                #expect(local.job == event.job && local.isProgress == event.isProgress)
                guard case .object(let decoded) = try JSONParser.parse(local.line) else {
                    Issue.record("not an object: \(String(decoding: local.line, as: UTF8.self))")
                    continue
                }
                members.append(decoded)
                #expect(event.line == JSONWriterTests.foundation(.object(decoded)) + [0x0A], "\(String(decoding: event.line, as: UTF8.self))")
            }
            #expect(events.map(\.seq) == Array(41...47))
            #expect(members[4]["retry_in_s"] != nil && members[5]["result"]?["bytes"] == 10)
        }
    }
}
