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
///
/// This type owns the connections: accepting them, reading and framing their lines, back-pressure, and writing
/// their replies in order. What each line asks is answered in `ControlServer+Routing.swift`; a request's members
/// are read, and error lines made, in `ControlServer+RequestMembers.swift`.
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
    let unreadLimit = UnreadReplyLimit()
    /// Lets one `list` reply or watcher's replay be built at a time, in about half of the loop's time at most.
    let heavyGate = TurnGate()

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
            if connection.watching, connection.readingPaused, !connection.inputEnded {
                // A watcher's later lines are ignored, but its end must be read (`ended` drops it): with its reads
                // left paused, one that hung up stayed subscribed for good (and kept a shared store's daemon
                // following the other daemons' events for nobody).
                connection.queue.removeAll()
                connection.queuedBytes = 0
                connection.readingPaused = false
                self.startReading(connection)
            }
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

    func reply(_ pipe: PipeConnection, _ line: [UInt8]) {
        pipe.write(line)
        // A reader takes its reply at once; what it leaves unread counts against it (`UnreadReplyLimit`).
        if pipe.pendingWriteBytes > 0 { unreadLimit.check() }
    }
}
