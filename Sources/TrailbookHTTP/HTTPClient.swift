import CCurl
import TrailbookLoop

/// An HTTP client on a libuv loop: libcurl's multi interface driven by `curl_multi_socket_action`, with one
/// `PollHandle` per socket curl uses and one `LoopTimer` for curl's timeouts (the pattern of curl's
/// `docs/examples/multi-uv.c`). No thread per transfer, no blocking call on the loop.
///
/// Loop-confined: create it, call it and close it on its loop's thread (for `EventLoop.main`, from `@LoopActor`
/// code). Connections are reused between requests to the same host.
///
/// Cancelling the task that awaits `perform` aborts the transfer at once (the easy handle leaves the multi
/// handle) and `perform` throws `.cancelled`. `close()` aborts every transfer in flight the same way.
///
/// It owns the per-origin holds: a `429 Too Many Requests` (RFC 6585 §4) from an origin (scheme, host, port)
/// holds every request to that origin — whoever makes it — for the response's `Retry-After` (1 s without one,
/// at most `maxHoldSeconds`); until then `perform` does not send and throws `.held` with the time left.
public final class HTTPClient {
    /// The longest hold a `Retry-After` can set, in seconds: 10 min, so a server's mistake cannot stop uploads
    /// for days.
    public static let maxHoldSeconds = 600.0
    /// The hold after a `429` without `Retry-After`, in seconds.
    public static let defaultHoldSeconds = 1.0

    /// The loop the client runs on.
    public let loop: EventLoop
    private let multi: UnsafeMutableRawPointer
    private let timer: LoopTimer
    private var sockets: [Int32: PollHandle] = [:]
    private var transfers: [UnsafeMutableRawPointer: Transfer] = [:]
    private var nextID = 0
    private var isClosed = false
    /// Per origin (`http://host:port`), the monotonic time (seconds) its hold ends.
    private var holds: [String: Double] = [:]

    /// Makes a client on `loop`. Call on the loop thread.
    public init(loop: EventLoop) {
        precondition(loop.inLoopThread, "HTTPClient must be created on its loop's thread")
        _ = Self.curlGlobalInit
        self.loop = loop
        multi = curl_multi_init()!
        timer = LoopTimer(loop: loop)
        let me = Unmanaged.passUnretained(self).toOpaque()
        // The callbacks can only run inside curl_multi_* calls this client makes, so an unretained pointer is safe.
        tb_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, me)
        tb_multi_setopt_socket_cb(multi) { _, socket, what, data, _ in
            Unmanaged<HTTPClient>.fromOpaque(data!).takeUnretainedValue().watch(socket: socket, what: what)
            return 0
        }
        tb_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, me)
        tb_multi_setopt_timer_cb(multi) { _, milliseconds, data in
            Unmanaged<HTTPClient>.fromOpaque(data!).takeUnretainedValue().schedule(afterMilliseconds: milliseconds)
            return 0
        }
    }

    /// `curl_global_init`, once per process, before the first handle (it is not thread-safe; Swift runs a static
    /// initialiser exactly once).
    private static let curlGlobalInit: Void = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }()

    deinit {
        if !isClosed && loop.inLoopThread { close() }
    }

    /// Sends `request` and returns the server's final response.
    ///
    /// - Parameters:
    ///   - request: what to send.
    ///   - onSendProgress: called on the loop thread with the number of body bytes sent so far, each time it
    ///     changes (often: every few KiB). Throttle before publishing.
    /// - Returns: the response, whatever its status.
    /// - Throws: `HTTPError`: `.cancelled` when the task is cancelled or the client closed; the transport's failure
    ///   otherwise.
    ///   - isolation: the caller's actor, which must run on `loop` (for `EventLoop.main`, `LoopActor`); filled in
    ///     by the compiler.
    public func perform(
        _ request: HTTPRequest, onSendProgress: ((Int64) -> Void)? = nil,
        isolation: isolated (any Actor)? = #isolation
    ) async throws(HTTPError) -> HTTPResponse {
        precondition(loop.inLoopThread, "HTTPClient.perform must be called on the loop thread")
        if Task.isCancelled { throw HTTPError(kind: .cancelled, message: "task cancelled before the request started") }
        if isClosed { throw HTTPError(kind: .cancelled, message: "HTTP client closed") }
        if let left = holdRemaining(for: request.url) {
            throw HTTPError(
                kind: .held, message: "\(Self.origin(of: request.url)) answered 429 Too Many Requests; held for \(left) s more",
                retryAfterSeconds: left)
        }
        nextID += 1
        let transfer = try Transfer(id: nextID, request: request, onSendProgress: onSendProgress)
        let id = transfer.id
        let bound = LoopBound(self, loop: loop)
        // Both closures run on `isolation`, that is on the loop thread, so the transfer starts there.
        let outcome = await withTaskCancellationHandler(
            operation: {
                await withCheckedContinuation(isolation: isolation) {
                    (continuation: CheckedContinuation<Result<HTTPResponse, HTTPError>, Never>) in
                    precondition(loop.inLoopThread, "HTTPClient.perform must be called from an actor on its loop")
                    transfer.continuation = continuation
                    start(transfer)
                }
            },
            onCancel: {
            // Runs on the cancelling thread: hop to the loop and refer to the transfer by id.
                bound.loop.execute { bound.value.cancel(id: id) }
            }, isolation: isolation)
        let response = try outcome.get()
        if response.status == 429 {
            let wait = min(Self.maxHoldSeconds, response.retryAfterSeconds(now: HTTPClock.unix()) ?? Self.defaultHoldSeconds)
            let origin = Self.origin(of: request.url)
            holds[origin] = max(holds[origin] ?? 0, HTTPClock.monotonic() + wait)
        }
        return response
    }

    /// Seconds until the hold on `url`'s origin ends, or `nil` if it is not held (see the type's documentation).
    public func holdRemaining(for url: String) -> Double? {
        let origin = Self.origin(of: url)
        guard let until = holds[origin] else { return nil }
        let left = until - HTTPClock.monotonic()
        guard left > 0 else {
            holds[origin] = nil
            return nil
        }
        return left
    }

    /// `scheme://host:port` of `url`, lower-cased, without user info, path or query: what a hold applies to.
    static func origin(of url: String) -> String {
        let lower = url.lowercased()
        guard let colon = lower.firstIndex(of: ":"), lower[colon...].hasPrefix("://") else { return lower }
        let scheme = lower[..<colon]
        var authority = lower[lower.index(colon, offsetBy: 3)...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let hasPort = authority.hasPrefix("[") ? authority.contains("]:") : authority.contains(":")
        return scheme + "://" + authority + (hasPort ? "" : (scheme == "https" ? ":443" : ":80"))
    }

    /// Aborts every transfer in flight (their `perform` calls throw `.cancelled`), then frees curl's handles and
    /// closes the poll and timer handles. Further `perform` calls throw `.cancelled`. Safe to call twice.
    public func close() {
        precondition(loop.inLoopThread, "HTTPClient.close must be called on the loop thread")
        guard !isClosed else { return }
        isClosed = true
        for transfer in transfers.values.sorted(by: { $0.id < $1.id }) {
            abort(transfer, HTTPError(kind: .cancelled, message: "HTTP client closed"))
        }
        curl_multi_cleanup(multi)
        timer.close()
        for poll in sockets.values { poll.close() }
        sockets.removeAll()
    }

    /// The number of transfers in flight.
    public var activeTransferCount: Int { transfers.count }

    // MARK: transfers

    private func start(_ transfer: Transfer) {
        transfers[transfer.easy] = transfer
        let code = curl_multi_add_handle(multi, transfer.easy)
        if code != CURLM_OK {
            transfers[transfer.easy] = nil
            transfer.fail(HTTPError(kind: .other, message: String(cString: curl_multi_strerror(code))))
        }
        // curl_multi_add_handle set a timeout of 0 through the timer callback: the transfer starts from the loop.
    }

    private func cancel(id: Int) {
        guard let transfer = transfers.values.first(where: { $0.id == id }) else { return }
        abort(transfer, HTTPError(kind: .cancelled, message: "transfer cancelled"))
    }

    /// Takes `transfer` out of the multi handle (curl drops its connection if the request was under way) and
    /// completes it with `error`. Never called from inside a curl callback.
    private func abort(_ transfer: Transfer, _ error: HTTPError) {
        transfers[transfer.easy] = nil
        curl_multi_remove_handle(multi, transfer.easy)
        transfer.fail(error)
    }

    // MARK: curl multi callbacks and the loop events that drive it

    /// CURLMOPT_SOCKETFUNCTION: start, change or stop watching `socket`.
    private func watch(socket: curl_socket_t, what: Int32) {
        if what == CURL_POLL_REMOVE {
            sockets.removeValue(forKey: socket)?.close()
            return
        }
        let poll: PollHandle
        if let existing = sockets[socket] {
            poll = existing
        } else {
            do {
                poll = try PollHandle(loop: loop, socket: socket)
            } catch {
                return  // curl then times the transfer out; libuv refusing a socket curl made does not happen.
            }
            sockets[socket] = poll
        }
        var events: PollHandle.Events = []
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { events.insert(.readable) }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { events.insert(.writable) }
        try? poll.start(events) { [weak self] status, ready in
            self?.socketReady(socket, status: status, events: ready)
        }
    }

    /// CURLMOPT_TIMERFUNCTION: curl wants `socketAction(timeout)` after `milliseconds` (-1: never). It must not be
    /// called from inside this callback, so the loop timer calls it, even for 0.
    private func schedule(afterMilliseconds milliseconds: Int) {
        guard !isClosed else { return }
        if milliseconds < 0 {
            timer.stop()
        } else {
            timer.start(milliseconds: UInt64(milliseconds)) { [weak self] in
                self?.socketAction(CURL_SOCKET_TIMEOUT, events: 0)
            }
        }
    }

    private func socketReady(_ socket: curl_socket_t, status: Int32, events: PollHandle.Events) {
        var flags: Int32 = 0
        if status < 0 {
            flags = CURL_CSELECT_ERR
        } else {
            if events.contains(.readable) { flags |= CURL_CSELECT_IN }
            if events.contains(.writable) { flags |= CURL_CSELECT_OUT }
        }
        socketAction(socket, events: flags)
    }

    private func socketAction(_ socket: curl_socket_t, events: Int32) {
        guard !isClosed else { return }
        var running: Int32 = 0
        curl_multi_socket_action(multi, socket, events, &running)
        collectFinished()
    }

    private func collectFinished() {
        var pending: Int32 = 0
        while let message = curl_multi_info_read(multi, &pending) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let result = message.pointee.data.result
            guard let transfer = transfers.removeValue(forKey: easy) else { continue }
            curl_multi_remove_handle(multi, easy)
            transfer.finish(result)
        }
    }
}

/// A value that may cross threads but is only touched on its loop's thread (swift-nio's `NIOLoopBound`): lets a
/// `@Sendable` closure carry a loop-confined object to `loop.execute`.
struct LoopBound<Value>: @unchecked Sendable {
    private let _value: Value
    let loop: EventLoop

    init(_ value: Value, loop: EventLoop) {
        _value = value
        self.loop = loop
    }

    /// The value. Traps off the loop thread.
    var value: Value {
        precondition(loop.inLoopThread, "LoopBound value used off its loop's thread")
        return _value
    }
}

