import Foundation

/// A throwaway PostgreSQL server for tests: `initdb` in a new temporary directory, `pg_ctl start` listening on a
/// Unix socket in that directory and on 127.0.0.1 at a free port, `stop()` shuts it down and deletes the directory.
///
/// The server binaries are found with `pg_config --bindir` (Debian's `libpq-dev`), else the newest
/// `/usr/lib/postgresql/*/bin` (Debian's `postgresql`). `initdb` and the server refuse to run as root, so when the
/// tests run as root (as on CI) every server command runs as the unprivileged user `nobody` through
/// `setpriv --reuid --regid --clear-groups` (util-linux), and the directory (under /tmp, which `nobody` can reach)
/// is handed to that user first.
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

    /// Creates the cluster and starts the server; waits until it accepts connections.
    /// - Throws: `SetupError` with the command's output or the server log if a step fails.
    public init() throws {
        binDirectory = try Self.findBinDirectory()
        runAsNobody = getuid() == 0
        let base = runAsNobody ? "/tmp" : FileManager.default.temporaryDirectory.path
        var template = Array("\(base)/trailbook-pg-XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else { throw SetupError(description: "mkdtemp in \(base) failed") }
        directory = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        port = try Self.freePort()
        password = "pw-" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
        do {
            let passwordFile = directory + "/password"
            try Data((password + "\n").utf8).write(to: URL(fileURLWithPath: passwordFile))
            if runAsNobody {
                guard let nobody = getpwnam("nobody") else { throw SetupError(description: "no user nobody") }
                chown(directory, nobody.pointee.pw_uid, nobody.pointee.pw_gid)
                chown(passwordFile, nobody.pointee.pw_uid, nobody.pointee.pw_gid)
            }
            try run(
                "initdb", "-D", "\(directory)/data", "-U", user, "--auth-local=trust", "--auth-host=scram-sha-256",
                "--pwfile=\(passwordFile)", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
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
    ///
    /// `ChildProcess`, not Foundation's `Process`: `Process.waitUntilExit` never returned for `pg_ctl start`,
    /// whose server lives on as its orphan.
    private func run(_ tool: String, _ arguments: String...) throws {
        let command = ["\(binDirectory)/\(tool)"] + arguments
        let outputFile = "\(directory)/\(tool).out"
        let pid = try ChildProcess.spawn(
            "/usr/bin/env",
            runAsNobody ? ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"] + command : command,
            environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "LC_ALL": "C"],
            output: outputFile)
        let status = ChildProcess.exitStatus(of: pid)
        guard status == 0 else {
            let printed = (try? String(contentsOfFile: outputFile, encoding: .utf8)) ?? ""
            throw SetupError(
                description: "\(tool) \(arguments.joined(separator: " ")) failed (exit \(status.map(String.init) ?? "by signal")): \(printed)")
        }
    }

    private static func findBinDirectory() throws -> String {
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["pg_config", "--bindir"]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        if (try? process.run()) != nil {
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let path = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if process.terminationStatus == 0, FileManager.default.isExecutableFile(atPath: path + "/initdb") {
                return path
            }
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            let path = "/usr/lib/postgresql/\(version)/bin"
            if FileManager.default.isExecutableFile(atPath: path + "/initdb") { return path }
        }
        throw SetupError(description: "no PostgreSQL server binaries (initdb): run scripts/install-deps.sh")
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
