import TrailbookLoop

/// The live feed across daemons sharing a store (docs/explanation/shared-store.md, "The feed across daemons"): sends the
/// events this daemon publishes to the others, and publishes theirs on this daemon's feed, so a watcher of any
/// daemon sees every host's jobs.
///
/// Sending: events are collected and sent in one store request (`LeasingJobStoring.publishFeed`: one transaction
/// of `NOTIFY trailbook_feed`, each payload at most `payloadBytes`), at most one request in flight and at most one
/// every `minimumInterval` seconds, so a busy daemon sends a few dozen notifications a second, not one per event.
/// Within a batch a job's progress is coalesced to its latest (the feed already coalesces it to one per job per
/// 0.25 s); `submitted`, `state` and `log` events are never coalesced or dropped, and keep their order. A batch the
/// store refuses (it is unreachable) is kept and sent again after `retrySeconds`, without its progress, up to
/// `maxPending` events.
///
/// An event whose line would not fit in one payload is made to: a `state` event is sent without its `result`,
/// `error`, `cancellation` and retry members and with `"reread": true`, and the receiving daemon fills them in from
/// the job's row (as `ProgressFeed.stateFields` makes them); a `log` message is cut; a progress event is dropped.
///
/// Receiving: each payload of another daemon is published in its order under this feed's own `seq` numbers
/// (`ProgressFeed.relay`): `seq` keeps meaning "this daemon's order of delivery", and `host` says where the job is.
///
/// Following: the relay receives other daemons' events only while one of this daemon's watchers wants them (every
/// watcher but those of this daemon's own events, `ProgressFeed.subscribe(local:)`) and for `followLinger` seconds
/// after the last one left (so a watcher back with `since` soon after finds its replay whole): with nobody watching
/// a daemon for them, the others' events cost it nothing (each daemon reading every other's feed is work that
/// grows with the square of the daemons). A watcher that wants them is added once the store follows
/// (`follow`), so that no event committed after its `watch` is answered passes it by.
@LoopActor
public final class FeedRelay {
    /// PostgreSQL refuses a NOTIFY payload of 8 000 bytes or more; the store adds a header line of under 100.
    nonisolated public static let payloadBytes = 7_800
    /// Fewest seconds between the starts of two sends.
    public let minimumInterval: Double
    /// How long progress waits to share a send with other events, in seconds.
    public let progressDelay: Double
    /// Seconds before a refused (or unanswered) send is tried again.
    public let retrySeconds = 1.0
    /// Events kept while the store refuses sends; past it the oldest eighth is dropped (and the drop is logged).
    public let maxPending = 20_000
    /// Seconds the relay goes on following other daemons' events after the last watcher that wanted them left.
    public let followLinger: Double
    /// Longest a watcher waits for the store to start following (`follow`) before it is added anyway, in seconds;
    /// if the store answers later, the watchers added meanwhile get a `gap` line.
    public let followWait = 2.0

    private var store: any LeasingJobStoring
    private let feed: ProgressFeed
    /// Events not sent yet, oldest first.
    private var pending: [Outgoing] = []
    /// Where each job's latest progress waits in `pending`, while no other event of that job follows it.
    private var progressAt: [String: Int] = [:]
    private var sending = false
    /// Which send is in flight: an answer that comes after its timeout belongs to an older one and is ignored.
    private var generation = 0
    private var lastSendAt = -Double.infinity
    private var timer: LoopTimer?
    private var timerDue = 0.0
    private var check: CheckHandle?
    private var timeout: LoopTimer?
    private var dropped = 0
    /// Set by `close`: the daemon is stopping; what is pending goes in one last send, no retries.
    private var closing = false
    /// `close`'s wait, resumed when the last send is answered or its time is up.
    private var closeWaiter: CheckedContinuation<Void, Never>?
    /// Numbers the events sent, and drops copies of those received again (a send retried after its answer was lost).
    private var numbering: RelayedEventNumbering
    /// Which other daemons were started again since this one heard from them.
    private var restarts = RestartedDaemons()
    /// Whether other daemons' events are received (see the type's documentation).
    private var following = Following.off
    /// Runs while following with no watcher that wants the events: stops following when it fires.
    private var linger: LoopTimer?
    /// Runs while the store is asked to follow: the waiting watchers are added when it fires.
    private var followWaitTimer: LoopTimer?

    /// Whether the store delivers other daemons' events to this relay.
    enum Following {
        /// Not asked; payloads that still come are dropped.
        case off
        /// Asked; the watchers waiting to be added (`follow`) are resumed once the store has done it.
        case starting(waiters: [CheckedContinuation<Void, Never>])
        /// Following.
        case on
    }

    /// The type of the event every relay sends first, once it starts: it tells the others this daemon runs (under
    /// a new origin, if it ran before: `RestartedDaemons`). Never published on a feed.
    nonisolated static let startedType = "relay_started"

    /// Relays `feed`'s events through `store` and `store`'s events of other daemons to `feed`: sets
    /// `feed.onLocalEvent` and `store.onFeed`, and sends the relay's first event (`startedType`).
    /// - Parameter instance: what names this daemon across its restarts among those sharing the store (its socket
    ///   path; the store's host is added); a daemon restarted under the same one makes the others announce a gap.
    public init(
        store: any LeasingJobStoring, feed: ProgressFeed, instance: String = "", minimumInterval: Double = 0.025,
        progressDelay: Double = 0.1, followLinger: Double = 30
    ) {
        self.store = store
        self.feed = feed
        self.minimumInterval = minimumInterval
        self.progressDelay = progressDelay
        self.followLinger = followLinger
        numbering = RelayedEventNumbering(instance: instance.isEmpty ? "" : store.host + " " + instance)
        feed.host = store.host
        feed.onLocalEvent = { [weak self] members in self?.add(members) }
        self.store.onFeed = { [weak self] payload in LoopIsolation.assume { self?.received(payload) } }
        feed.relay = self
        self.store.onFeedInterrupted = { [weak self, weak feed] in
            LoopIsolation.assume {
                guard let self, case .on = self.following else { return }
                feed?.announceGap(
                    "the connection to the shared job store was lost for a while: other daemons' events of that time "
                        + "were missed; refresh with list")
            }
        }
        if !instance.isEmpty {
            // Before the first payload: daemons that start following later know this run (`RestartedDaemons`).
            self.store.registerRelay(instance: numbering.instance, origin: numbering.origin)
            let started = JSONCoding.encode(JSONValue.object(["type": .string(Self.startedType), "host": .string(store.host)]))
            pending.append(Outgoing(job: nil, isProgress: false, number: numbering.next(), line: started[...]))
            arm(after: 0)
        }
    }

    /// Stops relaying (daemon shutdown) and sends what is pending: after the send in flight, if any, the events
    /// that came meanwhile (the jobs' last ones: stopped, back in the queue) go in one last send. Waits for its
    /// answer at most `seconds` in all, so an unreachable store cannot hold the shutdown; a refused send is not
    /// tried again.
    public func close(waitingAtMost seconds: Double = 0.5) async {
        linger?.close()
        linger = nil
        followWaitTimer?.close()
        followWaitTimer = nil
        feed.relay = nil
        if case .starting(let waiters) = following {
            for waiter in waiters { waiter.resume() }
        }
        following = .off
        feed.onLocalEvent = nil
        store.onFeed = nil
        store.onFeedInterrupted = nil
        closing = true
        if !sending { send() }
        if sending {
            let deadline = LoopTimer(loop: .main)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                closeWaiter = continuation
                deadline.start(seconds: seconds) { [weak self] in self?.resumeClose() }
            }
            deadline.close()
        }
        timer?.close()
        timer = nil
        check?.close()
        check = nil
        timeout?.close()
        timeout = nil
    }

    // MARK: sending

    /// An event waiting to be sent: the line this daemon published, and the relay's number for it.
    private struct Outgoing {
        var job: String?
        var isProgress: Bool
        var number: String
        var line: ArraySlice<UInt8>
    }

    private func add(_ event: ProgressFeed.PublishedEvent) {
        let job = event.job
        if event.isProgress, let index = progressAt[job] {
            // It takes the place and the number of the progress it replaces: numbers must rise in the order they
            // are sent, or the receiving daemons would drop every event between as a copy (a state change too).
            pending[index].line = event.line
            return
        }
        let isProgress = event.isProgress
        progressAt[job] = isProgress ? pending.count : nil
        pending.append(Outgoing(job: job, isProgress: isProgress, number: numbering.next(), line: event.line))
        if pending.count > maxPending { dropOldest() }
        arm(after: isProgress ? progressDelay : 0)
    }

    /// Drops the oldest events down to seven eighths of `maxPending`, not just the one over it: the drop and its
    /// reindex are O(`maxPending`), so dropping one event at a time made a full relay cost that much per event
    /// (quadratic over a 100 000-job batch submitted while the store refused) and logged once per event.
    private func dropOldest() {
        let excess = pending.count - (maxPending - maxPending / 8)
        pending.removeFirst(excess)
        dropped += excess
        reindex()
        DaemonLog.write("feed relay: the shared store refuses the feed's notifications; dropped the \(dropped) oldest events so far")
    }

    private func reindex() {
        progressAt.removeAll(keepingCapacity: true)
        for (index, event) in pending.enumerated() {
            guard let job = event.job else { continue }
            progressAt[job] = event.isProgress ? index : nil
        }
    }

    /// Sends within `delay` seconds (0: once this loop turn's work is done), no sooner than `minimumInterval` after
    /// the last send started.
    private func arm(after delay: Double) {
        guard !sending else { return }
        let wait = max(delay, lastSendAt + minimumInterval - Timestamp.monotonic())
        if wait <= 0 {
            let check = self.check ?? CheckHandle(loop: .main)
            self.check = check
            check.start { [weak self] in self?.send() }
            return
        }
        let timer = self.timer ?? LoopTimer(loop: .main)
        self.timer = timer
        // An armed timer due sooner stays (progress coming all the time must not put the send off); one due
        // later is brought forward.
        let due = Timestamp.monotonic() + wait
        if timer.isActive && timerDue <= due { return }
        timer.stop()
        timerDue = due
        timer.start(milliseconds: max(1, LoopTimer.milliseconds(wait))) { [weak self] in self?.send() }
    }

    private func send() {
        check?.stop()
        timer?.stop()
        guard !sending, !pending.isEmpty else { return }
        let events = pending
        pending.removeAll(keepingCapacity: true)
        progressAt.removeAll(keepingCapacity: true)
        let payloads = Self.payloads(events.map { ($0.number, $0.line) })
        guard !payloads.isEmpty else { return }
        sending = true
        lastSendAt = Timestamp.monotonic()
        generation += 1
        let sent = generation
        let timeout = self.timeout ?? LoopTimer(loop: .main)
        self.timeout = timeout
        timeout.start(seconds: 15) { [weak self] in self?.finished(sent, events, ok: false) }
        store.publishFeed(payloads) { [weak self] ok in
            LoopIsolation.assume { self?.finished(sent, events, ok: ok) }
        }
    }

    private func finished(_ sent: Int, _ events: [Outgoing], ok: Bool) {
        guard sending, sent == generation else { return }
        sending = false
        timeout?.stop()
        if closing {
            if ok { send() }
            if !sending { resumeClose() }
            return
        }
        if !ok {
            // Kept for the next try, before what came meanwhile; progress is stale by then and goes.
            pending = events.filter { !$0.isProgress } + pending
            if pending.count > maxPending { dropOldest() } else { reindex() }
            if !pending.isEmpty { arm(after: retrySeconds) }
            return
        }
        if !pending.isEmpty { arm(after: 0) }
    }

    private func resumeClose() {
        closeWaiter?.resume()
        closeWaiter = nil
    }

    /// `events` as NOTIFY payload bodies: their JSON lines, newline-separated, in order, each body at most
    /// `payloadBytes` (an event too big for one alone is shrunk as the type says, or left out if it is progress).
    nonisolated public static func payloads(_ events: [[String: JSONValue]], limit: Int = payloadBytes) -> [String] {
        payloads(events.map { (nil, JSONCoding.encode(JSONValue.object($0))[...]) }, limit: limit)
    }

    /// `events` (each a line as `ProgressFeed` published it, and its relay number if it has one) as NOTIFY
    /// payload bodies: each line with the number spliced in as its first member (`RelayedEventNumbering.member`),
    /// the rest of its text as it was, so an event is not decoded and encoded again to be sent.
    nonisolated static func payloads(_ events: [(number: String?, line: ArraySlice<UInt8>)], limit: Int = payloadBytes) -> [String] {
        var bodies: [String] = []
        var body: [UInt8] = []
        for (number, published) in events {
            guard let line = numbered(published, number, limit: limit) else { continue }
            if !body.isEmpty && body.count + 1 + line.count > limit {
                bodies.append(String(decoding: body, as: UTF8.self))
                body.removeAll(keepingCapacity: true)
            }
            if !body.isEmpty { body.append(0x0A) }
            body += line
        }
        if !body.isEmpty { bodies.append(String(decoding: body, as: UTF8.self)) }
        return bodies
    }

    /// `line` (a JSON object) with `number` as its first member, if that fits `limit` bytes; else decoded and
    /// `fitted`.
    nonisolated private static func numbered(_ line: ArraySlice<UInt8>, _ number: String?, limit: Int) -> [UInt8]? {
        guard line.first == UInt8(ascii: "{") else { return nil }
        var numbered: [UInt8] = []
        if let number {
            numbered.reserveCapacity(line.count + number.utf8.count + 16)
            numbered += Array("{\"\(RelayedEventNumbering.member)\":".utf8)
            numbered += JSONCoding.encode(JSONValue.string(number))
            if line.count > 2 { numbered.append(UInt8(ascii: ",")) }
            numbered += line.dropFirst()
        } else {
            numbered += line
        }
        if numbered.count <= limit { return numbered }
        guard case .object(let members)? = try? JSONParser.parse(numbered) else { return nil }
        return fitted(members, limit: limit)
    }

    /// The event's line, shrunk to fit `limit` bytes if need be; `nil` if it cannot be (progress).
    nonisolated static func fitted(_ members: [String: JSONValue], limit: Int) -> [UInt8]? {
        let line = JSONCoding.encode(JSONValue.object(members))
        if line.count <= limit { return line }
        var shrunk = members
        switch members["type"]?.stringValue {
        case "state":
            for name in ["result", "error", "cancellation", "retry_at", "retry_in_s"] { shrunk[name] = nil }
            shrunk["reread"] = true
        case "log":
            let message = members["message"]?.stringValue ?? ""
            // A character is at most 6 bytes as JSON (a \u escape), so this fits whatever the text.
            shrunk["message"] = .string(String(message.prefix(max(0, (limit - 600) / 6))) + "…")
        default:
            return nil
        }
        let again = JSONCoding.encode(JSONValue.object(shrunk))
        return again.count <= limit ? again : nil
    }

    // MARK: following

    /// Returns once the store follows other daemons' events (at once if it does; else after asking it, at most
    /// `followWait` seconds): a watcher that wants them is added to the feed after this.
    public func follow() async {
        linger?.stop()
        if case .on = following { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            switch following {
            case .on:
                continuation.resume()
            case .starting(var waiters):
                // The store has not answered within `followWait` of being asked (the waiters were added): this
                // watcher is added at once too, and gets the `gap` line with them once it answers.
                guard followWaitTimer?.isActive == true else { return continuation.resume() }
                waiters.append(continuation)
                following = .starting(waiters: waiters)
            case .off:
                following = .starting(waiters: [continuation])
                store.followFeed(true) { [weak self] relays in
                    LoopIsolation.assume { self?.followed(knowing: relays ?? [:]) }
                }
                let wait = followWaitTimer ?? LoopTimer(loop: .main)
                followWaitTimer = wait
                wait.start(seconds: followWait) { [weak self] in self?.resumeWaiters() }
            }
        }
    }

    /// The store follows: events from now on are received. `relays`: every daemon's current run as the store has
    /// it (origin by instance). Watchers added before it answered (`followWait`) may have missed some and are
    /// told so.
    private func followed(knowing relays: [String: String]) {
        guard case .starting(let waiters) = following else { return }
        following = .on
        followWaitTimer?.stop()
        // Every daemon's current run, heard or not, so that its next run heard is a restart: one killed before it
        // sends again (a job's end committed, its NOTIFY never sent) must not look like a first start, or the
        // watchers would wait for that end for good. The daemons heard from before a pause are kept too, for a
        // store that could not say.
        for (instance, origin) in relays where instance != numbering.instance {
            restarts.know(instance: instance, origin: origin)
        }
        feed.relayStarted()
        if feed.wantsRelayedEvents {
            feed.announceGap("this daemon was slow to start following other daemons' events; refresh with list")
        }
        DaemonLog.write("feed relay: following the other daemons' events (a watcher wants them)")
        for waiter in waiters { waiter.resume() }
        watchersChanged()
    }

    /// Resumes the watchers still waiting for the store to follow (it has not answered in `followWait`).
    private func resumeWaiters() {
        guard case .starting(let waiters) = following, !waiters.isEmpty else { return }
        following = .starting(waiters: [])
        for waiter in waiters { waiter.resume() }
    }

    /// The feed's subscribers changed: with none wanting other daemons' events, following stops after
    /// `followLinger` seconds (unless one comes meanwhile).
    func watchersChanged() {
        guard case .on = following else { return }
        guard !feed.wantsRelayedEvents else {
            linger?.stop()
            return
        }
        let linger = self.linger ?? LoopTimer(loop: .main)
        self.linger = linger
        guard !linger.isActive else { return }
        linger.start(seconds: followLinger) { [weak self] in self?.stopFollowing() }
    }

    private func stopFollowing() {
        guard case .on = following, !feed.wantsRelayedEvents else { return }
        following = .off
        store.followFeed(false) { _ in }
        DaemonLog.write(
            "feed relay: stopped following the other daemons' events (no watcher wanted them for "
                + "\(Scheduler.seconds(followLinger)))")
    }

    // MARK: receiving

    private func received(_ payload: String) {
        if case .off = following { return }
        let bytes = Array(payload.utf8)
        for text in bytes.split(separator: 0x0A) {
            guard let line = RelayedLine(text), let sender = numbering.received(stamp: line.string(RelayedEventNumbering.member))
            else { continue }
            if let instance = sender.instance, let origin = sender.origin,
                restarts.heard(instance: instance, origin: origin)
            {
                let host = line.string("host") ?? "another host"
                feed.announceGap(
                    "a daemon on \(host) was started again: events it had not sent before it stopped may have been "
                        + "missed; refresh with list")
            }
            guard let type = line.string("type"), type != Self.startedType else { continue }
            if line.has("reread"), var members = line.decoded() {
                members[RelayedEventNumbering.member] = nil
                feed.relay(reread(members))
            } else {
                feed.relay(line, type: type, without: RelayedEventNumbering.member)
            }
        }
    }

    /// A `state` event sent without its larger members: filled in from the job's row if it is still in the state
    /// the event names (else sent on as it came, `reread` and all).
    private func reread(_ members: [String: JSONValue]) -> [String: JSONValue] {
        guard let id = members["job"]?.stringValue, let to = members["to"]?.stringValue,
            let job = try? store.job(id: id), job.state.rawValue == to
        else { return members }
        let from = members["from"]?.stringValue.flatMap(JobState.init(rawValue:)) ?? job.state
        var filled = members
        filled["reread"] = nil
        for (name, value) in ProgressFeed.stateFields(job, from: from) { filled[name] = value }
        return filled
    }
}
