import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `watch` in a real pseudo-terminal (tmux) against a real daemon: rows, bar, reason texts, keys, and a clean
/// screen with the cursor back after `q` and Ctrl-C.
@Suite(.serialized)
struct WatchTerminalTests {
    @Test func rowsBarReasonsCancelAndQuit() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        let long = try harness.submitSleep(["units": 600, "unit_ms": 50])
        let stalling = try harness.submitSleep(["units": 50, "unit_ms": 20, "stall_after": 5])
        let victim = try harness.submitSleep(["units": 600, "unit_ms": 50])

        try harness.startPane("watch")
        let rows = try harness.waitForScreen("three rows") { screen in
            [long, stalling, victim].allSatisfy { id in screen.contains("sleep \(id.prefix(8))") }
                && screen.contains("running") && screen.contains("█")
        }
        #expect(rows.contains("%"))
        #expect(rows.contains("items"))
        #expect(rows.contains("try 1/5"))
        #expect(rows.contains("↑/↓ select"))
        #expect(rows.contains(" running · "))

        // The stalled job is stopped for timeout and waits to retry: the reason in words, with a countdown.
        try harness.waitForScreen("timeout reason") { $0.contains("timed out — will retry in") }

        // Select the third row and cancel it, confirming with y.
        try harness.keys("Down", "Down")
        try harness.waitForScreen("selection on the victim") { $0.contains("▸ sleep \(victim.prefix(8))") }
        try harness.keys("c")
        try harness.waitForScreen("confirmation") { $0.contains("Cancel sleep \(victim.prefix(8))") && $0.contains("y/n") }
        try harness.keys("y")
        let cancelled = try harness.waitForScreen("cancelled row") { $0.contains("stopped by you") }
        let settled = cancelled.split(separator: "\n").first { $0.contains(victim.prefix(8)) } ?? ""
        #expect(settled.hasPrefix("⊘ sleep"))
        #expect(settled.contains("cancelled — stopped by you"))

        try harness.keys("q")
        let after = try harness.waitForScreen("exit") { $0.contains("WATCH-EXIT=0") }
        #expect(!after.contains("█"))
        #expect(!after.contains("select"))
        #expect(try harness.paneFlags() == "cursor=1 alternate=0")
    }

    /// The screen is for stdout; with stdin at its end (`</dev/null`, as from cron or a closed pipe) there are no
    /// keys, and the watcher must not spin on the always-readable stdin.
    @Test func stdinAtEndDoesNotSpin() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        let id = try harness.submitSleep(["units": 2_000, "unit_ms": 50])
        try harness.startPane("watch \(id.prefix(8)) </dev/null")
        try harness.waitForScreen("the row") { $0.contains("sleep \(id.prefix(8))") && $0.contains("█") }
        let watcher = try #require(harness.cliProcess(running: "watch"), "the watch process")
        let before = try DaemonHarness.cpuSeconds(pid: watcher)
        usleep(2_000_000)
        let used = try DaemonHarness.cpuSeconds(pid: watcher) - before
        #expect(used < 0.5, "watch used \(used) CPU s in 2 s with stdin at its end")
    }

    @Test func ctrlCLeavesACleanScreenAndRestartsAreSurvived() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        let id = try harness.submitSleep(["units": 2_000, "unit_ms": 50])
        try harness.startPane("watch \(id.prefix(8))")
        try harness.waitForScreen("the row") { $0.contains("sleep \(id.prefix(8))") && $0.contains("█") }

        // The daemon restarts under the watcher: it says so, reconnects and carries on.
        try harness.restartDaemon(pausingSeconds: 1.5, whileWaiting: {
            try harness.waitForScreen("lost notice") { $0.contains("lost the daemon; reconnecting") }
        })
        try harness.waitForScreen("reconnected") { $0.contains("reconnected") && $0.contains("1 running") }

        try harness.keys("C-c")
        let after = try harness.waitForScreen("exit") { $0.contains("WATCH-EXIT=130") }
        #expect(!after.contains("█"))
        #expect(try harness.paneFlags() == "cursor=1 alternate=0")
    }

    /// `submit upload … --watch` on a terminal: the screen follows the new upload to its end and the command
    /// exits with the job's exit code.
    @Test func submitWatchFollowsAnUploadAndExitsWithItsCode() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        let source = harness.home + "/clip.mov"
        let destination = harness.home + "/out"
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        try Data((0..<(6 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: URL(fileURLWithPath: source))
        try harness.startPane("submit upload '\(source)' --to '\(destination)' --max-rate 3MiB --chunk-size 1MiB --watch")
        let live = try harness.waitForScreen("the upload's row") { $0.contains("upload") && $0.contains("clip.mov") && $0.contains("█") }
        #expect(live.contains("MiB"))
        let done = try harness.waitForScreen("exit", timeout: 20) { $0.contains("WATCH-EXIT=") }
        #expect(done.contains("WATCH-EXIT=0"), "screen: \(done)")
        #expect(done.contains("succeeded"))
        #expect(try harness.paneFlags() == "cursor=1 alternate=0")
        #expect(FileManager.default.fileExists(atPath: destination + "/clip.mov"))
    }

    /// Names with CJK, emoji (ZWJ sequences, flags), combining and zero-width characters and terminal escapes,
    /// watched with `--expand` in a pane resized from 200 to 20 columns and back (issue 10, item 4): tmux wraps
    /// no line (`capture-pane -J` joins wrapped lines: the count must not change), exactly the screen's lines are
    /// on it (no debris of an earlier frame), the escapes show as text and retitle nothing.
    @Test func hostileAndWideNamesFitEveryWidthWhileResizing() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        let sources = harness.home + "/src"
        let destination = harness.home + "/out"
        try FileManager.default.createDirectory(atPath: sources, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        let names = [
            "東京タワーの夜景と富士山の朝焼け.jpg", "👨\u{200D}👩\u{200D}👧🇵🇹🎉 family trip.mov",
            "cafe\u{301}\u{301}-zero\u{200B}width\u{200D}.jpg", "\u{1B}]0;pwned\u{07}\u{1B}[2J\nupload running -> failed",
        ]
        for name in names + ["日本語のファイル名.jpg"] {
            #expect(FileManager.default.createFile(atPath: sources + "/" + name, contents: Data(count: 4 << 20)))
        }
        func upload(_ name: String, rate: Int?) throws -> String {
            // 64 KiB chunks: a sync and checkpoint every 2 s of each slow upload. With 4 KiB ones, four uploads
            // fsynced 32 times a second between them, and once (a long serial run) one upload made no progress for
            // the harness's 1 s stall timeout, most likely waiting for the pool behind those syncs (not proven).
            var params: [String: Any] = ["files": [sources + "/" + name], "to": "file://" + destination, "chunk_size": 65536]
            if let rate { params["max_rate"] = rate }
            // The quick one preempts a slow one for the moment it runs (4 slots are taken).
            let options: [String: Any] = rate == nil ? ["priority": 10] : [:]
            let reply = try harness.request(["op": "submit", "kind": "upload", "params": params, "options": options])
            return try #require((reply["job"] as? [String: Any])?["id"] as? String, "submit: \(reply)")
        }
        // 32 KiB/s: 4 MiB take two minutes, with progress well inside the harness's 1 s stall timeout.
        for name in names { _ = try upload(name, rate: 32 << 10) }
        try harness.startPane("watch --expand", width: 200)
        try harness.waitForScreen("rows") { $0.contains("4 running") && $0.contains("└") }
        // One that finishes while watched settles above the live rows.
        _ = try upload("日本語のファイル名.jpg", rate: nil)
        try harness.waitForScreen("the finished row") { $0.contains("1 done") && $0.contains("4 running") }
        // 4 live rows with a sub-row each, 1 finished row, the summary and the key help.
        let expectedLines = 11
        for width in [200, 137, 100, 80, 70, 60, 50, 33, 24, 20, 45, 120] {
            try harness.tmux(["resize-window", "-t", harness.session, "-x", String(width), "-y", "30"])
            var last = ""
            var lastJoined = ""
            var settled = false
            for _ in 0..<50 {
                let plain = try harness.capture()
                let joined = try harness.tmux(["capture-pane", "-p", "-J", "-t", harness.session])
                let lines = plain.split(separator: "\n", omittingEmptySubsequences: true)
                last = plain
                lastJoined = joined
                if lines.count == expectedLines, joined.split(separator: "\n").count == lines.count,
                    lines.last?.hasPrefix("↑/↓") == true, lines.contains(where: { $0.contains("4 running") || $0.contains("4 runn") })
                {
                    settled = true
                    break
                }
                usleep(100_000)
            }
            #expect(settled, "width \(width): a wrapped line or debris:\n\(last)\njoined:\n\(lastJoined)")
            if width == 20 { #expect(last.contains("running"), "the state word at 20 columns:\n\(last)") }
            if width == 200 {
                #expect(last.contains("\\x1b]0;pwned\\x07\\x1b[2J"), "the escapes, visible:\n\(last)")
                #expect(last.contains("東京タワー"))
            }
        }
        let title = try harness.tmux(["display-message", "-p", "-t", harness.session, "#{pane_title}"])
        #expect(!title.contains("pwned"))
        try harness.keys("q")
        try harness.waitForScreen("exit") { $0.contains("WATCH-EXIT=0") }
    }

    /// `TERM=dumb` on a terminal: plain lines (no escape codes), and `q` still quits, as on the screen.
    @Test func dumbTerminalGetsPlainLinesAndQuitsOnQ() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        let id = try harness.submitSleep(["units": 2_000, "unit_ms": 50])
        try harness.startPane("watch", environment: "TERM=dumb")
        let lines = try harness.waitForScreen("plain lines") { $0.contains("\(id.prefix(8)) sleep running") }
        #expect(!lines.contains("q quit"))
        #expect(try harness.paneFlags() == "cursor=1 alternate=0")
        try harness.keys("q")
        try harness.waitForScreen("exit on q") { $0.contains("WATCH-EXIT=0") }
    }

    /// `submit --watch` on a `TERM=dumb` terminal follows its job in plain lines and takes `q` as `watch` does:
    /// it stops following (exit 0) and the job runs on.
    @Test func submitWatchOnADumbTerminalQuitsOnQ() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        let destination = harness.home + "/out"
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: harness.home + "/slow.bin", contents: Data(count: 4 << 20)))
        try harness.startPane(
            "submit upload '\(harness.home)/slow.bin' --to '\(destination)' --max-rate 128KiB --chunk-size 64KiB --watch",
            environment: "TERM=dumb")
        let lines = try harness.waitForScreen("plain lines") { $0.contains("upload running") }
        #expect(!lines.contains("q quit"))
        try harness.keys("q")
        try harness.waitForScreen("exit on q") { $0.contains("WATCH-EXIT=0") }
        let jobs = try harness.request(["op": "list"])
        let states = ((jobs["jobs"] as? [[String: Any]]) ?? []).compactMap { $0["state"] as? String }
        #expect(states == ["running"], "the job runs on: \(states)")
    }

    /// Plain lines (not a terminal) are one event a line: a name with a newline and escapes, in the log line of a
    /// cancelled upload ("removed the partial file …"), is escaped and fakes no line; `--json` stays exact.
    @Test func plainLinesEscapeNamesAndJSONStaysExact() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        let name = "\u{1B}]0;pwned\u{07}\nupload running -> failed.jpg"
        let destination = harness.home + "/out"
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: harness.home + "/" + name, contents: Data(count: 1 << 20)))
        let reply = try harness.request([
            "op": "submit", "kind": "upload",
            "params": ["files": [harness.home + "/" + name], "to": "file://" + destination, "max_rate": 64 << 10, "chunk_size": 4096],
        ])
        let id = try #require((reply["job"] as? [String: Any])?["id"] as? String, "\(reply)")
        usleep(500_000)
        _ = try harness.request(["op": "cancel", "job": id])
        let plain = try harness.runPiped(["watch", "--since", "0"], seconds: 2)
        #expect(plain.contains("removed the partial file"), "\(plain)")
        #expect(plain.contains("\\x1b]0;pwned\\x07\\nupload running -> failed.jpg"), "\(plain)")
        #expect(!plain.contains("\u{1B}") && !plain.contains("\u{07}"))
        #expect(!plain.split(separator: "\n").contains { $0.hasPrefix("upload running -> failed") })
        let json = try harness.runPiped(["watch", "--since", "0", "--json"], seconds: 2)
        #expect(json.contains(#"\u001b]0;pwned\u0007\nupload running -> failed.jpg"#), "\(json)")
    }

    @Test func plainLinesWhenNotATerminal() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        _ = try harness.submitSleep(["units": 40, "unit_ms": 50])
        let output = try harness.runPiped(["watch"], seconds: 3)
        #expect(!output.contains("\u{1B}"))
        #expect(output.contains("running"))
        #expect(output.contains("queued -> running") || output.contains("-> succeeded"))
        // At most about one progress line per second for the one job.
        let progressLines = output.split(separator: "\n").filter { $0.contains(" running ") && $0.contains("%") }
        #expect(progressLines.count <= 4)
    }
}

/// A daemon in a temp dir and a tmux server of our own, for driving `watch` in a real pseudo-terminal.
final class WatchHarness {
    let home: String
    let binary: String
    let tmuxSocket: String
    let session = "watch"
    private var daemon: pid_t?

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    init() throws {
        binary = Self.locateBinary()
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw Failure(description: "no trailbook-jobs binary at \(binary); run swift build first")
        }
        var template = Array("/tmp/trailbook-watch-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure(description: "mkdtemp failed") }
        home = String(cString: made)
        tmuxSocket = "trailbook-watch-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try startDaemon()
    }

    static func locateBinary() -> String {
        if let path = ProcessInfo.processInfo.environment["TRAILBOOK_JOBS_BIN"] { return path }
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while directory.path != "/" {
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) {
                return directory.appendingPathComponent(".build/debug/trailbook-jobs").path
            }
            directory = directory.deletingLastPathComponent()
        }
        return ".build/debug/trailbook-jobs"
    }

    var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["TRAILBOOK_JOBS_HOME"] = home
        env["TRAILBOOK_JOBS_TEST_KINDS"] = "1"
        env["NO_COLOR"] = "1"
        return env
    }

    func startDaemon() throws {
        daemon = try ChildProcess.spawn(
            binary, ["daemon", "--stall-timeout", "1s", "--retry-base", "30s"], environment: environment,
            output: home + "/daemon.log")
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if (try? request(["op": "ping"]))?["ok"] as? Bool == true { return }
            usleep(50_000)
        }
        throw Failure(description: "the daemon did not start")
    }

    /// SIGTERM to the daemon, a pause (during which `whileWaiting` runs), and a fresh daemon on the same home.
    func restartDaemon(pausingSeconds: Double, whileWaiting: () throws -> Void) throws {
        if let daemon { Self.terminate(daemon) }
        daemon = nil
        try whileWaiting()
        usleep(UInt32(pausingSeconds * 1_000_000))
        try startDaemon()
    }

    func stop() {
        _ = try? tmux(["kill-server"])
        if let daemon { Self.terminate(daemon) }
        try? FileManager.default.removeItem(atPath: home)
    }

    /// One request on the control socket; the reply as a dictionary.
    func request(_ body: [String: Any]) throws -> [String: Any] {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array((home + "/daemon.sock").utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path)
            raw[path.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw Failure(description: "cannot connect") }
        let line = try JSONSerialization.data(withJSONObject: body) + Data([0x0A])
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        var reply = Data()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !reply.contains(0x0A) {
            let n = read(fd, &chunk, chunk.count)
            guard n > 0 else { break }
            reply.append(contentsOf: chunk[..<n])
        }
        return try JSONSerialization.jsonObject(with: reply) as? [String: Any] ?? [:]
    }

    /// Submits a `sleep` test job; returns its id.
    func submitSleep(_ params: [String: Any]) throws -> String {
        let reply = try request(["op": "submit", "kind": "sleep", "params": params])
        guard let id = (reply["job"] as? [String: Any])?["id"] as? String else {
            throw Failure(description: "submit failed: \(reply)")
        }
        return id
    }

    @discardableResult
    func tmux(_ arguments: [String]) throws -> String {
        // Output to a file, not a pipe: the tmux server this may start keeps inherited descriptors open for good.
        let outputPath = home + "/tmux-\(UInt32.random(in: 0...UInt32.max)).out"
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let pid = try ChildProcess.spawn("/usr/bin/tmux", ["-L", tmuxSocket] + arguments, environment: environment, output: outputPath)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }

    /// SIGTERM, then SIGKILL after 5 s; reaps the process.
    static func terminate(_ pid: pid_t) {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<100 {
            if waitpid(pid, &status, WNOHANG) == pid { return }
            usleep(50_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
    }

    /// Runs `trailbook-jobs COMMAND` in a `width`×30 tmux pane (with `environment`, `NAME=value …`, added); the
    /// pane prints `WATCH-EXIT=<code>` when it ends.
    func startPane(_ command: String, width: Int = 100, environment extra: String = "") throws {
        let env = "TRAILBOOK_JOBS_HOME='\(home)' NO_COLOR=1 \(extra)"
        try tmux([
            "new-session", "-d", "-s", session, "-x", String(width), "-y", "30",
            "\(env) '\(binary)' \(command); echo WATCH-EXIT=$?; sleep 600",
        ])
    }

    /// The PID of this harness's `trailbook-jobs SUBCOMMAND …` process (by its command line and home).
    func cliProcess(running subcommand: String) -> pid_t? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = pid_t(entry),
                let cmdline = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"),
                let environ = FileManager.default.contents(atPath: "/proc/\(entry)/environ")
            else { continue }
            let arguments = cmdline.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            let variables = environ.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            if arguments.first == binary, arguments.dropFirst().first == subcommand,
                variables.contains("TRAILBOOK_JOBS_HOME=\(home)")
            {
                return pid
            }
        }
        return nil
    }

    func keys(_ keys: String...) throws {
        try tmux(["send-keys", "-t", session] + keys)
    }

    func capture() throws -> String { try tmux(["capture-pane", "-p", "-t", session]) }

    /// "cursor=1 alternate=0" once the pane shows the cursor and the normal screen.
    func paneFlags() throws -> String {
        try tmux(["display-message", "-p", "-t", session, "cursor=#{cursor_flag} alternate=#{alternate_on}"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Polls the pane until `condition` holds (10 s at most); returns the screen.
    @discardableResult
    func waitForScreen(_ what: String, timeout: Double = 10, _ condition: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        var screen = ""
        while Date() < deadline {
            screen = try capture()
            if condition(screen) { return screen }
            usleep(100_000)
        }
        throw Failure(description: "timed out waiting for \(what); screen:\n\(screen)")
    }

    /// Runs the CLI with stdout to a file (not a terminal) for `seconds`, then SIGTERM; returns what it printed.
    func runPiped(_ arguments: [String], seconds: Double) throws -> String {
        let outputPath = home + "/piped.out"
        let pid = try ChildProcess.spawn(
            binary, arguments, environment: environment.merging(["TERM": "xterm-256color"]) { $1 }, output: outputPath)
        usleep(UInt32(seconds * 1_000_000))
        Self.terminate(pid)
        return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }
}
