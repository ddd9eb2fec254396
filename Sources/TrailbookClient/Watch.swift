import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// `watch` and `submit --wait/--watch`: follow the daemon's progress feed.
///
/// Plain mode prints one line per job update, at most once a second per job, and every state change; `--json`
/// prints the raw feed events, one per line. If the daemon goes away, it says so, reconnects with `--since` the
/// last event seen, and carries on.
enum Watch {
    /// A feed subscription and what it has seen.
    final class Subscription {
        var client: DaemonClient
        var lastSeq: Int64?
        let jobs: [String]
        let kinds: [String]
        let context: CommandContext

        init(client: DaemonClient, lastSeq: Int64?, jobs: [String], kinds: [String], context: CommandContext) {
            self.client = client
            self.lastSeq = lastSeq
            self.jobs = jobs
            self.kinds = kinds
            self.context = context
        }

        /// The next event, reconnecting (with `since`) if the daemon restarted; `nil` if it does not come back.
        func next(reconnectSeconds: Double = 30) throws -> JSONValue? {
            while true {
                if let event = try client.readLine() {
                    if let seq = event["seq"]?.intValue { lastSeq = seq }
                    return event
                }
                CLI.printError("lost the daemon; reconnecting…")
                let deadline = Timestamp.monotonic() + reconnectSeconds
                var reconnected = false
                while Timestamp.monotonic() < deadline {
                    usleep(200_000)
                    if let fresh = try? Watch.subscribe(context, jobs: jobs, kinds: kinds, since: lastSeq) {
                        client = fresh.client
                        reconnected = true
                        CLI.printError("reconnected to the daemon")
                        break
                    }
                }
                if !reconnected { return nil }
            }
        }
    }

    /// Opens a connection and subscribes to the feed.
    /// - Throws: `ClientError` if the daemon is not reachable; `DaemonReply` if it refuses.
    static func subscribe(_ context: CommandContext, jobs: [String], kinds: [String], since: Int64?) throws -> Subscription {
        let client = try context.connect()
        var request: [String: JSONValue] = ["op": "watch"]
        if !jobs.isEmpty { request["jobs"] = .array(jobs.map { .string($0) }) }
        if !kinds.isEmpty { request["kinds"] = .array(kinds.map { .string($0) }) }
        if let since { request["since"] = .number(Double(since)) }
        let header = try client.request(.object(request))
        try CommandContext.check(header)
        return Subscription(client: client, lastSeq: since ?? header["seq"]?.intValue, jobs: jobs, kinds: kinds, context: context)
    }

    /// `watch [ID…] [--kind K] [--since SEQ] [--json]`.
    static func run(_ context: CommandContext) throws -> Int32 {
        // The protocol's numbers are JSON's (doubles): a seq above 2^53 would arrive rounded, as another one.
        let since = try context.arguments.integer("since", range: 0...(1 << 53)).map(Int64.init)
        let jobs = try context.arguments.positionals.map(resolve(context))
        let kinds = context.arguments.values("kind")
        let subscription = try subscribe(context, jobs: jobs, kinds: kinds, since: since)
        if usesScreen(context) {
            return try LiveWatch.run(
                context, scope: LiveWatch.Scope(jobs: jobs, kinds: kinds), subscription: subscription,
                expand: context.arguments.flag("expand"))
        }
        let printer = LinePrinter(json: context.json, expand: context.arguments.flag("expand"))
        // On a terminal that cannot draw the screen (TERM=dumb), keys still work: `q` quits.
        let keys = context.json ? nil : PlainKeys()
        defer { keys?.restore() }
        guard !jobs.isEmpty else {
            while true {
                if let code = keys?.waitForFeed(subscription.client) { return code }
                guard let event = try subscription.next() else { break }
                printer.print(event)
            }
            return ExitCode.success
        }
        // `watch ID…` ends once every job named has ended; one that already has is reported at once (with
        // `--json`, as a state event that sums up its end, with seq null, so the output stays events only).
        var open = Set(jobs)
        for id in try ended(jobs, context, reporting: true).keys { open.remove(id) }
        while !open.isEmpty {
            if let code = keys?.waitForFeed(subscription.client) { return code }
            guard let event = try subscription.next() else { break }
            if event["type"]?.stringValue == "gap" {
                printer.print(event)
                for id in try ended(open.sorted(), context, reporting: true).keys { open.remove(id) }
                continue
            }
            guard let id = event["job"]?.stringValue, open.contains(id) else { continue }
            printer.print(event)
            if event["type"]?.stringValue == "state", let to = event["to"]?.stringValue,
                JobState(rawValue: to)?.isTerminal == true
            {
                open.remove(id)
            }
        }
        return ExitCode.success
    }

    /// Reads each of `ids` (`show`) and returns those in a terminal state, by id. With `reporting`, prints each as
    /// `watch ID` reports a job that ended before it began: a summary line, or with `--json` its `endedEvent`.
    /// Used at the start of a watch and after a `gap` line, when a job's end may be among the events missed.
    /// - Throws: `DaemonReply` if a `show` is refused (`no_such_job`), `ClientError` if the daemon is gone.
    static func ended(_ ids: [String], _ context: CommandContext, reporting: Bool) throws -> [String: JSONValue] {
        var ended: [String: JSONValue] = [:]
        for id in ids {
            let job = try context.call(["op": "show", "job": .string(id)])["job"] ?? .null
            guard let state = job["state"]?.stringValue.flatMap(JobState.init(rawValue:)), state.isTerminal else { continue }
            ended[id] = job
            guard reporting else { continue }
            print(context.json ? String(decoding: JSONCoding.encode(endedEvent(job)), as: UTF8.self) : JobText.summary(job))
        }
        return ended
    }

    /// The `state` event standing for the end of `job`, which happened before this watch began: `to` is its
    /// final state, `from` and `seq` are `null` (it is a summary, not an event of the feed, whose numbers it must
    /// not repeat), `at` its last update; `attempt`, `result`, and `cancellation` or `error` when it has them.
    static func endedEvent(_ job: JSONValue) -> JSONValue {
        var members: [String: JSONValue] = [
            "seq": .null, "at": job["updated_at"] ?? .null, "job": job["id"] ?? .null, "kind": job["kind"] ?? .null,
            "type": "state", "from": .null, "to": job["state"] ?? .null, "attempt": job["attempt"] ?? .null,
            "result": job["result"] ?? .null,
        ]
        for key in ["cancellation", "error"] where !(job[key] ?? .null).isNull { members[key] = job[key] }
        return .object(members)
    }

    /// Whether to draw the live screen: stdout is a terminal that can take escape codes, and `--json` is not given.
    static func usesScreen(_ context: CommandContext) -> Bool {
        !context.json && Terminal.isTerminal(STDOUT_FILENO) && context.environment["TERM"].map { $0 != "dumb" } ?? false
    }

    /// Turns an id or unique prefix into the full id (the feed filters on full ids).
    static func resolve(_ context: CommandContext) -> (String) throws -> String {
        { prefix in
            try context.call(["op": "show", "job": .string(prefix)])["job"]?["id"]?.stringValue ?? prefix
        }
    }

    /// How following a job ended.
    enum FollowEnd {
        /// The job reached a terminal state: its final JSON.
        case ended(JSONValue)
        /// The person quit first (`q`: 0, Ctrl-C: 130, SIGTERM: 143); the job runs on.
        case quit(Int32)
    }

    /// Follows job `id` on `subscription` until it reaches a terminal state. Printing plain lines on a terminal
    /// (`TERM=dumb`), the keys of `watch` work too: `q` stops following and leaves the job running. With `expand`,
    /// each progress line is followed by the job's files in flight (`FilesInFlight.plainLines`).
    static func follow(
        _ subscription: Subscription, job id: String, printing: Bool, json: Bool, expand: Bool = false
    ) throws -> FollowEnd {
        let printer = LinePrinter(json: json, expand: expand)
        let keys = printing && !json ? PlainKeys() : nil
        defer { keys?.restore() }
        var end: JSONValue?
        while true {
            if let code = keys?.waitForFeed(subscription.client) { return .quit(code) }
            guard let event = try subscription.next() else { break }
            if event["type"]?.stringValue == "gap" {
                // Events were missed (the daemon lost the shared store for a while, or restarted past its replay
                // buffer): the end may be among them.
                if printing { printer.print(event) }
                if let job = try ended([id], subscription.context, reporting: printing)[id] { return .ended(job) }
                continue
            }
            guard event["job"]?.stringValue == id else { continue }
            if printing { printer.print(event) }
            if event["type"]?.stringValue == "state", let to = event["to"]?.stringValue,
                JobState(rawValue: to)?.isTerminal == true
            {
                end = event
                break
            }
        }
        do {
            return .ended(try subscription.context.call(["op": "show", "job": .string(id)])["job"] ?? .null)
        } catch let reply as DaemonReply where reply.error.code == "no_such_job" {
            // Retention may prune the job between its end and this `show` (`--keep-succeeded 0`): the end event
            // already says how it ended, so that is the answer, not "no such job".
            guard let end else { throw reply }
            return .ended(job(endedBy: end))
        }
    }

    /// The job as its terminal state event describes it (the inverse of `endedEvent`): for a job pruned before
    /// it could be shown.
    static func job(endedBy event: JSONValue) -> JSONValue {
        var members: [String: JSONValue] = [
            "id": event["job"] ?? .null, "kind": event["kind"] ?? .null, "state": event["to"] ?? .null,
            "attempt": event["attempt"] ?? .null, "updated_at": event["at"] ?? .null, "result": event["result"] ?? .null,
        ]
        for key in ["cancellation", "error"] where !(event[key] ?? .null).isNull { members[key] = event[key] }
        return .object(members)
    }

    /// Keys for plain lines on a terminal (`TERM=dumb`, or unset): `q` quits (exit 0), Ctrl-C exits 130 and
    /// SIGTERM 143, as on the screen. Nothing is written to the terminal but the lines; `nil` when stdin or stdout
    /// is not a terminal (a pipe, cron), where there are no keys to read.
    final class PlainKeys {
        private let terminal: Terminal

        init?() {
            guard Terminal.isTerminal(STDIN_FILENO), Terminal.isTerminal(STDOUT_FILENO) else { return nil }
            terminal = Terminal(screen: false)
        }

        /// Gives the terminal its modes back.
        func restore() { terminal.restore() }

        /// Waits until `client` has input (a line, or its end); returns an exit code instead when `q`, Ctrl-C
        /// or SIGTERM comes first.
        func waitForFeed(_ client: DaemonClient) -> Int32? {
            var keysOpen = true
            while !client.waitReadable(timeoutSeconds: 0) {
                var fds = [
                    pollfd(fd: keysOpen ? STDIN_FILENO : -1, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: terminal.signalDescriptor, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: client.fileDescriptor, events: Int16(POLLIN), revents: 0),
                ]
                guard poll(&fds, nfds_t(fds.count), -1) > 0 else { continue }
                if fds[1].revents != 0 {
                    for signal in terminal.pendingSignals() {
                        switch signal {
                        case .interrupt: return 130
                        case .terminate: return 143
                        case .resize: break
                        }
                    }
                }
                if fds[0].revents != 0 {
                    guard let keys = terminal.readKeys() else {
                        keysOpen = false
                        continue
                    }
                    if keys.contains(where: { $0 == UInt8(ascii: "q") || $0 == UInt8(ascii: "Q") || $0 == 0x03 }) {
                        return ExitCode.success
                    }
                }
                if fds[2].revents != 0 { return nil }
            }
            return nil
        }
    }

    /// Prints feed events as plain lines (rate-limited per job) or raw JSON. A plain line is one event: its
    /// fields are escaped (`TerminalText.escape`), so a name or message holding a newline cannot split it or fake
    /// another; `--json` has the exact text. With `expand` (`--expand`), a progress line is followed by one line
    /// per file of the job in flight (`FilesInFlight`), under the same rate limit.
    final class LinePrinter {
        let json: Bool
        let expand: Bool
        private var lastPrinted: [String: Double] = [:]

        init(json: Bool, expand: Bool = false) {
            self.json = json
            self.expand = expand
        }

        func print(_ event: JSONValue) {
            if json {
                Swift.print(String(decoding: JSONCoding.encode(event), as: UTF8.self))
                return
            }
            guard let job = event["job"]?.stringValue, let type = event["type"]?.stringValue else {
                if let message = event["message"]?.stringValue { Swift.print("note: " + TerminalText.escape(message)) }
                return
            }
            let now = Timestamp.monotonic()
            if type == "progress" {
                if let last = lastPrinted[job], now - last < 1 { return }
            }
            lastPrinted[job] = now
            let head = TerminalText.escape("\(event["at"]?.stringValue ?? "") \(job.prefix(8)) \(event["kind"]?.stringValue ?? "")")
            switch type {
            case "submitted": Swift.print("\(head) submitted")
            case "progress":
                Swift.print("\(head) running \(TerminalText.escape(JobText.progress(event["progress"])))")
                if expand, let progress = event["progress"] {
                    let unit = progress["unit"]?.stringValue ?? ""
                    for line in FilesInFlight(progress: progress).plainLines(head: head, unit: unit) { Swift.print(line) }
                }
            case "state":
                var line = "\(head) \(event["from"]?.stringValue ?? "") -> \(event["to"]?.stringValue ?? "")"
                var job: [String: JSONValue] = ["state": event["to"] ?? .null]
                job["cancellation"] = event["cancellation"] ?? .null
                job["error"] = event["error"] ?? .null
                if let reason = JobText.reason(.object(job), retryInSeconds: event["retry_in_s"]?.doubleValue) {
                    line += ": " + reason
                }
                Swift.print(TerminalText.escape(line))
            case "log":
                Swift.print(
                    TerminalText.escape("\(head) \(event["level"]?.stringValue ?? ""): \(event["message"]?.stringValue ?? "")"))
            default: Swift.print(TerminalText.escape("\(head) \(type)"))
            }
        }
    }
}
