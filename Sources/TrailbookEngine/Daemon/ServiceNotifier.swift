#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Tells a service manager (systemd) how the daemon is doing, over the `sd_notify` datagram protocol.
///
/// The protocol (https://www.freedesktop.org/software/systemd/man/latest/sd_notify.html, "Description" and
/// "Environment"): the manager passes a Unix datagram socket's address in `NOTIFY_SOCKET` (a path, or an abstract
/// address written with a leading `@`); each message is one datagram of newline-separated `KEY=VALUE` lines:
/// `READY=1` once the daemon serves requests, `STATUS=…` a line for `systemctl status`, `WATCHDOG=1` the keep-alive
/// the manager expects at least every `WATCHDOG_USEC` microseconds when the unit sets `WatchdogSec=`,
/// `STOPPING=1` when shutdown begins. Written over the documented datagram protocol rather than libsystemd's
/// `sd_notify()`, which does the same and would add a library for four lines.
///
/// Without `NOTIFY_SOCKET` (not started by systemd, or `Type=` is not `notify`) every call does nothing.
public struct ServiceNotifier: Sendable {
    /// The manager's socket address, raw (`sun_path` bytes; a leading 0 for an abstract address), or nil.
    private let address: [UInt8]?
    /// How often the manager wants `WATCHDOG=1`, in seconds, or nil when the unit sets no watchdog.
    public let watchdogIntervalSeconds: Double?

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from `environment`.
    ///
    /// `WATCHDOG_PID`, when set, names the process the watchdog is meant for; another process (a child that
    /// inherited the environment) gets no watchdog interval. An address that is not a path or an `@` name, or one
    /// longer than `sun_path` (107 bytes), is ignored.
    public init(environment: [String: String], pid: Int32 = getpid()) {
        if let text = environment["NOTIFY_SOCKET"], text.hasPrefix("/") || text.hasPrefix("@"),
            text.utf8.count <= 107
        {
            var bytes = Array(text.utf8)
            if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }
            address = bytes
        } else {
            address = nil
        }
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == pid } ?? true
        if forUs, address != nil, let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0 {
            watchdogIntervalSeconds = Double(usec) / 1_000_000
        } else {
            watchdogIntervalSeconds = nil
        }
    }

    /// Whether a manager listens (`NOTIFY_SOCKET` was set and well formed).
    public var isActive: Bool { address != nil }

    /// Sends one message: `fields` joined as `KEY=VALUE` lines. Newlines inside a value are replaced by spaces
    /// (a newline would start a new field). Failures are ignored: the manager being gone must not stop the daemon.
    /// - Returns: whether the datagram was sent.
    @discardableResult
    public func send(_ fields: [(String, String)]) -> Bool {
        guard let address else { return false }
        let text = fields.map { "\($0.0)=\($0.1.replacingNewlines())" }.joined(separator: "\n")
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: address) }
        // An abstract address is exactly its bytes (no terminating NUL); a path may include its NUL.
        let length = MemoryLayout<sa_family_t>.size + address.count + (address[0] == 0 ? 0 : 1)
        let payload = Array(text.utf8)
        let sent = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                payload.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), pointer, socklen_t(length)) }
            }
        }
        return sent == payload.count
    }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        String(map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}

/// The listening socket a service manager passed to the daemon (socket activation).
///
/// The protocol (https://www.freedesktop.org/software/systemd/man/latest/sd_listen_fds.html): `LISTEN_PID` is the
/// receiving process's pid, `LISTEN_FDS` the number of descriptors passed, starting at 3 (`SD_LISTEN_FDS_START`).
/// The daemon takes exactly one: a listening Unix stream socket.
public enum ActivationSocket {
    /// The first passed descriptor (`SD_LISTEN_FDS_START`).
    public static let firstDescriptor: Int32 = 3

    /// The passed listening socket, nil when none was passed to this process.
    /// - Throws: `JobError` `bad_activation_socket` when descriptors were passed but the first is not a listening
    ///   Unix stream socket, or more than one was passed (the unit's `ListenStream=` lines are wrong).
    public static func fromEnvironment(_ environment: [String: String], pid: Int32 = getpid()) throws(JobError)
        -> Int32?
    {
        guard let pidText = environment["LISTEN_PID"], Int32(pidText) == pid,
            let count = environment["LISTEN_FDS"].flatMap(Int.init), count > 0
        else { return nil }
        guard count == 1 else {
            throw JobError(
                code: "bad_activation_socket",
                message: "the service manager passed \(count) sockets; the daemon listens on one (one ListenStream= line)")
        }
        let fd = firstDescriptor
        var type: Int32 = 0
        var listening: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        var address = sockaddr_storage()
        var addressLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let isStream = getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 && type == Int32(SOCK_STREAM.rawValue)
        length = socklen_t(MemoryLayout<Int32>.size)
        let isListening = getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0 && listening == 1
        let isUnix =
            withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &addressLength) }
            } == 0 && address.ss_family == sa_family_t(AF_UNIX)
        guard isStream, isListening, isUnix else {
            throw JobError(
                code: "bad_activation_socket",
                message: "descriptor 3 from the service manager is not a listening Unix stream socket; "
                    + "use ListenStream=/path/to/daemon.sock in the .socket unit")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
    }
}
