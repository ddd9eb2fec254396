import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Why a request to the daemon did not get an answer.
public struct ClientError: Error, CustomStringConvertible, Sendable {
    /// What failed and what to do (for example, how to start the daemon).
    public var message: String
    public var description: String { message }
}

/// A blocking client of the daemon's control socket: one request line out, one reply line back.
///
/// The CLI needs no event loop: it does one thing at a time, so plain `socket`/`connect`/`read`/`write` suffice.
public final class DaemonClient {
    private let fd: Int32
    /// Bytes read and not yet returned start at `start`; `buffer[start ..< start + scanned]` is known to hold no
    /// newline, so a long line arriving in many reads is scanned once, and returning a line moves `start` instead of
    /// shifting the rest (the consumed head is dropped only once it is the larger part).
    private var buffer: [UInt8] = []
    private var start = 0
    private var scanned = 0
    /// The socket path this client is connected to.
    public let socketPath: String

    /// Connects to the daemon at `socketPath`.
    /// - Throws: `ClientError` saying the daemon is not reachable and how to start it.
    public init(socketPath: String) throws(ClientError) {
        self.socketPath = socketPath
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClientError(message: "cannot create a socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(socketPath.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw ClientError(message: "socket path too long (over 107 bytes): \(socketPath)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if rc != 0 {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ClientError(
                message: "the daemon is not reachable at \(socketPath) (\(reason)).\n"
                    + "Start it with: trailbook-jobs daemon   (or set TRAILBOOK_JOBS_HOME / --socket to where it runs)")
        }
    }

    deinit { close(fd) }

    /// Sends `request` and returns the reply.
    /// - Throws: `ClientError` if the connection breaks or the reply is not JSON.
    public func request(_ request: JSONValue) throws(ClientError) -> JSONValue {
        do {
            try send(request)
        } catch {
            // The daemon may have refused the connection with an error line (forbidden, too_many_connections) and
            // closed it before our request went out: that reply says more than the broken pipe.
            if let reply = try? readLine() { return reply }
            throw error
        }
        guard let reply = try readLine() else { throw ClientError(message: "the daemon closed the connection") }
        return reply
    }

    /// Writes one request line.
    /// - Throws: `ClientError` if the write fails.
    public func send(_ request: JSONValue) throws(ClientError) {
        let line = JSONCoding.encode(request) + [0x0A]
        var sent = 0
        while sent < line.count {
            // MSG_NOSIGNAL: a daemon that closed the connection gives EPIPE here, not a SIGPIPE that would end the
            // CLI without a word.
            let n = line[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw ClientError(message: "lost the connection to the daemon") }
            sent += n
        }
    }

    /// Reads the next line as JSON, blocking; `nil` when the daemon closes the connection.
    /// - Throws: `ClientError` if a line is not JSON.
    public func readLine() throws(ClientError) -> JSONValue? {
        while true {
            if let newline = buffer[(start + scanned)...].firstIndex(of: 0x0A) {
                let line = Array(buffer[start..<newline])
                start = newline + 1
                scanned = 0
                if start >= 65_536, start * 2 >= buffer.count {
                    buffer.removeSubrange(..<start)
                    start = 0
                }
                do {
                    return try JSONCoding.decode(JSONValue.self, from: line)
                } catch {
                    throw ClientError(message: "the daemon sent a line that is not JSON")
                }
            }
            scanned = buffer.count - start
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            buffer.append(contentsOf: chunk[..<n])
        }
    }

    /// Waits until a line is ready or `timeoutSeconds` pass; `true` if something can be read.
    public func waitReadable(timeoutSeconds: Double) -> Bool {
        if buffer[(start + scanned)...].contains(0x0A) { return true }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, Int32(timeoutSeconds * 1000)) > 0
    }

    /// The raw descriptor, for `poll` together with a terminal.
    public var fileDescriptor: Int32 { fd }
}
