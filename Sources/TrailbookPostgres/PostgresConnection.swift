import CLibPQ
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// How long to wait between reconnection attempts after a connection is lost: exponential backoff with "equal
/// jitter" (each delay is drawn from [½, 1] of its ceiling), so daemons that lost the database together do not
/// knock on it in lockstep when it comes back.
public struct PostgresReconnectPolicy: Sendable, Equatable {
    /// Ceiling of the first delay, in seconds.
    public var initialDelaySeconds: Double
    /// Largest ceiling, in seconds.
    public var maxDelaySeconds: Double
    /// How long one connection attempt may take, in seconds (libpq ignores `connect_timeout` in its non-blocking
    /// API, so the connection times attempts itself).
    public var attemptTimeoutSeconds: Double

    public init(initialDelaySeconds: Double = 0.05, maxDelaySeconds: Double = 5, attemptTimeoutSeconds: Double = 10) {
        self.initialDelaySeconds = initialDelaySeconds
        self.maxDelaySeconds = maxDelaySeconds
        self.attemptTimeoutSeconds = attemptTimeoutSeconds
    }

    /// The delay in seconds before retry number `failures + 1`; `unitRandom` is in [0, 1].
    public func delay(afterFailures failures: Int, unitRandom: Double) -> Double {
        var ceiling = initialDelaySeconds
        for _ in 0..<max(0, min(failures, 30)) where ceiling < maxDelaySeconds { ceiling *= 2 }
        return min(ceiling, maxDelaySeconds) * (0.5 + 0.5 * unitRandom)
    }
}

/// One connection to PostgreSQL, driven by the libuv loop: it never blocks the loop thread.
///
/// libpq's asynchronous API (https://www.postgresql.org/docs/15/libpq-async.html,
/// https://www.postgresql.org/docs/15/libpq-pipeline-mode.html) on a `PollHandle` watching `PQsocket`:
/// `PQconnectStart`/`PQconnectPoll` to connect, then the connection stays in non-blocking pipeline mode. Each
/// request (`query`, `pipeline`) is its statements and one sync point (`PQpipelineSync`),
/// flushed with `PQflush` whenever the socket is writable; results are read with `PQconsumeInput` /
/// `PQisBusy` / `PQgetResult` when it is readable, in the order requests were sent. So many requests can be in
/// flight on one connection, and a batch of writes costs one round trip.
///
/// A statement with parameters is prepared the first time it is sent on a session (`PQsendPrepare`, at the
/// head of its request) and later sent by name (`PQsendQueryPrepared`), so PostgreSQL parses and plans it once per
/// session, not once per call (`PreparedStatements`); one without parameters is sent as is (`PQsendQueryParams`).
/// A new session after a reconnection prepares them again.
///
/// The statements before one sync point form one implicit transaction: a `pipeline` is committed whole or not at
/// all (the server skips the rest after an error and rolls back at the sync point).
///
/// After it has once been up, a lost connection (server restart, network cut) fails the requests in flight with
/// `.connectionLost` and reconnects with backoff (`PostgresReconnectPolicy`), then listens again on its channels
/// and calls `onReconnect`; notifications sent while it was down are lost, so listeners re-read the state there.
/// While it is down, requests fail at once with `.notConnected` instead of waiting.
///
/// A network cut sends no FIN: the socket stays open and silent, and TCP alone would notice after minutes, or
/// never while no byte is unacknowledged. With `responseTimeoutSeconds` set, requests in flight that get no byte
/// from the server for that long count as a lost connection, and it reconnects as above.
///
/// Loop-confined: create it, call it and close it on its loop's thread (for `EventLoop.main`, from `@LoopActor`
/// code). Errors and `description` never show the connection string's password.
public final class PostgresConnection {
    /// Where the connection is in its life.
    public enum State: Sendable, Equatable {
        /// Made, `connect()` not called yet (or the first attempt failed).
        case idle
        /// A connection attempt is under way.
        case connecting
        /// Up: requests are sent.
        case ready
        /// Lost; the next attempt is scheduled.
        case waitingToReconnect
        /// Closed by `close()`.
        case closed
    }

    /// The loop it runs on.
    public let loop: EventLoop
    /// Where it connects (its description is redacted).
    public let connectionString: PostgresConnectionString
    /// The backoff between reconnection attempts.
    public var reconnectPolicy: PostgresReconnectPolicy
    /// Called on the loop thread for each notification on a channel it listens to.
    public var onNotification: ((PostgresNotification) -> Void)?
    /// Called on the loop thread each time a lost connection is up again (its channels listened to again).
    public var onReconnect: (() -> Void)?
    /// How long, in seconds, requests in flight may go without a byte from the server before the connection
    /// counts as lost (`.connectionLost`, then a reconnection); `nil` (the default) waits as long as TCP does.
    /// Counted from the last byte received, or from the send of a request when none was in flight: a query that
    /// legitimately runs longer (waiting for a lock) is cut off too, so set it above the longest wait callers
    /// accept.
    public var responseTimeoutSeconds: Double?
    /// Statements without parameters (`SET name = value`) run at the start of every session, the first and each
    /// one after a reconnection, before any request: settings that must hold for all of the connection's work.
    /// A statement the server refuses fails nothing else; set it before `connect()`.
    public var sessionStatements: [String] = []

    /// The current state.
    public private(set) var state: State = .idle
    /// How many times a lost connection was re-established.
    public private(set) var reconnections = 0
    /// The last reason a connection failed or was lost (redacted), for logs and `show`.
    public private(set) var lastFailure: String?

    private var conn: OpaquePointer?
    private var poll: PollHandle?
    private let timer: LoopTimer
    /// Fires when requests in flight went `responseTimeoutSeconds` without an answer.
    private let silence: LoopTimer
    private var wasReady = false
    private var failedAttempts = 0
    private var channels: [String] = []
    /// The statements prepared on the current session.
    private var prepared = PreparedStatements()
    /// Requests sent and not yet answered, in send order.
    private var inFlight: [Request] = []
    private var inFlightHead = 0
    /// `connect()` callers: told the outcome of the next attempt.
    private var connectWaiters: [(Result<Void, PostgresError>) -> Void] = []
    /// `waitUntilReady` callers: told when the connection is up, or closed.
    private var readyWaiters: [(Result<Void, PostgresError>) -> Void] = []

    /// A request: the prepares of `preparing` (SQL texts), `statementCount` statements and one sync point.
    private final class Request {
        let statementCount: Int
        /// The statements this request prepares first, in order: their results come before the statements'.
        let preparing: [String]
        /// How many of `preparing` were answered.
        var preparesAnswered = 0
        var results: [PostgresResult] = []
        var firstError: PostgresError?
        /// Whether the current statement's result arrived (its closing `NULL` from `PQgetResult` is next).
        var awaitingEnd = false
        let complete: (Result<[PostgresResult], PostgresError>) -> Void

        init(
            statementCount: Int, preparing: [String], complete: @escaping (Result<[PostgresResult], PostgresError>) -> Void
        ) {
            self.statementCount = statementCount
            self.preparing = preparing
            self.complete = complete
        }
    }

    /// Makes a connection that is not connected yet. Call on the loop thread.
    public init(
        loop: EventLoop, connectionString: PostgresConnectionString,
        reconnectPolicy: PostgresReconnectPolicy = PostgresReconnectPolicy()
    ) {
        precondition(loop.inLoopThread, "PostgresConnection must be created on its loop's thread")
        self.loop = loop
        self.connectionString = connectionString
        self.reconnectPolicy = reconnectPolicy
        timer = LoopTimer(loop: loop)
        silence = LoopTimer(loop: loop)
    }

    deinit {
        if state != .closed && loop.inLoopThread { close() }
    }

    // MARK: public API

    /// Connects, waiting (without blocking the loop) until the connection is up.
    ///
    /// - Throws: `PostgresError` `.connectionFailed` if the first attempt fails (the connection then stays
    ///   `idle`; call `connect` again to retry), `.closed` if it was closed meanwhile.
    public func connect(isolation: isolated (any Actor)? = #isolation) async throws(PostgresError) {
        precondition(loop.inLoopThread, "PostgresConnection.connect must be called on the loop thread")
        switch state {
        case .ready: return
        case .closed: throw PostgresError(kind: .closed, message: "the PostgreSQL connection is closed")
        case .idle, .connecting, .waitingToReconnect: break
        }
        let outcome = await withCheckedContinuation(isolation: isolation) {
            (continuation: CheckedContinuation<Result<Void, PostgresError>, Never>) in
            // Waiting first: an attempt can fail before `startAttempt` returns (no such socket).
            connectWaiters.append { continuation.resume(returning: $0) }
            if state == .idle { startAttempt() }
        }
        try outcome.get()
    }

    /// Waits until the connection is up again after a loss, at most `timeoutSeconds`.
    ///
    /// - Throws: `PostgresError` `.notConnected` on timeout or if `connect()` was never called, `.closed` if it
    ///   is closed meanwhile.
    public func waitUntilReady(timeoutSeconds: Double, isolation: isolated (any Actor)? = #isolation)
        async throws(PostgresError)
    {
        precondition(loop.inLoopThread, "PostgresConnection.waitUntilReady must be called on the loop thread")
        switch state {
        case .ready: return
        case .closed: throw PostgresError(kind: .closed, message: "the PostgreSQL connection is closed")
        case .idle: throw PostgresError(kind: .notConnected, message: "connect() was not called")
        case .connecting, .waitingToReconnect: break
        }
        let deadline = LoopTimer(loop: loop)
        defer { deadline.close() }
        let outcome = await withCheckedContinuation(isolation: isolation) {
            (continuation: CheckedContinuation<Result<Void, PostgresError>, Never>) in
            var resumed = false
            let finish: (Result<Void, PostgresError>) -> Void = { result in
                guard !resumed else { return }
                resumed = true
                continuation.resume(returning: result)
            }
            readyWaiters.append(finish)
            deadline.start(seconds: timeoutSeconds) { [weak self] in
                finish(
                    .failure(
                        PostgresError(
                            kind: .notConnected,
                            message: "PostgreSQL not reachable within \(timeoutSeconds) s: \(self?.lastFailure ?? "")")))
            }
        }
        try outcome.get()
    }

    /// Runs one statement with `parameters` (`$1`, `$2`…) and returns its result.
    ///
    /// - Throws: `PostgresError`: `.server` with the SQLSTATE if the server refused it; `.notConnected` at once
    ///   if the connection is not up; `.connectionLost` if it broke before the answer; `.closed`.
    public func query(
        _ sql: String, _ parameters: [PostgresValue] = [], isolation: isolated (any Actor)? = #isolation
    ) async throws(PostgresError) -> PostgresResult {
        let results = try await pipeline([PostgresStatement(sql, parameters)], isolation: isolation)
        return results[0]
    }

    /// Sends `statements` back to back and one sync point: one round trip, one implicit transaction (all are
    /// committed, or — after the first error — none). Returns one result per statement.
    ///
    /// - Throws: `PostgresError` as `query`; for `.server`, the first statement's error that failed.
    public func pipeline(_ statements: [PostgresStatement], isolation: isolated (any Actor)? = #isolation)
        async throws(PostgresError) -> [PostgresResult]
    {
        precondition(loop.inLoopThread, "PostgresConnection.pipeline must be called on the loop thread")
        guard !statements.isEmpty else { return [] }
        let outcome = await withCheckedContinuation(isolation: isolation) {
            (continuation: CheckedContinuation<Result<[PostgresResult], PostgresError>, Never>) in
            send(statements) { continuation.resume(returning: $0) }
        }
        return try outcome.get()
    }

    /// Listens on `channel` from now on, also after reconnecting; notifications go to `onNotification`. The
    /// channel counts as listened to from the call on: a connection lost before the `LISTEN` is answered listens
    /// on it once it is back (and the call throws).
    /// - Throws: `PostgresError` as `query`.
    public func listen(_ channel: String, isolation: isolated (any Actor)? = #isolation) async throws(PostgresError) {
        if !channels.contains(channel) { channels.append(channel) }
        _ = try await query("LISTEN \(Self.quotedIdentifier(channel))", isolation: isolation)
    }

    /// Stops listening on `channel` (`UNLISTEN`), also after reconnecting. Notifications already received may
    /// still reach `onNotification`.
    /// - Throws: `PostgresError` as `query`.
    public func unlisten(_ channel: String, isolation: isolated (any Actor)? = #isolation) async throws(PostgresError) {
        channels.removeAll { $0 == channel }
        _ = try await query("UNLISTEN \(Self.quotedIdentifier(channel))", isolation: isolation)
    }

    /// Closes the connection: requests in flight fail with `.closed`, no reconnection. Safe to call twice.
    public func close() {
        precondition(loop.inLoopThread, "PostgresConnection.close must be called on the loop thread")
        guard state != .closed else { return }
        state = .closed
        timer.close()
        silence.close()
        dropConnection()
        failInFlight(PostgresError(kind: .closed, message: "the PostgreSQL connection was closed"))
        notifyConnectWaiters(.failure(PostgresError(kind: .closed, message: "the PostgreSQL connection was closed")))
    }

    /// The server's process id for this session (`PQbackendPID`), or `nil` when not connected: the
    /// `senderPID` of notifications this connection sends, and what `pg_terminate_backend` takes.
    public var backendPID: Int32? {
        guard state == .ready, let conn else { return nil }
        return PQbackendPID(conn)
    }

    /// `name` as a double-quoted SQL identifier (for `LISTEN`, which takes no parameters).
    static func quotedIdentifier(_ name: String) -> String {
        "\"" + name.replacing("\"", with: "\"\"") + "\""
    }

    // MARK: connecting

    private func startAttempt() {
        state = .connecting
        guard let conn = PQconnectStart(connectionString.raw) else {
            return attemptFailed("PQconnectStart: out of memory")
        }
        self.conn = conn
        if PQstatus(conn) == CONNECTION_BAD { return attemptFailed(errorMessage()) }
        // Notices (e.g. "relation already exists, skipping") would go to stderr by default.
        PQsetNoticeProcessor(conn, { _, _ in }, nil)
        timer.start(seconds: reconnectPolicy.attemptTimeoutSeconds) { [weak self] in
            self?.attemptFailed("timed out after \(self?.reconnectPolicy.attemptTimeoutSeconds ?? 0) s")
        }
        // libpq: "behave as if PQconnectPoll had last returned PGRES_POLLING_WRITING".
        watch([.writable])
    }

    private func continueConnecting() {
        guard let conn else { return }
        switch PQconnectPoll(conn) {
        case PGRES_POLLING_READING: watch([.readable])
        case PGRES_POLLING_WRITING: watch([.writable])
        case PGRES_POLLING_OK: connected()
        default: attemptFailed(errorMessage())
        }
    }

    private func connected() {
        guard let conn else { return }
        timer.stop()
        guard PQsetnonblocking(conn, 1) == 0, PQenterPipelineMode(conn) == 1 else {
            return attemptFailed("cannot enter non-blocking pipeline mode: \(errorMessage())")
        }
        state = .ready
        failedAttempts = 0
        let isReconnection = wasReady
        wasReady = true
        watch([.readable])
        if isReconnection { reconnections += 1 }
        // The session's settings, and listening again, come first on the new connection, before any request of
        // the callbacks below.
        let setUp = sessionStatements.map { PostgresStatement($0) }
            + channels.map { PostgresStatement("LISTEN \(Self.quotedIdentifier($0))") }
        if !setUp.isEmpty { send(setUp) { _ in } }
        notifyConnectWaiters(.success(()))
        if isReconnection { onReconnect?() }
    }

    private func attemptFailed(_ message: String) {
        guard state == .connecting else { return }
        timer.stop()
        dropConnection()
        lastFailure = "cannot connect to PostgreSQL at \(connectionString): \(message)"
        let error = PostgresError(kind: .connectionFailed, message: lastFailure!)
        if wasReady {
            scheduleReconnect()
        } else {
            state = .idle
        }
        notifyConnectWaiters(.failure(error))
    }

    private func scheduleReconnect() {
        state = .waitingToReconnect
        let delay = reconnectPolicy.delay(afterFailures: failedAttempts, unitRandom: Double.random(in: 0...1))
        failedAttempts += 1
        timer.start(seconds: delay) { [weak self] in
            guard let self, self.state == .waitingToReconnect else { return }
            self.startAttempt()
        }
    }

    /// Tells `connect()` callers the outcome of an attempt, and `waitUntilReady` callers a success or the close.
    private func notifyConnectWaiters(_ result: Result<Void, PostgresError>) {
        let waiters = connectWaiters
        connectWaiters.removeAll()
        for waiter in waiters { waiter(result) }
        if case .failure(let error) = result, error.kind != .closed { return }
        let ready = readyWaiters
        readyWaiters.removeAll()
        for waiter in ready { waiter(result) }
    }

    // MARK: the socket

    /// Watches libpq's current socket for `events`; the socket may change during connection.
    private func watch(_ events: PollHandle.Events) {
        guard let conn else { return }
        let socket = PQsocket(conn)
        guard socket >= 0 else { return socketFailed("no socket: \(errorMessage())") }
        if let poll, poll.socket != socket {
            poll.close()
            self.poll = nil
        }
        do {
            if poll == nil { poll = try PollHandle(loop: loop, socket: socket) }
            try poll!.start(events) { [weak self] status, ready in self?.socketReady(status: status, events: ready) }
        } catch {
            socketFailed("libuv cannot watch the socket: \(error)")
        }
    }

    private func socketReady(status: Int32, events: PollHandle.Events) {
        switch state {
        case .connecting:
            continueConnecting()
        case .ready:
            guard let conn else { return }
            if status < 0 { return connectionLost("socket error \(UVError(code: status, operation: "poll"))") }
            if events.contains(.writable) { flush() }
            guard state == .ready else { return }
            if events.contains(.readable) || events.contains(.disconnect) {
                if PQconsumeInput(conn) == 0 { return connectionLost(errorMessage()) }
                readResults()
                // The server is there: the requests still in flight get a new `responseTimeoutSeconds`.
                armSilenceDeadline()
                deliverNotifications()
                if state == .ready, PQstatus(conn) == CONNECTION_BAD { connectionLost(errorMessage()) }
            }
        case .idle, .waitingToReconnect, .closed:
            break
        }
    }

    private func socketFailed(_ message: String) {
        if state == .connecting { attemptFailed(message) } else { connectionLost(message) }
    }

    /// Writes what libpq has buffered; watches for writability while some remains.
    private func flush() {
        guard let conn else { return }
        switch PQflush(conn) {
        case 0: watch([.readable])
        case 1: watch([.readable, .writable])
        default: connectionLost(errorMessage())
        }
    }

    private func connectionLost(_ message: String) {
        guard state == .ready else { return }
        lastFailure = "lost the PostgreSQL connection to \(connectionString): \(message)"
        dropConnection()
        failInFlight(PostgresError(kind: .connectionLost, message: lastFailure!))
        scheduleReconnect()
    }

    /// Starts (or restarts) the deadline for an answer while requests are in flight; stops it when none is.
    private func armSilenceDeadline() {
        guard let seconds = responseTimeoutSeconds, state == .ready, inFlightHead < inFlight.count else {
            return silence.stop()
        }
        silence.start(seconds: seconds) { [weak self] in
            guard let self else { return }
            self.connectionLost(
                "no answer for \(seconds) s to \(self.inFlight.count - self.inFlightHead) request(s) in flight "
                    + "(the network was cut or the server stalled)")
        }
    }

    /// Closes the poll handle before libpq closes the socket (libuv must not watch a closed descriptor).
    private func dropConnection() {
        silence.stop()
        prepared.removeAll()
        poll?.close()
        poll = nil
        if let conn { PQfinish(conn) }
        conn = nil
    }

    // MARK: requests

    private func send(_ statements: [PostgresStatement], complete: @escaping (Result<[PostgresResult], PostgresError>) -> Void) {
        guard state == .ready, let conn else {
            let error: PostgresError =
                state == .closed
                ? PostgresError(kind: .closed, message: "the PostgreSQL connection is closed")
                : PostgresError(
                    kind: .notConnected,
                    message: "not connected to PostgreSQL at \(connectionString)\(lastFailure.map { " (\($0))" } ?? "")")
            return complete(.failure(error))
        }
        // Prepares first, before any statement of this request: an error of one of its statements cannot skip
        // a prepare that a later request, already sent, relies on.
        var preparing: [String] = []
        for statement in statements where !statement.parameters.isEmpty && prepared.name(of: statement.sql) == nil {
            guard let name = prepared.add(statement.sql) else { break }
            preparing.append(statement.sql)
            if PQsendPrepare(conn, name, statement.sql, 0, nil) == 0 {
                let message = errorMessage()
                complete(.failure(PostgresError(kind: .connectionLost, message: message)))
                return connectionLost(message)
            }
        }
        for statement in statements {
            let values = statement.parameters.map { $0.wireText.map { strdup($0) } ?? nil }
            defer { for value in values { free(value) } }
            let name = values.isEmpty ? nil : prepared.name(of: statement.sql)
            let sent = values.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { pointers in
                    if let name {
                        return PQsendQueryPrepared(conn, name, Int32(pointers.count), pointers.baseAddress, nil, nil, 0)
                    }
                    return PQsendQueryParams(conn, statement.sql, Int32(pointers.count), nil, pointers.baseAddress, nil, nil, 0)
                }
            }
            if sent == 0 {
                // Only a broken connection refuses to queue a statement; nothing of this request was sent whole.
                let message = errorMessage()
                complete(.failure(PostgresError(kind: .connectionLost, message: message)))
                return connectionLost(message)
            }
        }
        if PQpipelineSync(conn) == 0 {
            let message = errorMessage()
            complete(.failure(PostgresError(kind: .connectionLost, message: message)))
            return connectionLost(message)
        }
        inFlight.append(Request(statementCount: statements.count, preparing: preparing, complete: complete))
        // Counted from this send only if nothing was waiting: a busy client must not keep a dead server alive.
        if inFlight.count - inFlightHead == 1 { armSilenceDeadline() }
        flush()
    }

    /// Takes every result libpq has complete, in order, and completes the requests they finish.
    private func readResults() {
        while state == .ready, let conn, PQisBusy(conn) == 0 {
            guard inFlightHead < inFlight.count else {
                // Nothing is expected; in pipeline mode an idle connection answers NULL here.
                guard let stray = PQgetResult(conn) else { return }
                PQclear(stray)
                continue
            }
            let request = inFlight[inFlightHead]
            guard let result = PQgetResult(conn) else {
                // NULL ends one statement's results; without a result before it, nothing more is ready yet.
                guard request.awaitingEnd else { return }
                request.awaitingEnd = false
                continue
            }
            defer { PQclear(result) }
            let status = PQresultStatus(result)
            if request.preparesAnswered < request.preparing.count, status != PGRES_PIPELINE_SYNC {
                preparedAnswered(request, status: status, result: result)
                continue
            }
            switch status {
            case PGRES_PIPELINE_SYNC:
                inFlightHead += 1
                if inFlightHead == inFlight.count {
                    inFlight.removeAll(keepingCapacity: true)
                    inFlightHead = 0
                }
                if let error = request.firstError {
                    request.complete(.failure(error))
                } else if request.results.count == request.statementCount {
                    request.complete(.success(request.results))
                } else {
                    request.complete(
                        .failure(
                            PostgresError(
                                kind: .server,
                                message: "\(request.results.count) results for \(request.statementCount) statements")))
                }
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                request.results.append(PostgresResult(result))
                request.awaitingEnd = true
            case PGRES_PIPELINE_ABORTED:
                // Skipped after an earlier error of the same request, which is the one reported.
                request.awaitingEnd = true
            default:
                noteError(result, of: request)
                request.awaitingEnd = true
            }
        }
    }

    /// Settles the answer to the next prepare of `request`: a prepare refused (or skipped after an earlier one
    /// was) leaves no statement of that name, so the SQL is sent unnamed or prepared again next time.
    private func preparedAnswered(_ request: Request, status: ExecStatusType, result: OpaquePointer) {
        let sql = request.preparing[request.preparesAnswered]
        request.preparesAnswered += 1
        request.awaitingEnd = true
        guard status != PGRES_COMMAND_OK else { return }
        prepared.remove(sql)
        if status != PGRES_PIPELINE_ABORTED { noteError(result, of: request) }
    }

    /// Records `result`'s error as the request's, unless it has one already (the first error is the one reported).
    private func noteError(_ result: OpaquePointer, of request: Request) {
        guard request.firstError == nil else { return }
        let sqlState = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        let message = String(cString: PQresultErrorMessage(result)).trimmingTrailingNewlines()
        request.firstError = PostgresError(kind: .server, sqlState: sqlState, message: connectionString.redact(message))
    }

    private func deliverNotifications() {
        while let conn, let notice = PQnotifies(conn) {
            let notification = PostgresNotification(
                channel: String(cString: notice.pointee.relname), payload: String(cString: notice.pointee.extra),
                senderPID: notice.pointee.be_pid)
            PQfreemem(notice)
            onNotification?(notification)
        }
    }

    private func failInFlight(_ error: PostgresError) {
        let pending = inFlight[inFlightHead...]
        inFlight.removeAll()
        inFlightHead = 0
        for request in pending { request.complete(.failure(error)) }
    }

    private func errorMessage() -> String {
        guard let conn, let text = PQerrorMessage(conn) else { return "unknown libpq error" }
        let message = String(cString: text).trimmingTrailingNewlines()
        return connectionString.redact(message.isEmpty ? "unknown libpq error" : message)
    }
}
