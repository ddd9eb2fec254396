import CMicroHTTPD

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The HTTP server under `web`: GNU libmicrohttpd (Debian's `libmicrohttpd-dev`), wrapped once here.
///
/// Why libmicrohttpd: HTTP/1.1 parsing is where servers get exploited (request smuggling, header folding, chunked
/// bodies), and libmicrohttpd is a small, long-fuzzed C library that Debian keeps patched, with a plain C API and
/// no dependencies. libuv has no HTTP, and Debian's `llhttp` would still leave connections, keep-alive and
/// chunked replies to us. Its thread-per-connection mode suits an event stream: each open tab blocks only its
/// own thread on its own `watch` connection to the daemon, and a fault here cannot touch the daemon's loop, which
/// is another process.
final class WebServer: @unchecked Sendable {
    /// The largest request body taken, in bytes (an action names at most a page's selection of ids).
    static let maxBodyBytes = 1 << 20
    /// Connections served at once; past it new ones wait in the kernel's backlog.
    static let connectionLimit: UInt32 = 128

    /// The port actually bound (the one asked for, or the kernel's choice for 0).
    let port: Int
    private let listener: Int32
    private var daemon: OpaquePointer?
    /// Answers each request; set once before `start`.
    var handler: (@Sendable (WebRequest) -> WebResponse)?
    /// Called once per request after it is answered, with its method, path and status (the debug log).
    var onAnswered: (@Sendable (String, String, Int) -> Void)?

    /// Binds 127.0.0.1:`port` (0: any free port) and listens.
    /// - Throws: `WebError` when the port cannot be bound (in use, or below 1024 without the right).
    init(port: Int) throws(WebError) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw WebError("cannot create a socket: \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw WebError(
                "cannot listen on 127.0.0.1:\(port) (\(reason)); choose another --port, or 0 for any free one")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &length) }
        }
        listener = fd
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Starts serving on threads of libmicrohttpd's own.
    /// - Throws: `WebError` if libmicrohttpd does not start.
    func start() throws(WebError) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        daemon = tb_mhd_start(
            listener, Self.connectionLimit, 64 * 1024, webAccessHandler, me, webRequestCompleted, me)
        guard daemon != nil else { throw WebError("the HTTP server (libmicrohttpd) did not start") }
    }

    /// Stops serving and closes the port.
    func stop() {
        if let daemon { MHD_stop_daemon(daemon) }
        daemon = nil
        close(listener)
    }

    // MARK: - From libmicrohttpd's threads

    /// What is kept between the calls for one request: its body so far.
    final class Exchange {
        var body: [UInt8] = []
        var tooLarge = false
    }

    fileprivate func handle(
        _ connection: OpaquePointer, url: String, method: String, data: UnsafePointer<CChar>?,
        size: UnsafeMutablePointer<Int>, context: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        guard let stored = context.pointee else {
            // The first call only announces the request; its body (if any) comes in the calls after.
            context.pointee = Unmanaged.passRetained(Exchange()).toOpaque()
            return .YES
        }
        let exchange = Unmanaged<Exchange>.fromOpaque(stored).takeUnretainedValue()
        if size.pointee > 0 {
            if let data, !exchange.tooLarge {
                if exchange.body.count + size.pointee > Self.maxBodyBytes {
                    exchange.tooLarge = true
                    exchange.body = []
                } else {
                    data.withMemoryRebound(to: UInt8.self, capacity: size.pointee) {
                        exchange.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: size.pointee))
                    }
                }
            }
            size.pointee = 0
            return .YES
        }
        let request = WebRequest(
            method: method, path: url, query: Self.values(connection, .GET_ARGUMENT_KIND),
            headers: Dictionary(Self.values(connection, .HEADER_KIND).map { ($0.key.lowercased(), $0.value) }) { $1 },
            cookies: Self.values(connection, .COOKIE_KIND), body: exchange.body)
        let response: WebResponse
        if exchange.tooLarge {
            response = .error(413, code: "request_too_large", "the request body is over 1 MiB; select fewer jobs")
        } else {
            response = handler?(request) ?? .text(500, "no handler")
        }
        let status = queue(response, on: connection)
        onAnswered?(method, url, status)
        return .YES
    }

    /// Queues `response`; returns its status.
    private func queue(_ response: WebResponse, on connection: OpaquePointer) -> Int {
        let reply: OpaquePointer?
        let status: Int
        var headers = WebHeaders.common
        switch response {
        case .whole(let code, let extra, var body):
            status = code
            headers += extra
            reply = body.withUnsafeMutableBytes {
                MHD_create_response_from_buffer($0.count, $0.baseAddress, .RESPMEM_MUST_COPY)
            }
        case .events(let stream):
            status = 200
            headers += [("Content-Type", "text/event-stream; charset=utf-8"), ("X-Accel-Buffering", "no")]
            reply = MHD_create_response_from_callback(
                UInt64.max, 4096, webStreamRead, Unmanaged.passRetained(stream).toOpaque(), webStreamFree)
        }
        guard let reply else { return 500 }
        for (name, value) in headers { MHD_add_response_header(reply, name, value) }
        MHD_queue_response(connection, UInt32(status), reply)
        MHD_destroy_response(reply)
        return status
    }

    private final class Collected {
        var values: [String: String] = [:]
    }

    /// The connection's values of `kind` (header fields, query arguments, cookies).
    private static func values(_ connection: OpaquePointer, _ kind: MHD_ValueKind) -> [String: String] {
        let collected = Collected()
        let box = Unmanaged.passUnretained(collected).toOpaque()
        MHD_get_connection_values(
            connection, kind,
            { cls, _, key, value in
                guard let cls, let key else { return .YES }
                let into = Unmanaged<Collected>.fromOpaque(cls).takeUnretainedValue()
                into.values[String(cString: key)] = value.map { String(cString: $0) } ?? ""
                return .YES
            }, box)
        return collected.values
    }
}

/// What `web` could not do, with what to do about it.
struct WebError: Error, CustomStringConvertible {
    /// What went wrong and what to do.
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

private func webAccessHandler(
    cls: UnsafeMutableRawPointer?, connection: OpaquePointer?, url: UnsafePointer<CChar>?,
    method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?, data: UnsafePointer<CChar>?,
    size: UnsafeMutablePointer<Int>?, context: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let cls, let connection, let url, let method, let size, let context else { return .NO }
    let server = Unmanaged<WebServer>.fromOpaque(cls).takeUnretainedValue()
    return server.handle(
        connection, url: String(cString: url), method: String(cString: method), data: data, size: size,
        context: context)
}

private func webRequestCompleted(
    cls: UnsafeMutableRawPointer?, connection: OpaquePointer?, context: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    code: MHD_RequestTerminationCode
) {
    guard let context, let stored = context.pointee else { return }
    Unmanaged<WebServer.Exchange>.fromOpaque(stored).release()
    context.pointee = nil
}

private func webStreamRead(
    cls: UnsafeMutableRawPointer?, position: UInt64, buffer: UnsafeMutablePointer<CChar>?, max: Int
) -> Int {
    guard let cls, let buffer, max > 0 else { return -2 }
    let stream = Unmanaged<JobEventStream>.fromOpaque(cls).takeUnretainedValue()
    let chunk = stream.read(max: max)
    chunk.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
    return chunk.count
}

private func webStreamFree(cls: UnsafeMutableRawPointer?) {
    guard let cls else { return }
    Unmanaged<JobEventStream>.fromOpaque(cls).release()
}
