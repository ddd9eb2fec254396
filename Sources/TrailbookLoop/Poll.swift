import CUV

/// Watches a socket for readability and writability (`uv_poll_t`, https://docs.libuv.org/en/v1.x/poll.html).
///
/// For libraries that do their own I/O on a socket they own, such as libcurl's multi interface: libuv only says
/// when the socket is ready, the library reads and writes. Closing the handle does not close the socket.
public final class PollHandle: LoopHandle {
    /// Which readiness to watch for, and which a callback reports (`uv_poll_event`).
    public struct Events: OptionSet, Sendable, Hashable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// The socket can be read without blocking (`UV_READABLE`).
        public static let readable = Events(rawValue: Int32(UV_READABLE.rawValue))
        /// The socket can be written without blocking (`UV_WRITABLE`).
        public static let writable = Events(rawValue: Int32(UV_WRITABLE.rawValue))
        /// The peer closed its side (`UV_DISCONNECT`).
        public static let disconnect = Events(rawValue: Int32(UV_DISCONNECT.rawValue))
    }

    private var onEvent: ((_ status: Int32, _ events: Events) -> Void)?

    /// The socket being watched.
    public let socket: Int32

    /// Makes a stopped poll handle for `socket` on `loop`. Call on the loop thread.
    /// - Throws: `UVError` if libuv rejects the socket (for example `EBADF`, or `EEXIST` when another poll handle
    ///   already watches it).
    public init(loop: EventLoop, socket: Int32) throws(UVError) {
        self.socket = socket
        super.init(loop: loop, type: UV_POLL)
        let rc = uv_poll_init_socket(loop.raw, poll, socket)
        if rc < 0 {
            // The handle was never initialised, so there is nothing to close: free the memory directly.
            UnsafeMutableRawPointer(handle).deallocate()
            throw UVError(code: rc, operation: "uv_poll_init_socket \(socket)")
        }
        adopt()
    }

    private var poll: UnsafeMutablePointer<uv_poll_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_poll_t.self)
    }

    /// Starts (or changes) watching for `events`.
    ///
    /// - Parameters:
    ///   - events: the readiness to watch for.
    ///   - body: runs on the loop thread with libuv's status (0, or a negative error code such as `UV_EBADF`) and
    ///     the events that are ready.
    /// - Throws: `UVError` if libuv cannot start watching.
    public func start(_ events: Events, _ body: @escaping (_ status: Int32, _ events: Events) -> Void) throws(UVError) {
        guard !isClosing else { return }
        onEvent = body
        let rc = uv_poll_start(poll, events.rawValue) { raw, status, events in
            PollHandle.owner(of: raw).onEvent?(status, Events(rawValue: events))
        }
        try UVError.check(rc, "uv_poll_start \(socket)")
    }

    /// Stops watching; `start` may be called again.
    public func stop() {
        guard !isClosing else { return }
        uv_poll_stop(poll)
        onEvent = nil
    }

    override func dropCallbacks() { onEvent = nil }
}
