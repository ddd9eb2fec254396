import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine
import TrailbookSQLite

/// The scheduler's contracts, checked against the real daemon binary with the `sleep` test job kind.
@Suite(.serialized)
struct SchedulerEndToEndTests {
    @Test func stallTimeoutRetriesWithBackoffThenFails() throws {
        let daemon = try DaemonHarness(arguments: ["--retry-base", "100ms"])
        let events = try FeedRecorder(daemon)
        let id = try daemon.submitSleep(
            units: 10, unitMilliseconds: 10, stallAfter: 2, options: ["stall_timeout_s": 0.3, "max_attempts": 3])
        let final = try daemon.waitForState(id, "failed", timeout: 20)
        #expect(final["attempt"]?.intValue == 3)
        #expect(final["error"]?["code"]?.stringValue == "timeout")
        #expect(final["cancellation"]?["reason"]?.stringValue == "timeout")
        // The daemon may answer a `show` that finds the job ended before the recorder has read the end's event.
        _ = try events.waitFor(id, "failed", timeout: 10)
        let states = events.states(of: id)
        #expect(states.filter { $0 == "needs_retry" }.count == 2, "states: \(states)")
        #expect(states.last == "failed")
        let retry = events.events(of: id).first { $0["to"]?.stringValue == "needs_retry" }
        #expect(retry?["cancellation"]?["reason"]?.stringValue == "timeout")
        #expect(retry?["retry_in_s"]?.doubleValue != nil)
    }

    @Test func deadlineStopsAJobWithTimeout() throws {
        let daemon = try DaemonHarness()
        let id = try daemon.submitSleep(units: 1_000, unitMilliseconds: 20, options: ["timeout_s": 0.3, "max_attempts": 1])
        let final = try daemon.waitForState(id, "failed", timeout: 10)
        #expect(final["cancellation"]?["detail"]?.stringValue?.contains("deadline") == true)
    }

    @Test func higherPriorityPreemptsAndTheReclaimedJobResumes() throws {
        let daemon = try DaemonHarness(arguments: ["--concurrency", "1"])
        let low = try daemon.submitSleep(units: 60, unitMilliseconds: 20)
        try daemon.waitFor(low, "low running with progress") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 5 }
        let high = try daemon.submitSleep(units: 5, unitMilliseconds: 20, options: ["priority": 10])
        let reclaimed = try daemon.waitForState(low, "queued", timeout: 5)
        #expect(reclaimed["cancellation"]?["reason"]?.stringValue == "resource_reclaim")
        try daemon.waitForState(high, "succeeded", timeout: 10)
        let done = try daemon.waitForState(low, "succeeded", timeout: 20)
        #expect((done["result"]?["resumed_at"]?.intValue ?? 0) >= 5, "resumed from its checkpoint")
        #expect(done["attempt"]?.intValue == 1, "a reclaim does not use up an attempt")
    }

    @Test func sigtermReclaimsRunningJobsAndExitsCleanlyThenTheyResume() throws {
        let home = TemporaryDirectory()
        let daemon = try DaemonHarness(home: home)
        let ids = try (0..<2).map { _ in try daemon.submitSleep(units: 100, unitMilliseconds: 20) }
        for id in ids { try daemon.waitFor(id, "progress") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 3 } }
        let (status, seconds) = try daemon.stop(signal: SIGTERM)
        #expect(status == 0)
        #expect(seconds < 2, "exited in \(seconds) s")
        let store = try Database(path: home.path + "/jobs.sqlite3")
        for id in ids {
            let row = try #require(try store.query("SELECT state, cancellation FROM jobs WHERE id = ?", [.text(id)]).first)
            #expect(row.text(0) == "queued")
            #expect(row.text(1)?.contains("resource_reclaim") == true)
        }
        try daemon.start()
        for id in ids {
            let done = try daemon.waitForState(id, "succeeded", timeout: 20)
            #expect((done["result"]?["resumed_at"]?.intValue ?? 0) >= 3)
        }
    }

    @Test func kill9ThenRestartResumesFromTheCheckpoint() throws {
        let daemon = try DaemonHarness()
        let id = try daemon.submitSleep(units: 80, unitMilliseconds: 20)
        try daemon.waitFor(id, "progress") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 10 }
        try daemon.crash()
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 20)
        #expect((done["result"]?["resumed_at"]?.intValue ?? 0) >= 10)
        #expect(done["result"]?["units"]?.intValue == 80)
    }

    @Test func cancelIsReportedWithin100Milliseconds() throws {
        let daemon = try DaemonHarness()
        let id = try daemon.submitSleep(units: 1_000, unitMilliseconds: 20)
        try daemon.waitForState(id, "running")
        let started = Date()
        let job = try daemon.job(["op": "cancel", "job": .string(id)])
        let elapsed = Date().timeIntervalSince(started)
        #expect(job["state"]?.stringValue == "cancelled")
        #expect(job["cancellation"]?["reason"]?.stringValue == "user_stop")
        #expect(elapsed < 0.1, "cancel took \(elapsed) s")
    }

    @Test func pauseKeepsTheCheckpointAndResumeContinues() throws {
        let daemon = try DaemonHarness()
        let id = try daemon.submitSleep(units: 60, unitMilliseconds: 20)
        try daemon.waitFor(id, "progress") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 5 }
        let paused = try daemon.cli(["pause", String(id.prefix(8))])
        #expect(paused.status == 0, "\(paused.stderr)")
        #expect(try daemon.show(id)["state"]?.stringValue == "paused")
        usleep(200_000)
        #expect(try daemon.show(id)["state"]?.stringValue == "paused", "a paused job stays paused")
        #expect(try daemon.cli(["resume", id]).status == 0)
        let done = try daemon.waitForState(id, "succeeded", timeout: 20)
        #expect((done["result"]?["resumed_at"]?.intValue ?? 0) >= 5)
    }

    @Test func feedNumbersEventsAndReplaysSince() throws {
        let daemon = try DaemonHarness()
        let events = try FeedRecorder(daemon)
        let id = try daemon.submitSleep(units: 20, unitMilliseconds: 10)
        try daemon.waitForState(id, "succeeded")
        _ = try events.waitFor(id, "succeeded", timeout: 10)
        let seen = events.events(of: id)
        let seqs = seen.compactMap { $0["seq"]?.intValue }
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "seq increases")
        #expect(seen.first?["type"]?.stringValue == "submitted")
        #expect(events.states(of: id) == ["running", "succeeded"])
        #expect(seen.contains { $0["type"]?.stringValue == "progress" })
        // Replay: a new watcher asking for events after the first one gets the rest, in order.
        let replay = try DaemonClient(socketPath: daemon.socketPath)
        _ = try replay.request(["op": "watch", "since": .number(Double(seqs[0])), "jobs": [.string(id)]])
        var replayed: [Int64] = []
        while replayed.count < seqs.count - 1, replay.waitReadable(timeoutSeconds: 2), let event = try replay.readLine() {
            replayed.append(event["seq"]?.intValue ?? -1)
        }
        #expect(replayed == Array(seqs.dropFirst()))
    }

    /// `watch ID` (not on a terminal) prints the job's lines and exits once it has ended; for a job that already
    /// ended it prints its outcome and exits at once.
    @Test func watchOfNamedJobsEndsWithThem() throws {
        let daemon = try DaemonHarness()
        let id = try daemon.submitSleep(units: 10, unitMilliseconds: 20)
        let started = Date()
        let watched = try daemon.cli(["watch", String(id.prefix(8))])
        #expect(watched.status == 0, "\(watched.stderr)")
        #expect(watched.stdout.contains("-> succeeded"), "\(watched.stdout)")
        #expect(Date().timeIntervalSince(started) < 10)
        let again = try daemon.cli(["watch", id])
        #expect(again.status == 0)
        #expect(again.stdout.contains("succeeded"))
        // With --json the output stays feed events: the end shows as a state event (from unknown: null).
        let json = try daemon.cli(["watch", id, "--json"])
        #expect(json.status == 0)
        let lines = json.stdout.split(separator: "\n")
        #expect(lines.count == 1, "\(json.stdout)")
        let event = try JSONCoding.decode(JSONValue.self, from: Array((lines.first ?? "").utf8))
        #expect(event["type"]?.stringValue == "state" && event["to"]?.stringValue == "succeeded")
        #expect(event["job"]?.stringValue == id && event["from"] == .null && event["seq"] == .null)
        #expect(event["attempt"]?.intValue == 1 && event["error"] == nil)
    }

    /// Progress reported 100 times a second reaches the feed coalesced (at most one event per job per 0.25 s, so
    /// about 4 a second), and the last progress is flushed before the job's final state event.
    @Test func progressIsCoalescedAndFlushedBeforeTheEnd() throws {
        let daemon = try DaemonHarness()
        let events = try FeedRecorder(daemon)
        let id = try daemon.submitSleep(units: 150, unitMilliseconds: 10)
        try daemon.waitForState(id, "succeeded", timeout: 30)
        _ = try events.waitFor(id, "succeeded", timeout: 10)
        let mine = events.events(of: id)
        let progress = mine.filter { $0["type"]?.stringValue == "progress" }
        let end = try #require(mine.firstIndex { $0["to"]?.stringValue == "succeeded" })
        let lastProgress = try #require(mine[..<end].last { $0["type"]?.stringValue == "progress" })
        #expect(lastProgress["progress"]?["completed"]?.intValue == 150, "flushed before the end: \(lastProgress)")
        // 150 reports over at least 1.5 s: coalesced to a few per second, not 150.
        #expect(progress.count >= 3 && progress.count <= 15, "\(progress.count) progress events")
        let seqs = mine.compactMap { $0["seq"]?.intValue }
        #expect(seqs == seqs.sorted(), "in sequence order")
    }

    /// Jobs stored by a daemon that had a kind this one lacks fail with `unknown_kind` when their turn comes,
    /// through the lifecycle (queued -> running -> failed, attempt 1), and the daemon goes on.
    @Test func aStoredJobOfAnUnknownKindFailsInItsTurn() throws {
        let daemon = try DaemonHarness(arguments: ["--concurrency", "1"])
        let running = try daemon.submitSleep(units: 500, unitMilliseconds: 20)
        let waiting = try daemon.submitSleep(units: 1, unitMilliseconds: 1)
        try daemon.waitFor(running, "running") { $0["state"]?.stringValue == "running" }
        #expect(try daemon.stop(signal: SIGTERM).status == 0)
        daemon.testKinds = false
        try daemon.start()
        for id in [running, waiting] {
            let job = try daemon.waitForState(id, "failed", timeout: 10)
            #expect(job["error"]?["code"]?.stringValue == "unknown_kind")
            #expect(job["attempt"]?.intValue == 1, "\(job)")
        }
        #expect(daemon.log().contains("\(waiting.prefix(8)) sleep queued -> running"), "through the lifecycle")
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
    }

    @Test func idleDaemonUsesNoCPU() throws {
        let daemon = try DaemonHarness()
        _ = try daemon.waitForState(try daemon.submitSleep(units: 3, unitMilliseconds: 1), "succeeded")
        usleep(500_000)
        let before = try daemon.cpuSeconds()
        sleep(10)
        let used = try daemon.cpuSeconds() - before
        #expect(used <= 0.02, "idle daemon used \(used) CPU seconds in 10 s")
    }

    @Test func socketIsPrivateToItsUser() throws {
        let daemon = try DaemonHarness()
        var info = stat()
        #expect(stat(daemon.socketPath, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
    }

    /// Even if the socket's mode were opened up, another user is refused by the SO_PEERCRED check.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")))
    func anotherUserIsRefusedByPeerCredentials() throws {
        let daemon = try DaemonHarness()
        chmod(daemon.home.path, 0o755)
        chmod(daemon.socketPath, 0o666)
        // The daemon refuses on accept, before any request, and closes: the send may then fail with EPIPE, and
        // the refusal is still there to read (it was written before the close).
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            try:
                s.sendall(b'{"op": "list"}\\n')
            except BrokenPipeError:
                pass
            print(s.makefile().readline().strip())
            """
        let result = try DaemonHarness.run(
            "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script, daemon.socketPath])
        #expect(result.stdout.contains("forbidden"), "stdout: \(result.stdout) stderr: \(result.stderr) status \(result.status)")
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
    }
}

/// Records every feed event on a watch connection, in a background thread.
final class FeedRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [JSONValue] = []
    private nonisolated(unsafe) let client: DaemonClient

    /// The `watch` reply (`seq`: the last event published before it).
    let header: JSONValue

    /// Watches `daemon`'s feed (with `local`, its own events only), replaying the events after `since` first when
    /// given.
    init(_ daemon: DaemonHarness, since: Int64? = nil, local: Bool = false) throws {
        client = try DaemonClient(socketPath: daemon.socketPath)
        var request: [String: JSONValue] = ["op": "watch"]
        if let since { request["since"] = .number(Double(since)) }
        if local { request["local"] = true }
        header = try client.request(.object(request))
        let thread = Thread { [weak self] in
            guard let client = self?.client else { return }
            while let event = try? client.readLine() {
                guard let self else { return }
                self.lock.withLock { self.recorded.append(event) }
            }
        }
        thread.start()
    }

    /// Every line so far, in order.
    func all() -> [JSONValue] { lock.withLock { recorded } }

    /// Hangs up: the daemon drops the watcher, and the recording stops.
    func close() { shutdown(client.fileDescriptor, Int32(SHUT_RDWR)) }

    func events(of job: String) -> [JSONValue] {
        lock.withLock { recorded.filter { $0["job"]?.stringValue == job } }
    }

    func states(of job: String) -> [String] {
        events(of: job).filter { $0["type"]?.stringValue == "state" }.compactMap { $0["to"]?.stringValue }
    }
}
