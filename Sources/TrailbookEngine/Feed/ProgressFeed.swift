import TrailbookLoop

/// The live progress feed (docs/reference/protocol.md, "The feed"): every job change as a numbered event, kept in a replay
/// buffer and pushed to subscribers.
///
/// Progress events are coalesced to at most one per job per `progressInterval`; state events are never dropped or
/// coalesced (a pending progress event of the same job is flushed before them, so the order stays true). Each
/// event is encoded once and the same bytes go to every subscriber, so 20 watchers cost little more than one.
/// A subscriber that stops reading is never waited for: past `progressSkipBytes` queued it gets no progress
/// events, past `cutOffBytes` it is disconnected (it can come back with `--since`), so the daemon's memory stays
/// bounded.
@LoopActor
public final class ProgressFeed {
    /// One event as published.
    public struct Event: Sendable {
        /// Sequence number, increasing per daemon and across its restarts. On a shared store the events of other
        /// daemons' jobs are numbered by this daemon as they reach it (`relay`).
        public var seq: Int64
        /// The job's id.
        public var job: String
        /// The job's kind, for `watch --kind` filters.
        public var kind: String
        /// Whether this is a `progress` event (those may be skipped for a slow watcher; others never).
        public var isProgress: Bool
        /// Whether another daemon sharing the store published it (`relay`), not this one.
        public var isRelayed: Bool
        /// The encoded line, with its trailing newline.
        public var line: [UInt8]
    }

    /// A subscriber's filter and connection.
    final class Subscriber {
        let connection: PipeConnection
        let jobs: Set<String>
        let kinds: Set<String>
        /// Only this daemon's own events, none `relay`ed from other daemons.
        let local: Bool
        var skippedProgress = 0
        /// Events of this loop iteration not yet written; flushed in one write after the iteration's I/O.
        var outbox: [UInt8] = []

        init(connection: PipeConnection, jobs: Set<String>, kinds: Set<String>, local: Bool) {
            self.connection = connection
            self.jobs = jobs
            self.kinds = kinds
            self.local = local
        }

        func wants(_ event: Event) -> Bool {
            (jobs.isEmpty || jobs.contains(event.job)) && (kinds.isEmpty || kinds.contains(event.kind))
                && !(local && event.isRelayed)
        }
    }

    /// Minimum seconds between two progress events of one job.
    public let progressInterval: Double
    /// Events kept for `--since` replay.
    public let replayCapacity: Int
    /// Queued bytes past which a subscriber gets no progress events.
    public let progressSkipBytes: Int
    /// Queued bytes past which a subscriber is disconnected.
    public let cutOffBytes: Int

    private(set) var nextSeq: Int64
    private var buffer: [Event] = []
    private var bufferStart = 0
    private var subscribers: [ObjectIdentifier: Subscriber] = [:]
    private var lastProgressAt: [String: Double] = [:]
    /// The latest coalesced progress of each job, kept as a value: its JSON is built only if it is published.
    private var pendingProgress: [String: (kind: String, progress: JobProgress)] = [:]
    /// The last gap announced (`announceGap`): the `seq` of the last event published before it, and its message.
    /// A watcher coming back with a `since` at or before that event was away when it was announced.
    private var lastGap: (afterSeq: Int64, message: String)?
    /// The `seq` of the last event published before the relay last started following other daemons' events
    /// (`relayStarted`): their events of the time before were never received, so a watcher that wants them and
    /// comes back with a `since` at or before it cannot be replayed all it missed.
    private var followedAfter: Int64?
    private var flushTimer: LoopTimer?
    private var dirty: [Subscriber] = []
    private var writer: CheckHandle?
    private var writeTimer: LoopTimer?
    /// Longest a progress event waits to share a write with others, in seconds.
    public let writeBatchInterval = 0.05

    /// The host every event this daemon publishes names (`host`), on a shared store (`nil`: no `host` member).
    public var host: String?

    /// Called with each event this daemon publishes itself (not those `relay`ed from other daemons), as its line:
    /// a shared store's `FeedRelay` sends them to the other daemons.
    public var onLocalEvent: ((PublishedEvent) -> Void)?

    /// On a shared store, the relay that publishes other daemons' events here: told when the subscribers that
    /// want them come and go (`wantsRelayedEvents`), so it follows those events only while someone wants them.
    weak var relay: FeedRelay?

    /// Whether some subscriber wants other daemons' events (it did not ask for this daemon's own only).
    var wantsRelayedEvents: Bool { subscribers.values.contains { !$0.local } }

    /// An event as this feed published it.
    public struct PublishedEvent: Sendable {
        /// The job it is about.
        public var job: String
        /// Whether it is a `progress` event (which a relay may coalesce).
        public var isProgress: Bool
        /// Its line without the newline: one JSON object, keys sorted, with this feed's `seq`.
        public var line: ArraySlice<UInt8>
    }

    /// Makes a feed whose first event has sequence number `firstSeq`.
    public init(
        firstSeq: Int64, progressInterval: Double = 0.25, replayCapacity: Int = 4_096,
        progressSkipBytes: Int = 256 * 1024, cutOffBytes: Int = 4 * 1024 * 1024
    ) {
        nextSeq = firstSeq
        self.progressInterval = progressInterval
        self.replayCapacity = replayCapacity
        self.progressSkipBytes = progressSkipBytes
        self.cutOffBytes = cutOffBytes
    }

    /// The sequence number of the last event published, or `firstSeq - 1`.
    public var lastSeq: Int64 { nextSeq - 1 }

    /// The events in the replay buffer, oldest first.
    var bufferedEvents: ArraySlice<Event> { buffer[bufferStart...] }

    /// The oldest sequence number still in the replay buffer, or `nil` if it is empty.
    public var oldestSeq: Int64? { buffer.isEmpty ? nil : buffer[bufferStart].seq }

    /// Publishes a `submitted` event.
    public func submitted(_ job: JobRecord) {
        publish(job: job.id, kind: job.kind, type: "submitted", fields: [("state", .value(.string(job.state.rawValue)))])
    }

    /// Publishes a `state` event (`from`, `to`, and the cancellation or error when relevant). Never dropped.
    public func stateChanged(_ job: JobRecord, from: JobState) {
        flushProgress(job: job.id)
        publish(job: job.id, kind: job.kind, type: "state", fields: Self.stateMembers(job, from: from))
        lastProgressAt[job.id] = nil
        onStateChange?()
    }

    /// The members of a `state` event of `job` (now in its new state) from state `from`, but the common ones
    /// (`seq`, `at`, `job`, `kind`, `type`).
    public static func stateFields(_ job: JobRecord, from: JobState) -> [String: JSONValue] {
        Dictionary(uniqueKeysWithValues: stateMembers(job, from: from).map { ($0.key.description, $0.value.json) })
    }

    /// `stateFields` as a list of members in ascending key order (no dictionary to build on the way to the
    /// encoded line).
    static func stateMembers(_ job: JobRecord, from: JobState) -> [Field] {
        var fields: [Field] = [("attempt", .value(.number(Double(job.attempt))))]
        fields.reserveCapacity(8)
        if let cancellation = job.cancellation, job.isStopped {
            fields.append(("cancellation", .value(JSONCoding.value(of: cancellation.redacted))))
        }
        if let error = job.error { fields.append(("error", .value(JSONCoding.value(of: error.redacted)))) }
        fields.append(("from", .value(.string(from.rawValue))))
        if job.state.isTerminal { fields.append(("result", .value(URLRedaction.json(job.result)))) }
        if let retryAt = job.retryAt, job.state == .needsRetry {
            fields.append(("retry_at", .value(.string(Timestamp.iso8601(unixSeconds: retryAt)))))
            fields.append(("retry_in_s", .value(.number(max(0, (retryAt - Timestamp.now()) * 10).rounded() / 10))))
        }
        fields.append(("to", .value(.string(job.state.rawValue))))
        return fields
    }

    /// One member of an event beyond the common ones (`at`, `host`, `job`, `kind`, `seq`, `type`).
    typealias Field = (key: StaticString, value: FieldValue)

    /// A member's value: any JSON value, or an object given as its members in ascending key order (a job's
    /// progress, written without building its dictionary).
    enum FieldValue {
        case value(JSONValue)
        case sortedObject([(key: String, value: JSONValue)])

        var json: JSONValue {
            switch self {
            case .value(let value): value
            case .sortedObject(let members): .object(Dictionary(uniqueKeysWithValues: members))
            }
        }
    }

    /// Publishes an event of another daemon sharing the store (`FeedRelay`): its members as that daemon published
    /// them (`at`, `job`, `kind`, `type`, `host`, …) under this feed's next `seq`, so a watcher of this daemon sees
    /// every daemon's events in one numbering. Not passed to `onLocalEvent`. An object without `job`, `kind` and
    /// `type` strings is ignored.
    public func relay(_ members: [String: JSONValue]) {
        guard let job = members["job"]?.stringValue, let kind = members["kind"]?.stringValue,
            let type = members["type"]?.stringValue
        else { return }
        var members = members
        members["seq"] = .number(Double(nextSeq))
        emit(job: job, kind: kind, isProgress: type == "progress", isRelayed: true, members: members)
    }

    /// Publishes an event of another daemon as `relay(_:)` does, from its line as it came (`RelayedLine`): the
    /// members copied as text, without `relay`, under this feed's next `seq`. A line without `job` and `kind`
    /// strings is ignored; `type` is the line's `type` member, which the caller has read.
    func relay(_ event: RelayedLine, type: String, without number: String) {
        guard let job = event.string("job"), let kind = event.string("kind") else { return }
        var line = event.published(seq: nextSeq, without: number)
        line.append(0x0A)
        emit(job: job, kind: kind, isProgress: type == "progress", isRelayed: true, line: line)
    }

    /// The relay starts following other daemons' events (again): those published before now were not received,
    /// and a subscriber that wants them and replays from before now is told so (`subscribe`).
    func relayStarted() {
        followedAfter = lastSeq
    }

    /// Called after every `state` event is published (the daemon's service status follows it).
    public var onStateChange: (() -> Void)?

    /// Publishes a `log` event (URLs in `message` without their secrets, `URLRedaction.text`).
    public func log(job: String, kind: String, level: LogLevel, message: String) {
        publish(job: job, kind: kind, type: "log", fields: [("level", .value(.string(level.rawValue))), ("message", .value(.string(URLRedaction.text(message))))])
    }

    /// Offers a `progress` event; published now, or coalesced into one published at most `progressInterval`
    /// after the previous one of this job.
    public func progress(job: String, kind: String, _ progress: JobProgress) {
        let now = Timestamp.monotonic()
        let last = lastProgressAt[job] ?? -.infinity
        if now - last >= progressInterval {
            pendingProgress[job] = nil
            lastProgressAt[job] = now
            publish(job: job, kind: kind, type: "progress", fields: [("progress", .sortedObject(progress.jsonMembers))])
        } else {
            pendingProgress[job] = (kind, progress)
            armFlush(after: last + progressInterval - now)
        }
    }

    /// How a `since` replay went (`subscribe`).
    public enum Replay: Equatable, Sendable {
        /// Every event after `since` that this daemon published was replayed, and none is known to be missing.
        case complete
        /// Events after `since` may be missing from the replay; the watcher should read its jobs again. `message`
        /// says why, for the `gap` line.
        case incomplete(message: String)
    }

    /// Adds a subscriber and replays the buffered events after `since` that match its filter. With `local`, it
    /// gets only this daemon's own events, none of other daemons sharing the store.
    ///
    /// On a shared store, call it for a subscriber that wants other daemons' events only once the relay follows
    /// them (`FeedRelay.follow`).
    ///
    /// - Returns: `.incomplete` if events after `since` have already left the buffer, if `since` is a number this
    ///   daemon never handed out, or, for a subscriber that wants other daemons' events, if a gap was announced
    ///   (`announceGap`) after event `since` (the watcher was away when it was, so the events this daemon never
    ///   received are missing from its replay too) or the relay did not follow them at event `since`
    ///   (`relayStarted`).
    @discardableResult
    public func subscribe(
        _ connection: PipeConnection, since: Int64?, jobs: Set<String>, kinds: Set<String>, local: Bool = false
    ) -> Replay {
        // The client may have hung up while its request waited its turn.
        guard !connection.isClosing else { return .complete }
        let subscriber = Subscriber(connection: connection, jobs: jobs, kinds: kinds, local: local)
        subscribers[ObjectIdentifier(connection)] = subscriber
        relay?.watchersChanged()
        guard let since else { return .complete }
        // A number this daemon has not handed out (another daemon's, from the shared sequence's block above this
        // one's): nothing can be replayed against it, so the watcher is told to refresh.
        guard since <= lastSeq else { return .incomplete(message: "seq \(since) was not handed out by this daemon; refresh with list") }
        // At most `cutOffBytes` of replay: a watcher that never reads holds no more than that, and one that does
        // reads the jobs again (the gap line) instead of the rest.
        // In one write: one buffer, not one (with libuv's request) per event.
        var replay: [UInt8] = []
        for event in buffer[bufferStart...] where event.seq > since && subscriber.wants(event) {
            guard replay.count + event.line.count <= cutOffBytes else {
                connection.write(replay)
                return .incomplete(
                    message: "the events after seq \(since) are more than \(cutOffBytes >> 20) MiB; replayed up to seq "
                        + "\(event.seq - 1), refresh with list")
            }
            replay += event.line
        }
        connection.write(replay)
        if !local, let lastGap, since <= lastGap.afterSeq { return .incomplete(message: lastGap.message) }
        // At the very `seq` following started, too: that number may have been handed out before it stopped.
        if !local, let followedAfter, since <= followedAfter {
            return .incomplete(
                message: "this daemon did not follow other daemons' events before seq \(followedAfter + 1) (no watcher "
                    + "wanted them); refresh with list")
        }
        guard (oldestSeq ?? nextSeq) <= since + 1 else {
            return .incomplete(message: "events after seq \(since) are no longer buffered; refresh with list")
        }
        return .complete
    }

    /// Tells every subscriber that wants other daemons' events that some may be missing, after the events
    /// already published: the `gap` line a `since` that cannot be replayed gets (`gapLine`), on which watchers read
    /// the jobs again. For events this daemon never received (another daemon's, sent while the shared store's
    /// connection was down); subscribers of this daemon's own events (`local`) missed nothing. Not numbered or kept
    /// for replay: it is about this moment, not about a job; but a later `subscribe` with a `since` before it gets
    /// it (the last one announced) after its replay.
    public func announceGap(_ message: String) {
        lastGap = (lastSeq, message)
        let line = Self.gapLine(message)
        var told = false
        for subscriber in subscribers.values where !subscriber.local {
            enqueue(line, for: subscriber)
            told = true
        }
        if told { scheduleWrite() }
    }

    /// The feed's `gap` line, `{"type": "gap", "message": …}` and a newline (docs/reference/protocol.md, "The feed").
    nonisolated public static func gapLine(_ message: String) -> [UInt8] {
        JSONCoding.encode(["type": "gap", "message": .string(message)] as JSONValue) + [0x0A]
    }

    /// Removes a subscriber (its connection closed).
    public func unsubscribe(_ connection: PipeConnection) {
        guard subscribers.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        relay?.watchersChanged()
    }

    /// The number of subscribers.
    public var subscriberCount: Int { subscribers.count }

    /// Drops every subscriber and the flush timer (daemon shutdown).
    public func close() {
        flushTimer?.close()
        flushTimer = nil
        writeDirty()
        writer?.close()
        writer = nil
        writeTimer?.close()
        writeTimer = nil
        for subscriber in subscribers.values { subscriber.connection.closeAfterWriting() }
        subscribers.removeAll()
    }

    private func flushProgress(job: String) {
        guard let pending = pendingProgress.removeValue(forKey: job) else { return }
        lastProgressAt[job] = Timestamp.monotonic()
        publish(job: job, kind: pending.kind, type: "progress", fields: [("progress", .sortedObject(pending.progress.jsonMembers))])
    }

    private func armFlush(after seconds: Double) {
        let timer = flushTimer ?? LoopTimer(loop: .main)
        flushTimer = timer
        guard !timer.isActive else { return }
        timer.start(milliseconds: max(1, LoopTimer.milliseconds(seconds))) { [weak self] in
            self?.flushDue()
        }
    }

    private func flushDue() {
        let now = Timestamp.monotonic()
        var nextDue = Double.infinity
        for (job, _) in pendingProgress {
            let due = (lastProgressAt[job] ?? 0) + progressInterval
            if due <= now + 0.001 { flushProgress(job: job) } else { nextDue = min(nextDue, due) }
        }
        if nextDue.isFinite { armFlush(after: nextDue - now) }
    }

    /// `fields`: the event's own members (distinct keys, none of the common ones), in ascending key order.
    ///
    /// The line is written member by member in key order (`JSONObjectWriter`), the common members merged in
    /// where they sort: the same bytes as encoding the object, without building and sorting a member list (the
    /// feed's four events a job were a sixth of the daemon's instructions per no-op job, issue 14).
    private func publish(job: String, kind: String, type: String, fields: [Field]) {
        let at = Timestamp.nowISO8601()
        var line = EventLine(fields: fields)
        line.member("at", string: at)
        if let host { line.member("host", string: host) }
        line.member("job", string: job)
        line.member("kind", string: kind)
        line.member("seq", integer: nextSeq)
        line.member("type", string: type)
        let bytes = line.finish()
        let isProgress = type == "progress"
        if let onLocalEvent, bytes.first == UInt8(ascii: "{") {
            onLocalEvent(PublishedEvent(job: job, isProgress: isProgress, line: bytes.dropLast()))
        }
        emit(job: job, kind: kind, isProgress: isProgress, line: bytes)
    }

    /// An event's line: the common members, written in order by `publish`, merged with the event's own.
    private struct EventLine {
        private var writer = JSONObjectWriter()
        private let fields: [Field]
        private var next = 0

        init(fields: [Field]) { self.fields = fields }

        /// Writes the event's own members that sort before `key`.
        private mutating func fields(before key: StaticString) {
            while next < fields.count, Self.precedes(fields[next].key, key) {
                switch fields[next].value {
                case .value(let value): writer.member(fields[next].key, value)
                case .sortedObject(let members): writer.member(fields[next].key, sortedObject: members)
                }
                next += 1
            }
        }

        mutating func member(_ key: StaticString, string: String) {
            fields(before: key)
            writer.member(key, string: string)
        }

        mutating func member(_ key: StaticString, integer: Int64) {
            fields(before: key)
            writer.member(key, integer: integer)
        }

        /// The line with its newline; `null` (as `JSONCoding.encode` gives) if a number was not finite.
        consuming func finish() -> [UInt8] {
            fields(before: "\u{7F}")
            guard writer.isValid else { return Array("null\n".utf8) }
            return writer.finish(appending: 0x0A)
        }

        private static func precedes(_ a: StaticString, _ b: StaticString) -> Bool {
            a.withUTF8Buffer { a in b.withUTF8Buffer { b in a.lexicographicallyPrecedes(b) } }
        }
    }

    private func emit(job: String, kind: String, isProgress: Bool, isRelayed: Bool, members: [String: JSONValue]) {
        var line = JSONCoding.encode(members: Array(members.lazy.map { (key: $0.key, value: $0.value) }))
        line.append(0x0A)
        emit(job: job, kind: kind, isProgress: isProgress, isRelayed: isRelayed, line: line)
    }

    private func emit(job: String, kind: String, isProgress: Bool, isRelayed: Bool = false, line: [UInt8]) {
        let event = Event(seq: nextSeq, job: job, kind: kind, isProgress: isProgress, isRelayed: isRelayed, line: line)
        nextSeq += 1
        append(event)
        for subscriber in subscribers.values where subscriber.wants(event) {
            deliver(event, to: subscriber)
        }
    }

    private func deliver(_ event: Event, to subscriber: Subscriber) {
        // A write to it failed: it is gone. Its hang-up is not always read (it half-closed before it watched,
        // `nc -N`), and on a shared store it would keep the daemon following the other daemons' events.
        if subscriber.connection.writeFailed {
            unsubscribe(subscriber.connection)
            subscriber.connection.close()
            return
        }
        let queued = subscriber.connection.pendingWriteBytes + subscriber.outbox.count
        if queued > cutOffBytes {
            unsubscribe(subscriber.connection)
            subscriber.connection.close()
            DaemonLog.write(
                "dropped a watcher that left more than \(cutOffBytes >> 20) MiB of events unread; it may connect again "
                    + "with --since")
            return
        }
        if event.isProgress && queued > progressSkipBytes {
            subscriber.skippedProgress += 1
            return
        }
        enqueue(event.line, for: subscriber)
        if event.isProgress {
            scheduleBatchedWrite()
        } else {
            scheduleWrite()
        }
    }

    /// Adds `line` to the subscriber's outbox, written by the next `writeDirty`.
    private func enqueue(_ line: [UInt8], for subscriber: Subscriber) {
        if subscriber.outbox.isEmpty { dirty.append(subscriber) }
        subscriber.outbox += line
    }

    /// Writes every subscriber's pending events in one write each once this loop iteration's I/O is done: state
    /// and log events go out with no added delay.
    private func scheduleWrite() {
        let writer = self.writer ?? CheckHandle(loop: .main)
        self.writer = writer
        writer.start { [weak self] in self?.writeDirty() }
    }

    /// Progress events wait up to `writeBatchInterval` so that one write carries those of many jobs: with 50 jobs
    /// and 20 watchers this turns about 4 500 writes a second into about 400, at the cost of that much latency.
    private func scheduleBatchedWrite() {
        let timer = self.writeTimer ?? LoopTimer(loop: .main)
        self.writeTimer = timer
        guard !timer.isActive else { return }
        timer.start(milliseconds: UInt64(writeBatchInterval * 1000)) { [weak self] in self?.writeDirty() }
    }

    private func writeDirty() {
        let batch = dirty
        dirty.removeAll(keepingCapacity: true)
        for subscriber in batch where !subscriber.outbox.isEmpty {
            subscriber.connection.write(subscriber.outbox)
            subscriber.outbox.removeAll(keepingCapacity: true)
        }
        writer?.stop()
        writeTimer?.stop()
    }

    private func append(_ event: Event) {
        buffer.append(event)
        if buffer.count - bufferStart > replayCapacity {
            bufferStart += 1
            if bufferStart > replayCapacity {
                buffer.removeFirst(bufferStart)
                bufferStart = 0
            }
        }
    }
}
