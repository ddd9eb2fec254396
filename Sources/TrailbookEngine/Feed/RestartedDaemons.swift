/// Tells, from the relayed events a daemon receives, when another daemon sharing the store was started again:
/// its events come from a new relay origin under the same instance (host and socket path).
///
/// Why it matters: a daemon writes a job's end in its group commit and sends the end's event to the others in a
/// later `NOTIFY` (docs/explanation/shared-store.md, "The feed across daemons"). Killed between the two, its end is
/// in the store but no other daemon's watchers hear of it, and nothing else tells them they missed it. Its next
/// run's first event (every relay sends one at start, `FeedRelay.started`) tells each receiver that the previous
/// run may have died with events unsent, and the receiver announces a `gap`, so its watchers read the jobs again.
struct RestartedDaemons {
    /// The last relay origin heard from each instance.
    private var origins: [String: String] = [:]
    /// The last event's instance and origin: the events of one payload share them, and noting them again changes
    /// nothing, so it is skipped (no hashing for every event).
    private var last: (instance: String, origin: String)?

    /// Takes `origin` as daemon `instance`'s current run without hearing it (the store's record of it, read when
    /// following starts: `LeasingJobStoring.followFeed`): its next run heard is a restart.
    mutating func know(instance: String, origin: String) {
        if let last, last.instance == instance, last.origin != origin { self.last = nil }
        origins[instance] = origin
    }

    /// Notes an event from relay `origin` of daemon `instance`.
    /// - Returns: `true` when `instance` was heard from before under another origin: it was started again.
    mutating func heard(instance: String, origin: String) -> Bool {
        if let last, last.origin == origin, last.instance == instance { return false }
        last = (instance, origin)
        let previous = origins.updateValue(origin, forKey: instance)
        return previous != nil && previous != origin
    }
}
