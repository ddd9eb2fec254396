import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// The daemon under a service manager: `sd_notify` messages on a `NOTIFY_SOCKET` the test reads, and a control
/// socket passed by socket activation (`systemd-socket-activate`, as systemd does with a `.socket` unit).
@Suite(.serialized)
struct ServiceManagerTests {
    @Test func notifiesReadyStatusWatchdogAndStopping() throws {
        let home = TemporaryDirectory()
        let listener = try NotifyListener(path: home.file("notify.sock"))
        let daemon = try DaemonHarness(
            home: home, environment: ["NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "200000"])

        let ready = try listener.next(timeout: 5) { $0["READY"] != nil }
        #expect(ready["READY"] == "1")
        #expect(ready["MAINPID"] == "\(daemon.pid)")
        #expect(ready["STATUS"] == "0 running · 0 queued")

        // WatchdogSec=0.2s: a keep-alive every 0.1 s while the loop turns.
        let start = Date()
        for _ in 0..<3 { _ = try listener.next(timeout: 2) { $0["WATCHDOG"] == "1" } }
        #expect(Date().timeIntervalSince(start) < 1.5)

        let id = try daemon.submitSleep(units: 400, unitMilliseconds: 10)
        try daemon.waitForState(id, "running", timeout: 5)
        let status = try listener.next(timeout: 5) { $0["STATUS"] != nil }
        #expect(status["STATUS"] == "1 running · 0 queued")

        let (exit, _) = try daemon.stop(signal: SIGTERM)
        #expect(exit == 0)
        let stopping = try listener.next(timeout: 2) { $0["STOPPING"] != nil }
        #expect(stopping["STOPPING"] == "1")
        #expect(stopping["STATUS"]?.hasPrefix("stopping") == true)
    }

    @Test func withoutAWatchdogNoKeepAliveIsSent() throws {
        let home = TemporaryDirectory()
        let listener = try NotifyListener(path: home.file("notify.sock"))
        _ = try DaemonHarness(home: home, environment: ["NOTIFY_SOCKET": listener.path])
        _ = try listener.next(timeout: 5) { $0["READY"] != nil }
        #expect(throws: HarnessError.self) { try listener.next(timeout: 0.5) { _ in true } }
    }

    @Test func acceptsItsControlSocketFromSocketActivation() throws {
        let activate = "/usr/bin/systemd-socket-activate"
        try #require(FileManager.default.isExecutableFile(atPath: activate), "scripts/install-deps.sh installs systemd")
        let home = TemporaryDirectory()
        let socket = home.file("activated.sock")
        let log = home.file("daemon.log")
        // posix_spawn rather than Foundation's Process, which passes on the test runner's blocked signals and does
        // not expect the launcher to exec the daemon in its own process.
        let pid = try ChildProcess.spawn(
            activate,
            [
                "--listen=\(socket)", "-E", "TRAILBOOK_JOBS_HOME=\(home.path)", "-E", "TRAILBOOK_JOBS_TEST_KINDS=1",
                Binary.path, "daemon", "--socket", socket,
            ],
            environment: ProcessInfo.processInfo.environment, output: log)
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        // The socket exists before the daemon runs; the first connection starts it, and is answered by it.
        // The launcher binds the socket, then listens: a connect in between is refused, so retry that until it
        // listens (CI saw "Connection refused" under load).
        let deadline = Date().addingTimeInterval(10)
        var client = try? DaemonClient(socketPath: socket)
        while client == nil && Date() < deadline {
            usleep(10_000)
            client = try? DaemonClient(socketPath: socket)
        }
        let ping = try (client ?? DaemonClient(socketPath: socket)).request(["op": "ping"])
        #expect(ping["ok"]?.boolValue == true)
        #expect(ping["pid"]?.intValue == Int64(pid), "the launcher execs the daemon in its own process")
        let list = try DaemonClient(socketPath: socket).request(["op": "list"])
        #expect(list["jobs"]?.arrayValue?.isEmpty == true)
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.contains("listening on the socket passed by the service manager (descriptor 3)"), "log: \(text)")
        // SIGTERM stops it cleanly, as without a service manager.
        kill(pid, SIGTERM)
        var status: Int32 = 0
        let stopBy = Date().addingTimeInterval(5)
        while waitpid(pid, &status, WNOHANG) == 0 && Date() < stopBy { usleep(10_000) }
        #expect(status == 0, "exit status \(status)")
        let stopped = try String(contentsOfFile: log, encoding: .utf8)
        #expect(stopped.contains("trailbook-jobs: stopped"), "log: \(stopped)")
    }
}

/// A Unix datagram socket standing in for systemd's notification socket: each datagram is one message of
/// `KEY=VALUE` lines.
final class NotifyListener {
    let path: String
    private let fd: Int32

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8))
            raw[path.utf8.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw HarnessError("bind \(path): \(errno)") }
    }

    deinit { close(fd) }

    /// The next message that satisfies `wanted` within `timeout` seconds, skipping others.
    /// - Throws: `HarnessError` when none arrives in time.
    func next(timeout: Double, _ wanted: ([String: String]) -> Bool) throws -> [String: String] {
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw HarnessError("no wanted notification within \(timeout) s") }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left * 1000) + 1) > 0 else { continue }
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { continue }
            var message: [String: String] = [:]
            for line in String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n") {
                guard let equals = line.firstIndex(of: "=") else { continue }
                message[String(line[..<equals])] = String(line[line.index(after: equals)...])
            }
            if wanted(message) { return message }
        }
    }
}
