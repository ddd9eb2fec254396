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
        // The first sender's copies are still known once another origin came between.
        #expect(receiver.received(third)?.members == nil)
        #expect(receiver.received(sender.numbered(end))?.members == end)
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

/// The numbering on decoded members, as a relay's line carries it (`FeedRelay` splices the number into the text).
extension RelayedEventNumbering {
    /// `members` with the next number.
    mutating func numbered(_ members: [String: JSONValue]) -> [String: JSONValue] {
        var numbered = members
        numbered[Self.member] = .string(next())
        return numbered
    }

    /// `members` without their number, with who sent them; `nil` for a copy.
    mutating func received(
        _ members: [String: JSONValue]
    ) -> (members: [String: JSONValue], origin: String?, instance: String?)? {
        var members = members
        let stamp = members.removeValue(forKey: Self.member)?.stringValue
        guard let sender = received(stamp: stamp) else { return nil }
        return (members, sender.origin, sender.instance)
    }
}

/// `RelayedLine`: another daemon's line republished as text, without the relay's number and with this feed's `seq`
/// in its sorted place; each value the sender's text of it.
struct RelayedLineTests {
    @Test func aLineIsPublishedWithoutItsNumberAndWithThisFeedsSeq() throws {
        let sent: [UInt8] = Array(#"{"relay":"o 7 h a","at":"2026-12-07T00:00:00Z","host":"h","job":"j\u00e9","kind":"sleep","seq":41,"to":"running","type":"state"}"#.utf8)
        let line = try #require(RelayedLine(sent[...]))
        #expect(line.string("job") == "jé" && line.string("type") == "state" && line.has("to") && !line.has("reread"))
        let published = line.published(seq: 9, without: RelayedEventNumbering.member)
        var members = try #require(line.decoded())
        members[RelayedEventNumbering.member] = nil
        members["seq"] = 9
        // The members' values as the sender wrote them (its \u00e9 kept), the keys in order, seq in its place.
        #expect(try JSONParser.parse(published) == .object(members))
        #expect(String(decoding: published, as: UTF8.self).hasSuffix(#""kind":"sleep","seq":9,"to":"running","type":"state"}"#))
        // Without a seq of its own, the seq still lands in its sorted place; a line that is not JSON is refused.
        let bare = try #require(RelayedLine(Array(#"{"job":"j","kind":"k","type":"log"}"#.utf8)[...]))
        #expect(String(decoding: bare.published(seq: 3, without: "relay"), as: UTF8.self) == #"{"job":"j","kind":"k","seq":3,"type":"log"}"#)
        // A string without escapes is read as it stands, raw UTF-8 and all; a value that is no string is no string.
        let raw = try #require(RelayedLine(Array(#"{"job":"jé \/","kind":"k é","n":5,"o":{"a":"b"}}"#.utf8)[...]))
        #expect(raw.string("job") == "jé /" && raw.string("kind") == "k é")
        #expect(raw.string("n") == nil && raw.string("o") == nil && raw.string("missing") == nil)
        #expect(RelayedLine(Array(#"{"job":"j","#.utf8)[...]) == nil)
        #expect(RelayedLine(Array(#"["job"]"#.utf8)[...]) == nil)
    }
}
