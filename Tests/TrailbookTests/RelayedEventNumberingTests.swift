import Testing
@testable import TrailbookEngine

/// `RelayedEventNumbering`: a relayed event received again (a send retried after its answer was lost) reaches this
/// daemon's feed once; the number never reaches a watcher.
struct RelayedEventNumberingTests {
    @Test func aCopyOfARelayedEventIsDroppedAndTheNumberRemoved() {
        var sender = RelayedEventNumbering()
        var receiver = RelayedEventNumbering()
        let end: [String: JSONValue] = ["type": "state", "job": "j1", "kind": "sleep", "to": "succeeded"]
        let first = sender.numbered(["type": "log", "job": "j1", "kind": "sleep", "message": "m"])
        let second = sender.numbered(end)
        // The send, then its retry (same events, same numbers), then a later event.
        #expect(receiver.delivered(first)?[RelayedEventNumbering.member] == nil)
        #expect(receiver.delivered(second) == end)
        #expect(receiver.delivered(first) == nil)
        #expect(receiver.delivered(second) == nil)
        let third = sender.numbered(["type": "state", "job": "j2", "kind": "sleep", "to": "failed"])
        #expect(receiver.delivered(third)?["job"] == "j2")
        // Another daemon's numbers are its own; an event without one (an older daemon's) passes as it is.
        var other = RelayedEventNumbering()
        #expect(other.origin != sender.origin)
        #expect(receiver.delivered(other.numbered(end)) == end)
        #expect(receiver.delivered(end) == end)
        #expect(receiver.delivered(end) == end)
    }
}
