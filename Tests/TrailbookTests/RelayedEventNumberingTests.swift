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
        #expect(receiver.received(first)?.members[RelayedEventNumbering.member] == nil)
        #expect(receiver.received(second)?.members == end)
        #expect(receiver.received(first)?.members == nil)
        #expect(receiver.received(second)?.members == nil)
        let third = sender.numbered(["type": "state", "job": "j2", "kind": "sleep", "to": "failed"])
        #expect(receiver.received(third)?.members["job"] == "j2")
        // Another daemon's numbers are its own; an event without one (an older daemon's) passes as it is.
        var other = RelayedEventNumbering()
        #expect(other.origin != sender.origin)
        #expect(receiver.received(other.numbered(end))?.members == end)
        #expect(receiver.received(end)?.members == end)
        #expect(receiver.received(end)?.members == end)
    }

    /// The stamp names the sending daemon's instance (host and socket path, spaces and all), and a second run of
    /// that instance is told apart from the first by its new origin: the receiver learns it was started again.
    @Test func aDaemonStartedAgainUnderTheSameInstanceIsNoticed() throws {
        let instance = "host-a /run/user/1000/trailbook jobs/daemon.sock"
        var firstRun = RelayedEventNumbering(instance: instance)
        var receiver = RelayedEventNumbering()
        var restarts = RestartedDaemons()
        let end: [String: JSONValue] = ["type": "state", "job": "j1", "kind": "sleep", "to": "succeeded"]
        func stamp(_ relay: inout RelayedEventNumbering, _ event: [String: JSONValue]) -> [String: JSONValue] {
            relay.numbered(event)
        }
        func heard(_ event: [String: JSONValue]) throws -> Bool {
            let received = receiver.received(event)
            let delivery = try #require(received)
            #expect(delivery.members == end || delivery.members["type"] == "relay_started")
            return restarts.heard(instance: try #require(delivery.instance), origin: try #require(delivery.origin))
        }
        #expect(try heard(stamp(&firstRun, end)) == false)
        #expect(try heard(stamp(&firstRun, end)) == false)
        // The daemon killed and started again: same instance, new relay.
        var secondRun = RelayedEventNumbering(instance: instance)
        #expect(try heard(stamp(&secondRun, ["type": "relay_started", "host": "host-a"])) == true)
        #expect(try heard(stamp(&secondRun, end)) == false)
        // Another daemon on the same host (another socket) is another instance, not a restart.
        var neighbour = RelayedEventNumbering(instance: "host-a /tmp/other.sock")
        #expect(try heard(stamp(&neighbour, end)) == false)
        #expect(try heard(stamp(&secondRun, end)) == false)
    }
}
