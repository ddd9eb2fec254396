import Testing
import TrailbookEngine

/// `FeedRelay.payloads`: the feed events of one send as NOTIFY payloads under PostgreSQL's 8 000-byte limit.
struct FeedRelayPayloadTests {
    private func event(_ type: String, job: String, _ extra: [String: JSONValue] = [:]) -> [String: JSONValue] {
        var members: [String: JSONValue] = ["type": .string(type), "job": .string(job), "kind": "sleep", "at": "2026-12-01T00:00:00Z"]
        for (name, value) in extra { members[name] = value }
        return members
    }

    private func decoded(_ payloads: [String]) throws -> [JSONValue] {
        try payloads.flatMap { payload in
            try payload.utf8.split(separator: 0x0A).map { try JSONCoding.decode(JSONValue.self, from: Array($0)) }
        }
    }

    /// 500 events split into payloads that each fit, every event once and in order.
    @Test func manyEventsSplitIntoPayloadsThatFitInOrder() throws {
        let events = (0..<500).map { (i: Int) in event("progress", job: "job-\(i)", ["progress": ["completed": .number(i), "total": 500]]) }
        let payloads = FeedRelay.payloads(events)
        #expect(payloads.count > 1)
        #expect(payloads.allSatisfy { $0.utf8.count <= FeedRelay.payloadBytes })
        let jobs = try decoded(payloads).map { $0["job"]?.stringValue ?? "" }
        #expect(jobs == (0..<500).map { "job-\($0)" })
    }

    /// A state event too big for a payload is sent without its big members and marked `reread` (the receiver
    /// fills them in from the row): the transition itself is never dropped. A long log message is cut; a
    /// progress event that cannot fit is the only thing left out.
    @Test func anOversizeStateEventIsKeptMarkedForRereadAndALogIsCut() throws {
        let big = String(repeating: "é", count: 9_000)
        let events = [
            event("state", job: "a", ["from": "running", "to": "failed", "attempt": 1, "error": ["message": .string(big)]]),
            event("log", job: "a", ["level": "info", "message": .string(big)]),
            event("progress", job: "a", ["progress": ["note": .string(big)]]),
            event("state", job: "b", ["from": "queued", "to": "running", "attempt": 1]),
        ]
        let payloads = FeedRelay.payloads(events)
        #expect(payloads.allSatisfy { $0.utf8.count <= FeedRelay.payloadBytes })
        let sent = try decoded(payloads)
        #expect(sent.map { $0["type"]?.stringValue ?? "" } == ["state", "log", "state"])
        #expect(sent[0]["to"]?.stringValue == "failed" && sent[0]["reread"]?.boolValue == true && sent[0]["error"] == nil)
        #expect((sent[1]["message"]?.stringValue ?? "").hasSuffix("…"))
        #expect(sent[2]["job"]?.stringValue == "b" && sent[2]["reread"] == nil)
    }
}
