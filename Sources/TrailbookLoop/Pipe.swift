import CUV

#if canImport(Glibc)
    import Glibc
#endif

/// A listening Unix-domain socket (`uv_pipe_t`, https://docs.libuv.org/en/v1.x/pipe.html).
public final class PipeServer: LoopHandle {
    private var onConnection: ((PipeConnection) -> Void)?

    /// Binds a socket at `path` with mode 0600 and starts listening.
    ///
    /// A stale socket file left by a crashed daemon is removed first. The socket is created under a 0177 umask,
    /// so it is never, even briefly, open to other users.
    /// - Parameters:
    ///   - path: the socket path (at most 107 bytes, the `sun_path` limit).
    ///   - backlog: the listen backlog.
    ///   - onConnection: runs on the loop thread with each accepted connection, not yet reading.
    /// - Throws: `UVError` if the path is too long, a file other than a socket is there (`EEXIST`: it is never
    ///   removed), or the socket cannot be bound or listened on.
    public init(loop: EventLoop, path: String, backlog: Int32 = 128, onConnection: @escaping (PipeConnection) -> Void)
        throws(UVError)
    {
        super.init(loop: loop, type: UV_NAMED_PIPE)
        let pipe = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_pipe_t.self)
        precondition(uv_pipe_init(loop.raw, pipe, 0) == 0)
        adopt()
        guard path.utf8.count <= 107 else {
            close()
            throw UVError(code: -ENAMETOOLONG, operation: "bind \(path)")
        }
        // Only a socket is replaced (a stale one: the caller refuses to start over a live one). Anything else
        // there, a user's file named by a mistyped `--socket`, is left alone.
        var info = stat()
        if lstat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else {
                close()
                throw UVError(code: -EEXIST, operation: "bind \(path), which is a file that is not a socket (left as it is; give another path)")
            }
            unlink(path)
        }
        let previousMask = umask(0o177)
        let bound = uv_pipe_bind(pipe, path)
        umask(previousMask)
        if bound < 0 {
            close()
            throw UVError(code: bound, operation: "bind \(path)")
        }
        try startListening(backlog: backlog, onConnection: onConnection, what: path)
    }

    /// Listens on a Unix stream socket that is already bound and listening, such as the one a service manager
    /// passes by socket activation (`LISTEN_FDS`). The server owns `descriptor` from now on and closes it.
    /// - Parameters:
    ///   - descriptor: a bound, listening `AF_UNIX` `SOCK_STREAM` socket.
    ///   - backlog: the listen backlog (libuv calls `listen` again; the larger of the two applies).
    ///   - onConnection: runs on the loop thread with each accepted connection, not yet reading.
    /// - Throws: `UVError` if libuv cannot adopt the descriptor or listen on it.
    public init(
        loop: EventLoop, descriptor: Int32, backlog: Int32 = 128, onConnection: @escaping (PipeConnection) -> Void
    ) throws(UVError) {
        super.init(loop: loop, type: UV_NAMED_PIPE)
        let pipe = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_pipe_t.self)
        precondition(uv_pipe_init(loop.raw, pipe, 0) == 0)
        adopt()
        let opened = uv_pipe_open(pipe, descriptor)
        if opened < 0 {
            close()
            throw UVError(code: opened, operation: "open listening descriptor \(descriptor)")
        }
        try startListening(backlog: backlog, onConnection: onConnection, what: "descriptor \(descriptor)")
    }

    private func startListening(backlog: Int32, onConnection: @escaping (PipeConnection) -> Void, what: String)
        throws(UVError)
    {
        let pipe = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_pipe_t.self)
        self.onConnection = onConnection
        let listening = uv_listen(UVHandle.stream(pipe), backlog) { raw, status in
            let server = PipeServer.owner(of: raw)
            guard status == 0 else { return }
            let connection = PipeConnection(loop: server.loop)
            if uv_accept(raw, UVHandle.stream(connection.handle)) == 0 {
                server.onConnection?(connection)
            } else {
                connection.close()
            }
        }
        if listening < 0 {
            close()
            throw UVError(code: listening, operation: "listen \(what)")
        }
    }

    override func dropCallbacks() { onConnection = nil }
}

/// One connected Unix-domain stream: reads arrive as byte chunks, writes are queued by libuv.
public final class PipeConnection: LoopHandle {
    private var onRead: ((UnsafeRawBufferPointer) -> Void)?
    private var onEnd: ((UVError?) -> Void)?
    /// Set when a write failed (the peer is gone, `EPIPE`): nothing more will reach it.
    public private(set) var writeFailed = false

    init(loop: EventLoop) {
        super.init(loop: loop, type: UV_NAMED_PIPE)
        precondition(uv_pipe_init(loop.raw, UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_pipe_t.self), 0) == 0)
        adopt()
    }

    private var stream: UnsafeMutablePointer<uv_stream_t> { UVHandle.stream(handle) }

    /// The user id of the process at the other end (`SO_PEERCRED`), or `nil` if it cannot be read.
    public var peerUID: uid_t? {
        var fd: uv_os_fd_t = -1
        guard !isClosing, uv_fileno(handle, &fd) == 0 else { return nil }
        let uid = tb_peer_uid(fd)
        return uid < 0 ? nil : uid_t(uid)
    }

    /// Whether the peer has closed its end entirely (`POLLHUP`, or the connection is closing): nothing written
    /// now can reach it. A peer that only half-closed (`shutdown(SHUT_WR)`, as `nc -N` does) still reads its
    /// replies and does not count. One `poll` with a zero timeout.
    public var peerClosed: Bool {
        var fd: uv_os_fd_t = -1
        guard !isClosing, uv_fileno(handle, &fd) == 0 else { return true }
        var entry = pollfd(fd: fd, events: 0, revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLHUP) != 0
    }

    /// Starts reading.
    ///
    /// - Parameters:
    ///   - onRead: runs on the loop thread with each chunk read; the bytes are valid only during the call.
    ///   - onEnd: runs once when the peer hangs up (`nil`) or a read fails; close the connection then.
    public func startReading(onRead: @escaping (UnsafeRawBufferPointer) -> Void, onEnd: @escaping (UVError?) -> Void) {
        guard !isClosing else { return }
        self.onRead = onRead
        self.onEnd = onEnd
        uv_read_start(
            stream,
            { _, suggested, buffer in
                buffer!.pointee = uv_buf_init(malloc(suggested).assumingMemoryBound(to: CChar.self), UInt32(suggested))
            },
            { raw, count, buffer in
                let connection = PipeConnection.owner(of: raw)
                defer { free(buffer!.pointee.base) }
                if count > 0 {
                    connection.onRead?(UnsafeRawBufferPointer(start: buffer!.pointee.base, count: count))
                } else if count < 0 {
                    let end = connection.onEnd
                    connection.onRead = nil
                    connection.onEnd = nil
                    uv_read_stop(raw)
                    end?(Int32(count) == UV_EOF.rawValue ? nil : UVError(code: Int32(count), operation: "read"))
                }
            })
    }

    /// Stops reading; already queued writes still go out.
    public func stopReading() {
        guard !isClosing else { return }
        uv_read_stop(stream)
    }

    /// Queues `bytes` for writing. Does nothing once the connection is closing.
    ///
    /// The bytes are copied, so the caller may reuse its buffer at once. Errors (the peer hung up) surface on the
    /// read side as `onEnd`.
    public func write(_ bytes: some Collection<UInt8>) {
        guard !isClosing, !bytes.isEmpty else { return }
        let count = bytes.count
        let memory = malloc(count)!.assumingMemoryBound(to: UInt8.self)
        _ = UnsafeMutableBufferPointer(start: memory, count: count).initialize(from: bytes)
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.pointee.data = UnsafeMutableRawPointer(memory)
        var buffer = uv_buf_init(UnsafeMutableRawPointer(memory).assumingMemoryBound(to: CChar.self), UInt32(count))
        let rc = uv_write(request, stream, &buffer, 1) { request, status in
            // The handle is still valid here: libuv runs write callbacks (with UV_ECANCELED) before a close callback.
            if status < 0 { PipeConnection.owner(of: request!.pointee.handle).writeFailed = true }
            free(request!.pointee.data)
            request!.deallocate()
        }
        if rc < 0 {
            writeFailed = true
            free(memory)
            request.deallocate()
        }
    }

    /// Closes the connection once every queued write has gone out (`uv_shutdown`, then `uv_close`), so a last
    /// reply (an error before hanging up) is not discarded the way `close()` discards pending writes.
    public func closeAfterWriting() {
        guard !isClosing else { return }
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        let rc = uv_shutdown(request, stream) { request, _ in
            PipeConnection.owner(of: request!.pointee.handle).close()
            request!.deallocate()
        }
        if rc < 0 {
            request.deallocate()
            close()
        }
    }

    /// Bytes queued for writing that the peer has not yet taken (`uv_stream_get_write_queue_size`).
    ///
    /// A slow reader shows up here: callers cap it to keep memory bounded.
    public var pendingWriteBytes: Int { isClosing ? 0 : uv_stream_get_write_queue_size(stream) }

    override func dropCallbacks() {
        onRead = nil
        onEnd = nil
    }
}
