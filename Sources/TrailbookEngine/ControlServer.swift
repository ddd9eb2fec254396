import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's control protocol: newline-delimited JSON over its Unix socket.
///
/// Each request is one JSON object on one line with an `op`; each gets one reply line, `{"ok": true, …}` or
/// `{"ok": false, "error": {"code", "message"}}`, in order. Ops: `ping`, `submit` (`kind`, `params`, `options`, where
/// `options.allow_duplicate` skips the duplicate check),
/// `list` (`states`, `kind`, `limit`), `show` / `cancel` / `pause` / `resume` (`job`: id or unique prefix; `resume`
/// also `headers`, new `"Name: value"` lines for an upload, replacing those of the same name), and
/// `watch` (`since`, `jobs`, `kinds`), after whose reply the connection carries feed events, one per line.
///
/// Each line is parsed by `JSONParser` (strict, every dimension bounded), never by Foundation's decoder. Lines
/// over 1 MiB, bad JSON, duplicate keys, members of the wrong type and unknown ops get an error reply, exactly one
/// per line; none can crash or wedge the daemon. Requests of a client that has hung up are dropped unanswered.
/// Only the daemon's own user may connect (the socket is mode 0600 and the peer's uid is checked with
/// SO_PEERCRED).
@LoopActor
public final class ControlServer {

    let scheduler: Scheduler
    /// Prunes ended jobs for the `prune` op.
    let retention: Retention
    let version: String
    private var server: PipeServer?
    private var connections: [ObjectIdentifier: Connection] = [:]
    /// Drops clients that hold too much unread (`UnreadReplyLimit`): a watcher that never reads, a half-closed
    /// client that asked for a big list and never reads it, a crowd of them.
    private let unreadLimit = UnreadReplyLimit()
    /// Lets one `list` reply or watcher's replay be built at a time, in about half of the loop's time at most.
    private let heavyGate = TurnGate()

    /// One client connection: its read buffer and its queue of requests, answered in order: one at a time, but
    /// for submits, which wait for their group commit together (`OrderedReplies`).
    final class Connection {
        let pipe: PipeConnection
        let replies: OrderedReplies
        var buffer: [UInt8] = []
        var queue: [QueuedRequest] = []
        /// Bytes of the lines in `queue`.
        var queuedBytes = 0
        var busy = false
        var watching = false
        var discardingOversizedLine = false
        /// The client half-closed (or hung up): answer what was received, then close.
        var inputEnded = false
        /// Reads are paused until the queue drains (back-pressure).
        var readingPaused = false

        init(pipe: PipeConnection, replies: OrderedReplies) {
            self.pipe = pipe
            self.replies = replies
        }
    }

    /// Makes a server for `scheduler` and `retention` (the `prune` op); `version` is reported by `ping`.
    public init(scheduler: Scheduler, retention: Retention, version: String) {
        self.scheduler = scheduler
        self.retention = retention
        self.version = version
    }

    /// Binds the socket at `path` (mode 0600) and starts accepting.
    /// - Throws: `UVError` if the socket cannot be bound.
    public func listen(path: String) throws(UVError) {
        server = try PipeServer(loop: .main, path: path) { [weak self] pipe in
            LoopIsolation.assume { self?.accept(pipe) }
        }
    }

    /// Accepts on `descriptor`, a listening Unix stream socket passed by a service manager (socket activation).
    /// - Throws: `UVError` if libuv cannot listen on it.
    public func listen(descriptor: Int32) throws(UVError) {
        server = try PipeServer(loop: .main, descriptor: descriptor) { [weak self] pipe in
            LoopIsolation.assume { self?.accept(pipe) }
        }
    }

    /// Stops accepting and closes every connection but the watchers: those stay subscribed so they see the last
    /// state events of a shutdown, and `ProgressFeed.close()` closes them after their last write.
    public func close() {
        server?.close()
        server = nil
        unreadLimit.close()
        for connection in connections.values where !connection.watching {
            connection.pipe.close()
        }
        connections.removeAll()
    }

    private func accept(_ pipe: PipeConnection) {
        guard pipe.peerUID == getuid() else {
            pipe.write(Self.errorLine(JobError(code: "forbidden", message: "only the daemon's own user may connect")))
            pipe.closeAfterWriting()
            return
        }
        if connections.count >= Self.maxConnections { dropHungUp() }
        guard connections.count < Self.maxConnections else {
            pipe.write(
                Self.errorLine(
                    JobError(code: "too_many_connections", message: "the daemon serves \(Self.maxConnections) connections at most")))
            pipe.closeAfterWriting()
            return
        }
        let connection = Connection(pipe: pipe, replies: OrderedReplies { [weak self] line in self?.reply(pipe, line) })
        connections[ObjectIdentifier(pipe)] = connection
        unreadLimit.watch(pipe) { [weak self, weak connection] in
            guard let self, let connection else { return }
            LoopIsolation.assume { self.drop(connection) }
        }
        startReading(connection)
    }

    /// Drops every connection whose client has hung up though the loop has not read its end of input yet, so a
    /// burst of short connections (thousands of connect-and-close) does not hold the slots and get a live client
    /// refused. One `poll` per connection, only when all slots are taken.
    private func dropHungUp() {
        for connection in connections.values where connection.pipe.peerClosed { drop(connection) }
    }

    /// The client stopped sending. After a clean end of input (a half-close, as `nc -N` does) the requests already
    /// received are still answered, then the connection closes; after a read error, or when the client closed its
    /// end entirely (no one is left to read a reply), it closes at once and its waiting requests are dropped.
    private func ended(_ connection: Connection, error: UVError?) {
        connection.inputEnded = true
        if error != nil || connection.watching || connection.pipe.peerClosed {
            drop(connection)
            unreadLimit.check()
            return
        }
        if !connection.buffer.isEmpty, !connection.discardingOversizedLine {
            // A last request without its newline is still a request: answer it like any other.
            let line = connection.buffer
            connection.buffer = []
            enqueue(.line(line), on: connection)
        }
        if !connection.busy { finish(connection) }
    }

    /// Closes a connection once its last replies are written.
    private func finish(_ connection: Connection) {
        scheduler.feed.unsubscribe(connection.pipe)
        connection.pipe.closeAfterWriting()
        connections[ObjectIdentifier(connection.pipe)] = nil
    }

    private func drop(_ connection: Connection) {
        connection.queue.removeAll()
        scheduler.feed.unsubscribe(connection.pipe)
        unreadLimit.released(connection.pipe.pendingWriteBytes)
        unreadLimit.forget(connection.pipe)
        connection.pipe.close()
        connections[ObjectIdentifier(connection.pipe)] = nil
    }

    private func received(_ raw: UnsafeRawBufferPointer, on connection: Connection) {
        // Typed and scanned with memchr: the bytes are copied and searched as blocks, not one by one, so a client
        // sending megabytes of lines costs little.
        let bytes = raw.bindMemory(to: UInt8.self)
        guard let base = bytes.baseAddress else { return }
        var start = 0
        while start < bytes.count, let found = memchr(base + start, 0x0A, bytes.count - start) {
            let newline = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
            let piece = UnsafeBufferPointer(rebasing: bytes[start..<newline])
            start = newline + 1
            if connection.discardingOversizedLine {
                connection.discardingOversizedLine = false
                connection.buffer = []
                continue
            }
            if connection.buffer.count + piece.count > ControlProtocol.maxLineBytes {
                connection.buffer = []
                enqueue(.oversized, on: connection)
                continue
            }
            connection.buffer.append(contentsOf: piece)
            let line = connection.buffer
            // A fresh buffer, not `removeAll(keepingCapacity:)`: that would copy the line's storage (it is shared
            // with `line`) and keep up to 1 MiB per idle connection.
            connection.buffer = []
            enqueue(.line(line), on: connection)
        }
        let rest = UnsafeBufferPointer(rebasing: bytes[start...])
        guard !rest.isEmpty, !connection.discardingOversizedLine else { return }
        if connection.buffer.count + rest.count > ControlProtocol.maxLineBytes {
            // Skip the rest of the line (answered in its turn), so a client streaming garbage cannot grow our memory.
            connection.buffer = []
            connection.discardingOversizedLine = true
            enqueue(.oversized, on: connection)
        } else {
            connection.buffer.append(contentsOf: rest)
        }
    }

    private static let oversized = JobError(
        code: "request_too_large", message: "request line is longer than \(ControlProtocol.maxLineBytes) bytes")

    /// One request line waiting for its turn; replies go out in the order the lines came.
    enum QueuedRequest {
        /// A complete line, to parse and handle.
        case line([UInt8])
        /// A line past `ControlProtocol.maxLineBytes`, dropped as it came: its turn gets the `request_too_large` error.
        case oversized

        /// The memory it holds, in bytes.
        var byteCount: Int {
            if case .line(let line) = self { return line.count }
            return 0
        }
    }

    /// Whether `line` is only spaces, tabs and carriage returns (skipped, unanswered, like an empty line).
    private static func isBlank(_ line: [UInt8]) -> Bool {
        line.withUnsafeBufferPointer { bytes in
            for byte in bytes where byte != 0x20 && byte != 0x0D && byte != 0x09 { return false }
            return true
        }
    }

    private func enqueue(_ request: QueuedRequest, on connection: Connection) {
        guard !connection.watching else { return }
        if case .line(let line) = request, Self.isBlank(line) { return }
        connection.queue.append(request)
        connection.queuedBytes += request.byteCount
        // Back-pressure: a client that pipelines more than `maxQueuedRequests` or `ControlProtocol.maxLineBytes` of
        // requests waits (its reads pause) until they are answered, so one connection holds at most about 2 MiB of
        // requests (this queue and one partial line).
        if connection.queue.count >= Self.maxQueuedRequests || connection.queuedBytes >= ControlProtocol.maxLineBytes,
            !connection.readingPaused
        {
            connection.readingPaused = true
            connection.pipe.stopReading()
        }
        guard !connection.busy else { return }
        connection.busy = true
        Task.onLoop {
            repeat {
                while !connection.queue.isEmpty, !connection.watching, !connection.pipe.isClosing {
                    // A client that is gone or does not read its replies is cut off rather than allowed to keep us
                    // busy or grow our memory. Work for a client that has hung up is skipped: thousands of them
                    // (connect, send `list`, close) would otherwise put a live client's request behind all of theirs.
                    if connection.pipe.writeFailed || connection.pipe.pendingWriteBytes > Self.maxUnreadReplyBytes
                        || connection.pipe.peerClosed
                    {
                        self.drop(connection)
                        break
                    }
                    let request = connection.queue.removeFirst()
                    connection.queuedBytes -= request.byteCount
                    let place = connection.replies.open()
                    switch request {
                    case .line(let line): await self.handle(line, on: connection, at: place)
                    case .oversized: connection.replies.fill(place, with: Self.errorLine(Self.oversized))
                    }
                    if connection.readingPaused, connection.queue.count < Self.maxQueuedRequests / 2,
                        connection.queuedBytes < ControlProtocol.maxLineBytes / 2, !connection.inputEnded
                    {
                        connection.readingPaused = false
                        self.startReading(connection)
                    }
                    // Let timers, other clients and jobs run between requests: a turn of the loop. Not
                    // `Task.yield()`, which hands the task to Swift's global executor, whose thread hands it back
                    // to the loop: two thread wake-ups per request (issue 14: a tenth of the daemon's time on single
                    // submits went to waking threads).
                    await Scheduler.nextTurn()
                }
                // Submits still waiting for their group commit are answered before the connection is idle (or done).
                await connection.replies.answered()
            } while !connection.queue.isEmpty && !connection.watching && !connection.pipe.isClosing
            connection.busy = false
            if connection.inputEnded, !connection.watching, !connection.pipe.isClosing { self.finish(connection) }
        }
    }

    /// Reads the connection's requests (again, after back-pressure paused it).
    private func startReading(_ connection: Connection) {
        guard !connection.pipe.isClosing else { return }
        connection.pipe.startReading(
            onRead: { [weak self, weak connection] bytes in
                guard let self, let connection else { return }
                LoopIsolation.assume { self.received(bytes, on: connection) }
            },
            onEnd: { [weak self, weak connection] error in
                guard let self, let connection else { return }
                LoopIsolation.assume { self.ended(connection, error: error) }
            })
    }

    /// Requests one connection may have waiting before its reads pause.
    static let maxQueuedRequests = 64
    /// Unread reply bytes past which a connection is closed (its client is not reading).
    static let maxUnreadReplyBytes = 8 << 20
    /// Connections served at once; more are refused with `too_many_connections`.
    static let maxConnections = 512

    private func reply(_ pipe: PipeConnection, _ line: [UInt8]) {
        pipe.write(line)
        // A reader takes its reply at once; what it leaves unread counts against it (`UnreadReplyLimit`).
        if pipe.pendingWriteBytes > 0 { unreadLimit.check() }
    }

    /// Handles one request line, whose reply goes to `place`. Returns once it is answered, or, for a submit, once
    /// its jobs wait for the group commit: the connection's next submit is then checked meanwhile, so submits
    /// pipelined on one connection share a group instead of costing one commit each. Any other request waits
    /// until every earlier one is answered, as if all were handled one at a time.
    private func handle(_ line: [UInt8], on connection: Connection, at place: Int) async {
        let request: JSONValue
        do {
            // Our own bounded parser, never Foundation's decoder: see `JSONParser` for why.
            request = try JSONParser.parse(line)
        } catch {
            return connection.replies.fill(place, with: Self.errorLine(Self.refusal(error)))
        }
        let op = request["op"]?.stringValue
        guard op == "submit" || op == "submit_batch" else {
            await connection.replies.answered(leaving: 1)
            return await answer(request, on: connection, at: place, whenQueued: nil)
        }
        // At most `maxQueuedRequests` submits of one connection wait for their commit at once.
        await connection.replies.answered(leaving: Self.maxQueuedRequests)
        let turn = RequestTurn()
        Task.onLoop {
            await self.answer(request, on: connection, at: place, whenQueued: turn.end)
            turn.end()
        }
        await turn.over()
    }

    /// Answers `request` in its `place`; `whenQueued` runs when a submit's jobs wait for the group commit.
    private func answer(
        _ request: JSONValue, on connection: Connection, at place: Int, whenQueued: (@LoopActor () -> Void)?
    ) async {
        let line: [UInt8]?
        do {
            let response = try await respond(to: request, on: connection, whenQueued: whenQueued)
            line = response.isNull ? nil : JSONCoding.encode(response) + [0x0A]
        } catch let error as BatchError {
            line = Self.errorLine(error.error, index: error.index)
        } catch let error as JobError {
            line = Self.errorLine(error)
        } catch {
            line = Self.errorLine(JobError(code: "internal", message: "\(error)"))
        }
        connection.replies.fill(place, with: line)
    }

    /// The error reply for a request line the parser refused.
    static func refusal(_ failure: JSONParser.Failure) -> JobError {
        switch failure.kind {
        case .syntax:
            return JobError(code: "bad_request", message: "request is not valid JSON: \(failure.message)")
        case .duplicateKey:
            return JobError(code: "duplicate_key", message: "request is ambiguous: \(failure.message); send each key once")
        case .limit:
            return JobError(code: "request_too_large", message: "request is too large: \(failure.message)")
        }
    }

    /// The member `key` of `request`, or `nil` when it is absent or `null`.
    /// - Throws: `bad_request` naming the member and the expected type when it is something else.
    private func member<T>(_ request: JSONValue, _ key: String, _ expected: String, _ extract: (JSONValue) -> T?)
        throws(JobError) -> T?
    {
        guard let value = request[key], !value.isNull else { return nil }
        guard let typed = extract(value) else {
            throw JobError(code: "bad_request", message: "\"\(key)\" must be \(expected), got \(Self.shortText(value))")
        }
        return typed
    }

    private func string(_ request: JSONValue, _ key: String) throws(JobError) -> String? {
        try member(request, key, "a string", \.stringValue)
    }

    private func strings(_ request: JSONValue, _ key: String) throws(JobError) -> [String]? {
        try member(request, key, "an array of strings") { value in
            value.arrayValue.flatMap { elements in
                let strings = elements.compactMap(\.stringValue)
                return strings.count == elements.count ? strings : nil
            }
        }
    }

    private func wholeNumber(_ request: JSONValue, _ key: String) throws(JobError) -> Int64? {
        try member(request, key, "a whole number", \.intValue)
    }

    /// A value for an error message: its JSON, cut at 64 bytes.
    private static func shortText(_ value: JSONValue) -> String {
        let text = String(decoding: JSONCoding.encode(value), as: UTF8.self)
        return text.count > 64 ? String(text.prefix(64)) + "…" : text
    }

    /// The reply to one request.
    /// - Throws: `JobError`, or `BatchError` for a refused `submit_batch`.
    private func respond(
        to request: JSONValue, on connection: Connection, whenQueued: (@LoopActor () -> Void)?
    ) async throws -> JSONValue {
        guard case .object = request else {
            throw JobError(code: "bad_request", message: "a request is a JSON object with an \"op\"")
        }
        guard let op = try string(request, "op") else {
            throw JobError(code: "bad_request", message: "request has no \"op\" string")
        }
        if let known = Self.knownMembers[op] { try Self.refuseUnknownMembers(of: request, known: known, in: op) }
        switch op {
        case "ping":
            return [
                "ok": true, "version": .string(version), "pid": .number(Double(getpid())),
                "kinds": .array(scheduler.kindNames.map { .string($0) }), "feed_seq": .number(Double(scheduler.feed.lastSeq)),
            ]
        case "submit":
            let submit = try submitRequest(request, op: "submit")
            let submitted: Submitted
            do {
                submitted = try await scheduler.submit([submit], whenQueued: whenQueued)[0]
            } catch {
                throw error.error
            }
            // `existing`: the key was known, and this is the job it made before (a retried submit).
            return ["ok": true, "job": submitted.job.json, "existing": .bool(submitted.existing)]
        case "submit_batch":
            guard let entries = try member(request, "jobs", "an array of objects", \.arrayValue) else {
                throw JobError(code: "bad_request", message: "submit_batch needs \"jobs\": an array of submit objects")
            }
            guard !entries.isEmpty else {
                throw JobError(code: "bad_request", message: "submit_batch needs at least one job in \"jobs\"")
            }
            var requests: [SubmitRequest] = []
            requests.reserveCapacity(entries.count)
            // In slices, as the scheduler checks them: a batch of thousands lets other clients in between.
            var slice = Scheduler.LoopSlice()
            for (index, entry) in entries.enumerated() {
                _ = await slice.pause()
                do {
                    requests.append(try submitRequest(entry, op: "a submit_batch job"))
                } catch {
                    throw Self.batchError(SubmitRefusal(index: index, error: error))
                }
            }
            let submitted: [Submitted]
            do {
                submitted = try await scheduler.submit(requests, whenQueued: whenQueued)
            } catch {
                throw Self.batchError(error)
            }
            return [
                "ok": true, "ids": .array(submitted.map { .string($0.job.id) }),
                "existing": .array(submitted.map { .bool($0.existing) }),
            ]
        case "list":
            let states = try strings(request, "states")?.map { (name: String) throws(JobError) -> JobState in
                guard let state = JobState(rawValue: name) else {
                    throw JobError(code: "bad_request", message: "unknown state \(Self.shortText(.string(name)))")
                }
                return state
            }
            let kind = try string(request, "kind")
            if let kind { try checkKinds([kind]) }
            let limit = try wholeNumber(request, "limit") ?? 1_000
            // 0 or less asked for nothing that makes sense (it was quietly read as 1); more than 100 000 is capped.
            guard limit >= 1 else {
                throw JobError(code: "bad_request", message: "\"limit\" must be 1 or more (the newest N jobs), not \(limit)")
            }
            // A page's cursor: the `sequence` of the oldest job of the page before (sequences start at 1).
            let before = try wholeNumber(request, "before")
            if let before, before < 1 {
                throw JobError(
                    code: "bad_request",
                    message: "\"before\" must be a job's \"sequence\" (1 or more; the oldest job of the page before), "
                        + "not \(before)")
            }
            // One list (or replay) built at a time, in about half the loop's time at most (`TurnGate`): a crowd
            // asking for big lists never stalls the rest.
            await heavyGate.enter()
            let building = Timestamp.monotonic()
            // Twice the build's time: its reply is encoded and written after it, in the same turn.
            defer { heavyGate.leave(pause: 2 * (Timestamp.monotonic() - building)) }
            // A client dropped while it waited (gone, or holding too much unread) gets nothing built.
            guard !connection.pipe.isClosing else { return .null }
            let (jobs, unfinished) = try await scheduler.fetchList(
                states: states, kind: kind, before: before, limit: Int(min(limit, 100_000)))
            // The counts of unfinished jobs in every state, from the scheduler's counters: a summary (`watch`)
            // needs them without loading a million queued jobs. On a shared store, every daemon's (the store's).
            let counts = unfinished.filter { $0.value > 0 }.map { ($0.key.rawValue, JSONValue.number(Double($0.value))) }
            return ["ok": true, "jobs": .array(jobs.map(\.json)), "counts": .object(Dictionary(uniqueKeysWithValues: counts))]
        case "files":
            // One page of a job's file list (`show ID --files`; Entries/JobFilesRequest.swift).
            let files = try JobFilesRequest(request)
            return try files.answer(id: try await scheduler.fetchJob(files.job).id, store: scheduler.entryStore)
        case "show", "cancel", "pause", "resume":
            guard let id = try string(request, "job") else {
                throw JobError(code: "bad_request", message: "\(op) needs a \"job\" id")
            }
            let job: JobRecord
            switch op {
            case "show": job = try await scheduler.fetchJob(id)
            case "cancel": job = try await scheduler.cancel(id)
            case "pause": job = try await scheduler.pause(id)
            default:
                // `headers` (an upload's new credentials) replace those of the same name; see `JobKind.amend`.
                let headers = try strings(request, "headers")
                job = try await scheduler.resume(id, changes: headers.map { ["headers": .array($0.map { .string($0) })] })
            }
            return ["ok": true, "job": job.json]
        case "prune":
            // `older_than_s`: every ended job older than that; absent, each state's retention (`daemon --keep-*`).
            let olderThan = try member(request, "older_than_s", "a number of seconds, 0 or more") { value -> Double? in
                value.doubleValue.flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
            }
            let report = await retention.prune(olderThan: olderThan)
            if report.busy {
                throw JobError(
                    code: "invalid_state",
                    message: "another daemon sharing the job store is pruning now; try again once it is done")
            }
            if let error = report.error {
                throw JobError(
                    code: "store_write_failed",
                    message: "pruned \(report.total) jobs, then the job store refused a write (\(error)); run prune again later")
            }
            guard case .object(var members) = report.json else { return report.json }
            // A success has no `error` member at all, as every other reply (the report's own is null here).
            members["error"] = nil
            members["ok"] = true
            return .object(members)
        case "watch":
            let since = try wholeNumber(request, "since")
            let jobs = Set(try strings(request, "jobs") ?? [])
            let kinds = Set(try strings(request, "kinds") ?? [])
            try checkKinds(kinds)
            // The replay (up to 4 MiB) is heavy work too: a crowd of watchers subscribing from 0 waits its turns.
            await heavyGate.enter()
            let building = Timestamp.monotonic()
            defer { heavyGate.leave(pause: Timestamp.monotonic() - building) }
            guard !connection.pipe.isClosing else { return .null }
            connection.watching = true
            let header: JSONValue = [
                "ok": true, "watching": true, "seq": .number(Double(scheduler.feed.lastSeq)),
                "oldest": scheduler.feed.oldestSeq.map { .number(Double($0)) } ?? .null,
            ]
            reply(connection.pipe, JSONCoding.encode(header) + [0x0A])
            let replay = scheduler.feed.subscribe(connection.pipe, since: since, jobs: jobs, kinds: kinds)
            if case .incomplete(let message) = replay { connection.pipe.write(ProgressFeed.gapLine(message)) }
            if connection.pipe.pendingWriteBytes > 0 { unreadLimit.check() }
            return .null
        default:
            throw JobError(
                code: "unknown_op",
                message: "unknown op '\(op)'; known: ping, submit, submit_batch, list, show, files, cancel, pause, resume, watch, prune")
        }
    }

    /// The members each op takes. Any other is refused (`refuseUnknownMembers`): a misspelt one (`optoins`,
    /// `limt`) would otherwise be ignored, and the request done without what it asked for.
    static let knownMembers: [String: [String]] = [
        "ping": ["op"], "submit": ["op"] + submitMembers, "submit_batch": ["op", "jobs"],
        "list": ["op", "states", "kind", "limit", "before"], "show": ["op", "job"], "cancel": ["op", "job"],
        "pause": ["op", "job"], "resume": ["op", "job", "headers"], "prune": ["op", "older_than_s"],
        "watch": ["op", "since", "jobs", "kinds"],
    ]
    /// The members of a submit object (a `submit` without its `op`, or a `submit_batch` entry).
    static let submitMembers = ["kind", "params", "options", "key"]
    /// The members of a submit's `options`: `SubmitOptions`' keys, `allow_duplicate`, `queue` and `any_host`.
    static let optionMembers = JobOptions.CodingKeys.allCases.map(\.rawValue) + ["allow_duplicate", "queue", "any_host"]

    /// Throws `code` (`bad_request` unless given) naming the first member of `object` (in key order) that is not
    /// in `known`, and the known ones, e.g. `unknown member "optoins" in submit; known: kind, params, options, key`.
    static func refuseUnknownMembers(
        of object: JSONValue, known: [String], in what: String, code: String = "bad_request"
    ) throws(JobError) {
        guard case .object(let members) = object,
            let unknown = members.keys.filter({ !known.contains($0) }).min()
        else { return }
        throw JobError(
            code: code,
            message: "unknown member \(shortText(.string(unknown))) in \(what); known: \(known.joined(separator: ", "))")
    }

    /// A `submit` request, or one job of a `submit_batch`: `kind`, `params`, `options`, `key`.
    /// - Throws: `bad_request` for a member of the wrong type or an unknown one, `invalid_options` for bad
    ///   options (an unknown option too).
    private func submitRequest(_ request: JSONValue, op: String) throws(JobError) -> SubmitRequest {
        guard case .object = request else {
            throw JobError(code: "bad_request", message: "\(op) is a JSON object with a \"kind\"")
        }
        // A `submit`'s own members were checked with its op's.
        if op != "submit" { try Self.refuseUnknownMembers(of: request, known: Self.submitMembers, in: op) }
        guard let kind = try string(request, "kind") else {
            throw JobError(code: "bad_request", message: "\(op) needs a \"kind\" string")
        }
        let params = try member(request, "params", "an object") { value -> JSONValue? in
            if case .object = value { return value } else { return nil }
        }
        let optionsObject = try member(request, "options", "an object") { value -> JSONValue? in
            if case .object = value { return value } else { return nil }
        }
        if let optionsObject {
            try Self.refuseUnknownMembers(of: optionsObject, known: Self.optionMembers, in: "options", code: "invalid_options")
        }
        for key in ["priority", "max_attempts"] {
            if let value = optionsObject?[key], !value.isNull,
                value.intValue.map({ abs($0) > 1_000_000_000 }) ?? true
            {
                let text = String(decoding: JSONCoding.encode(value), as: UTF8.self)
                throw JobError(code: "invalid_options", message: "options.\(key) must be a whole number, got \(text)")
            }
        }
        let options: SubmitOptions
        do {
            options = try JSONCoding.convert(optionsObject ?? [:], to: SubmitOptions.self)
        } catch {
            throw JobError(code: "invalid_options", message: "bad options: \(JSONCoding.describe(error))")
        }
        let allowDuplicate = optionsObject?["allow_duplicate"] ?? .null
        guard allowDuplicate.isNull || allowDuplicate.boolValue != nil else {
            throw JobError(code: "invalid_options", message: "options.allow_duplicate must be true or false")
        }
        let anyHost = optionsObject?["any_host"] ?? .null
        guard anyHost.isNull || anyHost.boolValue != nil else {
            throw JobError(code: "invalid_options", message: "options.any_host must be true or false")
        }
        let queue = optionsObject?["queue"] ?? .null
        guard queue.isNull || queue.stringValue != nil else {
            throw JobError(code: "invalid_options", message: "options.queue must be a string (a queue name)")
        }
        return SubmitRequest(
            kind: kind, params: params ?? [:], options: options, allowDuplicate: allowDuplicate.boolValue ?? false,
            key: try string(request, "key"), queue: queue.stringValue, anyHost: anyHost.boolValue ?? false)
    }

    /// A refused batch as one error: the entry's code, its index in `index` and at the start of the message.
    static func batchError(_ refusal: SubmitRefusal) -> BatchError {
        guard let index = refusal.index else { return BatchError(error: refusal.error, index: nil) }
        var error = refusal.error
        error.message = "job \(index) of the batch (from 0): \(error.message); nothing was queued"
        return BatchError(error: error, index: index)
    }

    /// An error reply that names the refused entry of a batch: `{"ok": false, "error": {"code", "message",
    /// "index"}}`.
    struct BatchError: Error {
        var error: JobError
        var index: Int?
    }

    /// Refuses a filter naming a job kind this daemon does not have (a typo would otherwise match nothing, silently).
    private func checkKinds(_ kinds: some Collection<String>) throws(JobError) {
        for kind in kinds where !scheduler.kindNames.contains(kind) {
            throw JobError(
                code: "unknown_kind",
                message: "unknown job kind '\(kind)'; known: \(scheduler.kindNames.joined(separator: ", "))")
        }
    }

    /// An error reply line; URLs in the message are shown without their secrets (`JobError.redacted`).
    static func errorLine(_ error: JobError, index: Int? = nil) -> [UInt8] {
        var object = JSONCoding.value(of: error.redacted)
        if let index, case .object(var members) = object {
            members["index"] = .number(Double(index))
            object = .object(members)
        }
        return JSONCoding.encode(["ok": false, "error": object] as JSONValue) + [0x0A]
    }
}

/// Runs loop-thread callbacks (libuv handle callbacks, which the compiler cannot see are on the loop) in the
/// `LoopActor`'s isolation; the executor's `checkIsolated` traps if they ever are not.
enum LoopIsolation {
    static func assume(_ body: @LoopActor () -> Void) {
        // What MainActor.assumeIsolated does, for our global actor: check at run time, then call.
        LoopActor.shared.preconditionIsolated()
        withoutActuallyEscaping(body) { body in
            unsafeBitCast(body, to: (() -> Void).self)()
        }
    }
}
