import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// `watch` on a terminal: the feed drawn as a screen of job rows (`WatchScreen`), redrawn in place at most
/// `maxFramesPerSecond` times a second whatever the event rate, with keys to cancel, pause and resume.
///
/// One `poll` loop waits on the feed socket, the keyboard, the signal self-pipe and any control request in
/// flight; nothing blocks on the daemon except reading the rest of a line already arriving. If the daemon goes
/// away the screen says so and keeps trying to reconnect (with `since` the last event seen), then refreshes its
/// rows from `list`/`show` and carries on.
final class LiveWatch {
    /// What to show.
    struct Scope {
        /// Only these jobs (full ids); empty for all.
        var jobs: [String] = []
        /// Only jobs of these kinds; empty for all.
        var kinds: [String] = []
        /// Follow this one job until it ends, then return its exit code (`submit --watch`).
        var follow: String?
    }

    /// Redraws per second, at most.
    static let maxFramesPerSecond = 10.0

    private let context: CommandContext
    private let scope: Scope
    private var subscription: Watch.Subscription?
    private var screen: WatchScreen
    private let terminal: Terminal
    private let color: Bool
    private var lastFrame: [String] = []
    private var lastDrawAt = -Double.infinity
    private var dirty = true
    /// The window changed size since the last frame.
    private var resized = false
    private var nextReconnectAt = 0.0
    private var noticeUntil: Double?
    private var confirmingCancel: String?
    /// Control requests in flight: the connection and what to say when the reply comes.
    private var pending: [(client: DaemonClient, verb: String, job: String)] = []

    private init(context: CommandContext, scope: Scope, subscription: Watch.Subscription, expand: Bool) {
        self.context = context
        self.scope = scope
        self.subscription = subscription
        screen = WatchScreen(expand: expand)
        color = Terminal.supportsColor(environment: context.environment)
        terminal = Terminal()
    }

    /// Shows the screen until `q`, Ctrl-C or SIGTERM (exit 0, 130, 143), or until the followed job ends (its
    /// exit code: 0 succeeded, 1 otherwise).
    static func run(
        _ context: CommandContext, scope: Scope, subscription: Watch.Subscription, expand: Bool
    ) throws -> Int32 {
        let watch = LiveWatch(context: context, scope: scope, subscription: subscription, expand: expand)
        watch.refresh()
        let outcome = watch.loop()
        watch.draw(force: true)
        watch.terminal.restore()
        if let id = scope.follow, let row = watch.screen.rows[id] {
            let job = (try? context.call(["op": "show", "job": .string(id)]))?["job"]
            if let job { print(JobText.summary(job)) }
            if row.state.isTerminal { return row.state == .succeeded ? ExitCode.success : ExitCode.jobFailed }
        }
        return outcome
    }

    private func now() -> Double { Timestamp.now() }

    // MARK: - The loop

    private func loop() -> Int32 {
        // Keys come from stdin while it is open; at its end it stays readable for ever, and polling it would spin.
        var keysOpen = true
        while true {
            if let id = scope.follow, screen.rows[id]?.state.isTerminal == true { return ExitCode.success }
            // `watch ID…` ends once every job named has ended.
            if scope.follow == nil, !scope.jobs.isEmpty,
                scope.jobs.allSatisfy({ screen.rows[$0]?.state.isTerminal == true })
            {
                draw(force: true)
                return ExitCode.success
            }
            let now = self.now()
            if let until = noticeUntil, now >= until {
                screen.notice = nil
                noticeUntil = nil
                dirty = true
            }
            if subscription == nil, now >= nextReconnectAt { reconnect() }
            let frameGap = 1 / Self.maxFramesPerSecond
            let dueAt = dirty ? lastDrawAt + frameGap : lastDrawAt + 1
            if now >= dueAt {
                draw(force: !dirty)
            }
            var timeout = max(0, (dirty ? lastDrawAt + frameGap : lastDrawAt + 1) - self.now())
            if subscription == nil { timeout = min(timeout, max(0, nextReconnectAt - self.now())) }

            var fds = [
                pollfd(fd: keysOpen ? STDIN_FILENO : -1, events: Int16(POLLIN), revents: 0),
                pollfd(fd: terminal.signalDescriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: subscription?.client.fileDescriptor ?? -1, events: Int16(POLLIN), revents: 0),
            ]
            for request in pending { fds.append(pollfd(fd: request.client.fileDescriptor, events: Int16(POLLIN), revents: 0)) }
            let ready: Int32
            if let subscription, subscription.client.waitReadable(timeoutSeconds: 0) {
                ready = 1
                fds[2].revents = Int16(POLLIN)
            } else {
                ready = poll(&fds, nfds_t(fds.count), Int32((timeout * 1000).rounded(.up)))
            }
            if ready <= 0 { continue }

            if fds[1].revents != 0 {
                for signal in terminal.pendingSignals() {
                    switch signal {
                    case .resize:
                        dirty = true
                        resized = true
                    case .interrupt: return 130
                    case .terminate: return 143
                    }
                }
            }
            if fds[0].revents != 0 {
                if let keys = terminal.readKeys() {
                    if let code = handleKeys(keys) { return code }
                } else {
                    keysOpen = false
                }
            }
            if fds[2].revents != 0 { readFeed() }
            for (index, fd) in fds.enumerated().dropFirst(3) where fd.revents != 0 {
                finishRequest(at: index - 3)
                break  // indices shift; the rest are seen on the next turn
            }
        }
    }

    private func draw(force: Bool) {
        let (columns, rows) = terminal.size()
        let lines = screen.render(width: columns, height: rows, now: now()).map { WatchScreen.encode($0, color: color) }
        lastDrawAt = now()
        dirty = false
        if !force, !resized, lines == lastFrame { return }
        lastFrame = lines
        terminal.draw(lines, clearFirst: resized)
        resized = false
    }

    // MARK: - The feed

    private func readFeed() {
        guard let subscription else { return }
        repeat {
            let event: JSONValue?
            do {
                event = try subscription.client.readLine()
            } catch {
                event = nil
            }
            guard let event else {
                lostDaemon()
                return
            }
            if let seq = event["seq"]?.intValue { subscription.lastSeq = seq }
            apply(event)
        } while subscription.client.waitReadable(timeoutSeconds: 0)
    }

    private func apply(_ event: JSONValue) {
        // Events after our last one are no longer buffered (typically: the daemon restarted). The rows are read
        // again from the daemon instead, so nothing is stale and there is nothing to warn about.
        if event["type"]?.stringValue == "gap" {
            refresh()
            dirty = true
            return
        }
        if let id = event["job"]?.stringValue {
            if let follow = scope.follow, id != follow { return }
            if !screen.knows(id), let job = try? context.call(["op": "show", "job": .string(id)])["job"] {
                screen.apply(job: job, now: now())
            }
        }
        screen.apply(event: event, now: now())
        dirty = true
    }

    private func lostDaemon() {
        lastSeq = subscription?.lastSeq ?? lastSeq
        subscription = nil
        setNotice("lost the daemon; reconnecting…", for: nil)
        nextReconnectAt = now() + 0.5
    }

    private func reconnect() {
        guard
            let fresh = try? Watch.subscribe(
                context, jobs: scope.follow.map { [$0] } ?? scope.jobs, kinds: scope.kinds, since: lastSeq)
        else {
            nextReconnectAt = now() + 0.5
            return
        }
        subscription = fresh
        setNotice("the daemon restarted; reconnected", for: 3)
        refresh()
    }

    /// The last sequence number seen, kept across connections.
    private var lastSeq: Int64?

    /// Reads the jobs in scope from the daemon (`list`, or `show` per job) and refreshes their rows.
    private func refresh() {
        lastSeq = subscription?.lastSeq ?? lastSeq
        var jobs: [JSONValue] = []
        let explicit = scope.follow.map { [$0] } ?? scope.jobs
        if !explicit.isEmpty {
            for id in explicit {
                if let job = try? context.call(["op": "show", "job": .string(id)])["job"] { jobs.append(job) }
            }
        } else {
            let active: JSONValue = .array(["queued", "running", "paused", "needs_retry"])
            for kind in scope.kinds.isEmpty ? [nil] : scope.kinds.map(Optional.some) {
                var request: [String: JSONValue] = ["op": "list", "states": active]
                if let kind { request["kind"] = .string(kind) }
                let reply = try? context.call(.object(request))
                jobs += reply?["jobs"]?.arrayValue ?? []
                // The daemon's counters, for the summary (all kinds: only when not filtering by kind).
                if scope.kinds.isEmpty, case .object(let counts)? = reply?["counts"] {
                    screen.activeCounts = counts.reduce(into: [:]) { result, entry in
                        if let state = JobState(rawValue: entry.key), let count = entry.value.intValue { result[state] = Int(count) }
                    }
                }
            }
            // Jobs we show as live but that ended while we were away.
            let listed = Set(jobs.compactMap { $0["id"]?.stringValue })
            for id in screen.live where !listed.contains(id) {
                if let job = try? context.call(["op": "show", "job": .string(id)])["job"] { jobs.append(job) }
            }
        }
        for job in jobs { screen.apply(job: job, now: now()) }
        dirty = true
    }

    private func setNotice(_ text: String, for seconds: Double?) {
        screen.notice = text
        noticeUntil = seconds.map { now() + $0 }
        dirty = true
    }

    // MARK: - Keys

    /// Handles typed keys; returns an exit code to quit.
    private func handleKeys(_ bytes: [UInt8]) -> Int32? {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == 0x1B, index + 1 < bytes.count + 1, index < bytes.count, bytes[index] == 0x5B || bytes[index] == 0x4F {
                // ESC [ A / ESC O A: arrows.
                guard index + 1 < bytes.count else { break }
                let code = bytes[index + 1]
                index += 2
                if confirmingCancel != nil { continue }
                switch code {
                case 0x41: screen.moveSelection(by: -1)
                case 0x42: screen.moveSelection(by: 1)
                default: break
                }
                dirty = true
                continue
            }
            if let id = confirmingCancel {
                confirmingCancel = nil
                screen.prompt = nil
                if byte == UInt8(ascii: "y") || byte == UInt8(ascii: "Y") { send("cancel", job: id) }
                dirty = true
                continue
            }
            switch byte {
            case UInt8(ascii: "q"), UInt8(ascii: "Q"), 0x03: return ExitCode.success
            case UInt8(ascii: "k"): screen.moveSelection(by: -1)
            case UInt8(ascii: "j"): screen.moveSelection(by: 1)
            case UInt8(ascii: "c"):
                guard let row = screen.selectedRow, !row.state.isTerminal else { break }
                confirmingCancel = row.id
                screen.prompt = "Cancel \(row.kind) \(row.id.prefix(8))\(row.label.isEmpty ? "" : " (\(row.label))")? "
                    + "It stops and removes its partial output. y/n"
            case UInt8(ascii: "p"):
                guard let row = screen.selectedRow, !row.state.isTerminal else { break }
                send(row.state == .paused ? "resume" : "pause", job: row.id)
            default: break
            }
            dirty = true
        }
        return nil
    }

    /// Sends a control request on its own connection; the reply is read when it comes, never waited for.
    private func send(_ verb: String, job: String) {
        do {
            let client = try context.connect()
            try client.send(["op": .string(verb), "job": .string(job)])
            pending.append((client, verb, job))
            let words = ["cancel": "cancelling", "pause": "pausing", "resume": "resuming"][verb] ?? verb
            setNotice("\(words) \(job.prefix(8))…", for: nil)
        } catch {
            setNotice("could not \(verb) \(job.prefix(8)): \(error)", for: 5)
        }
    }

    private func finishRequest(at index: Int) {
        let request = pending.remove(at: index)
        let reply = try? request.client.readLine()
        if let reply, reply["ok"]?.boolValue == true {
            setNotice("\(request.verb): \(request.job.prefix(8)) is now \(reply["job"]?["state"]?.stringValue ?? "?")", for: 3)
            if let job = reply["job"] { screen.apply(job: job, now: now()) }
        } else {
            let message = reply?["error"]?["message"]?.stringValue ?? "no reply from the daemon"
            setNotice("could not \(request.verb) \(request.job.prefix(8)): \(message)", for: 5)
        }
    }
}
