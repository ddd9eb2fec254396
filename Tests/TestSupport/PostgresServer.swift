import Foundation

/// A throwaway PostgreSQL server for tests: a fresh cluster (a copy of `PostgresCluster.template`) in a new
/// temporary directory, `pg_ctl start` listening on a Unix socket in that directory and on 127.0.0.1 at a free port,
/// `stop()` shuts it down and deletes the directory. Servers run as `nobody` when the tests run as root
/// (`PostgresCluster`).
///
/// Local (socket) connections are trusted; TCP connections need the password (SCRAM), so tests can check what
/// happens to a connection string that holds one. Durability is off (`fsync=off`): the data is thrown away.
public final class PostgresServer: @unchecked Sendable {
    /// Why the server could not be set up.
    public struct SetupError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The temporary directory: data in `data/`, the log in `server.log`, the socket `.s.PGSQL.<port>`.
    public let directory: String
    /// The TCP port on 127.0.0.1, also the socket's number.
    public let port: Int
    /// The superuser's name.
    public let user = "trailbook"
    /// The superuser's password (asked on TCP only).
    public let password: String
    private let binDirectory: String
    private let runAsNobody: Bool
    private var running = false

    /// The server's `psql`, for a test that needs a session of its own (holding a lock).
    public var psqlPath: String { binDirectory + "/psql" }
    /// A keyword connection string through the Unix socket (no password needed).
    public var socketConnectionString: String { "host=\(directory) port=\(port) user=\(user) dbname=postgres" }
    /// A URI through TCP with the password in it.
    public var tcpURI: String { tcpURI(port: port) }
    /// The server's Unix socket (for a proxy in front of it).
    public var socketPath: String { "\(directory)/.s.PGSQL.\(port)" }

    /// A URI with the password through TCP port `port` on 127.0.0.1 (a proxy's, forwarding to this server).
    public func tcpURI(port: Int) -> String { "postgres://\(user):\(password)@127.0.0.1:\(port)/postgres" }

    /// Creates the cluster (a copy of the test process's `PostgresCluster.template`) and starts the server; waits
    /// until it accepts connections.
    /// - Throws: `SetupError` with the command's output or the server log if a step fails.
    public init() throws {
        let template = try PostgresCluster.template.get()
        binDirectory = template.binDirectory
        password = template.password
        runAsNobody = template.runAsNobody
        directory = try PostgresCluster.makeDirectory(runAsNobody: runAsNobody)
        port = try Self.freePort()
        do {
            try PostgresCluster.run("/bin/cp", ["-a", template.directory + "/data", directory + "/data"], in: directory)
            try startUp()
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    deinit { stop() }

    /// Starts the (stopped) server again on the same socket and port; waits until it accepts connections.
    /// - Throws: `SetupError` with the server log if it does not come up within 60 s.
    public func startUp() throws {
        let options = [
            "-c listen_addresses=127.0.0.1", "-p \(port)", "-k \(directory)", "-c fsync=off",
            "-c synchronous_commit=off", "-c full_page_writes=off", "-c max_connections=50",
        ].joined(separator: " ")
        do {
            try run("pg_ctl", "-D", "\(directory)/data", "-l", "\(directory)/server.log", "-w", "-t", "60", "-o", options, "start")
        } catch {
            throw SetupError(description: "\(error)\n--- server.log ---\n\(log)")
        }
        running = true
    }

    /// Shuts the server down (`pg_ctl stop -m fast`: sessions are terminated, as in a restart by an operator),
    /// keeping its data for `startUp()`.
    /// - Throws: `SetupError` if `pg_ctl` fails.
    public func shutDown() throws {
        guard running else { return }
        try run("pg_ctl", "-D", "\(directory)/data", "-w", "-t", "60", "-m", "fast", "stop")
        running = false
    }

    /// Shuts the server down and deletes its directory. Safe to call twice.
    public func stop() {
        if running {
            try? shutDown()
            if running {
                // pg_ctl failed: do not leave a server behind.
                try? run("pg_ctl", "-D", "\(directory)/data", "-m", "immediate", "stop")
                running = false
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The server's log so far.
    public var log: String { (try? String(contentsOfFile: "\(directory)/server.log", encoding: .utf8)) ?? "" }

    /// Runs a server binary (as `nobody` when root) and waits for it, its output in `<tool>.out`.
    private func run(_ tool: String, _ arguments: String...) throws {
        try PostgresCluster.run("\(binDirectory)/\(tool)", arguments, asNobody: runAsNobody, in: directory)
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SetupError(description: "socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw SetupError(description: "cannot bind a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
