import TrailbookProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Numbers the events a `FeedRelay` sends, and drops the copies of those it receives again: a send whose answer
/// was lost (its connection dropped after the commit, or it outlasted its timeout) is sent again, and its
/// `NOTIFY`s may then reach the other daemons twice; each event must reach their watchers once (a job's end
/// twice was two ends to a watcher).
///
/// Each event goes out with the member `relay`: `"<origin> <n> <instance>"`, `origin` random per relay (one per
/// daemon run), `n` counting up from 1, `instance` the daemon that sends it, the same across its restarts (its
/// host and socket path; see `RestartedDaemons`). A relay sends its events in order and a retry sends the same
/// events before any later one, so on the receiving side an event whose `n` is not above the last delivered from
/// its origin is a copy.
struct RelayedEventNumbering {
    /// This relay's origin: random, so a restarted daemon (or another one) never reuses one.
    let origin = String(UInt64.random(in: 1...UInt64.max), radix: 36)
    /// The daemon this relay sends for, the same across its restarts; empty when not known (tests).
    let instance: String
    /// The last number handed out.
    private var last: UInt64 = 0
    /// The last number delivered, by origin; the origin in `recent` has its number there, not here.
    private var delivered: [String: UInt64] = [:]
    /// The origin of the last event delivered and its number: a payload's events all come from one origin, so
    /// most events are checked against it without hashing the origin (the relay receives every event of every
    /// other daemon). Written back to `delivered` when an event of another origin comes.
    private var recent: (origin: String, number: UInt64)?

    /// The member name (removed before an event is published on this daemon's feed).
    static let member = "relay"

    /// A numbering for the relay of daemon `instance` (see the type's documentation).
    init(instance: String = "") {
        self.instance = instance
    }

    /// The next number of this relay: the value of an event's `member`.
    mutating func next() -> String {
        last += 1
        return instance.isEmpty ? "\(origin) \(last)" : "\(origin) \(last) \(instance)"
    }

    /// The relay that sent an event numbered `stamp` (its `member`'s value; `nil` when it had none: an older
    /// daemon's), or `nil` if an event with that number from that origin was delivered already (a copy).
    mutating func received(stamp: String?) -> (origin: String?, instance: String?)? {
        guard let stamp else { return (nil, nil) }
        let parts = stamp.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let number = UInt64(parts[1]) else { return (nil, nil) }
        let instance = parts.count == 3 ? String(parts[2]) : nil
        if let recent, recent.origin == parts[0] {
            guard number > recent.number else { return nil }
            self.recent = (recent.origin, number)
            return (recent.origin, instance)
        }
        let origin = String(parts[0])
        if let last = delivered[origin], number <= last { return nil }
        if let recent { delivered[recent.origin] = recent.number }
        recent = (origin, number)
        return (origin, instance)
    }
}
