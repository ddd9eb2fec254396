import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// A job's end on the shared store (issue 41): announced only once it is in the database, whatever happens to the
/// link between a daemon and PostgreSQL; and a `cancel` through another daemon answers success only with the job
/// `cancelled`.
@Suite(.serialized)
struct SharedStoreEndsEndToEndTests {
    private func psql(_ server: PostgresServer, _ sql: String) throws -> String {
        let result = try DaemonHarness.run(server.psqlPath, [server.socketConnectionString, "-At", "-c", sql])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The `state` events to an ended state a watcher got for `id`, each with the host that sent it.
    private func ends(of id: String, on watcher: FeedRecorder) -> [String] {
        watcher.events(of: id).filter {
            $0["type"]?.stringValue == "state" && ["succeeded", "failed", "cancelled"].contains($0["to"]?.stringValue ?? "")
        }.map { "\($0["to"]?.stringValue ?? "") on \($0["host"]?.stringValue ?? "?")" }
    }

    /// Waits until `condition` holds, at most `timeout` seconds; whether it did.
    private func eventually(_ timeout: Double, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return true }
            usleep(20_000)
        }
        return try condition()
    }

    /// The issue's instance: a job runs on A, whose link to PostgreSQL (through a proxy) is cut silently 1 s in
    /// with 3 s leases; the job ends on A during the cut, B rescues it once A's lease expires and runs it again to
    /// its end; then the link heals. A's end was never the job's: A's watcher must not have been told of it (it
    /// was, announced and logged before the write, which the store then fenced off), and every watcher sees at
    /// most one end (A's misses B's end during the cut, and is told so by a `gap`); A reports its end as fenced off.
    @Test func anEndMadeDuringACutPastTheLeaseIsNeverAnnounced() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let proxy = try CutProxy(unixSocket: server.socketPath)
        defer { proxy.stop() }
        let a = try DaemonHarness(arguments: [
            "--store", server.tcpURI(port: proxy.port), "--host", "host-a", "--lease", "3s", "--store-timeout", "2s",
        ])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b", "--lease", "3s"])
        let onA = try FeedRecorder(a)
        let onB = try FeedRecorder(b)
        // B is stopped until A runs the job: 25 × 100 ms, about 2.5 s on A.
        kill(b.pid, SIGSTOP)
        let id = try a.submitSleep(units: 25, unitMilliseconds: 100)
        let claimed = eventually(20) { a.log().contains("job \(id.prefix(8)) sleep queued -> running") }
        kill(b.pid, SIGCONT)
        try #require(claimed, "A did not run the job: \(a.log().suffix(2_000))")
        _ = try a.waitFor(id, timeout: 20, "1 s of progress") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 10 }

        try proxy.cut()
        // The job ends on A within the cut (its end cannot be written)...
        let endedOnA = eventually(30) {
            a.log().contains("job \(id.prefix(8)) sleep: running -> succeeded waits for the shared store")
                || a.log().contains("job \(id.prefix(8)) sleep running -> succeeded")
        }
        #expect(endedOnA, "\(a.log().suffix(2_000))")
        // ...and B, once A's lease expired, rescues it and runs it again to its end.
        _ = try b.waitForState(id, "succeeded", timeout: 60)
        try proxy.heal()
        // A, back, finds its end fenced off and says so.
        let reported = eventually(40) { a.log().contains("this run's end is not the job's") }
        #expect(reported, "\(a.log().suffix(3_000))")
        #expect(!a.log().contains("job \(id.prefix(8)) sleep running -> succeeded"), "\(a.log().suffix(3_000))")
        // A's watcher learns it missed events once A's listener is back (`gap`).
        #expect(eventually(40) { onA.all().contains { $0["type"]?.stringValue == "gap" } })

        #expect(ends(of: id, on: onA).allSatisfy { !$0.hasSuffix("host-a") }, "\(ends(of: id, on: onA))")
        #expect(ends(of: id, on: onB) == ["succeeded on host-b"], "\(ends(of: id, on: onB))")
        #expect(ends(of: id, on: onA).count <= 1, "\(ends(of: id, on: onA))")
        // The fenced-off end is reported on the feed as such: a warning, not a state.
        let warned = onA.events(of: id).contains {
            $0["type"]?.stringValue == "log" && $0["message"]?.stringValue?.contains("this run's end is not the job's") == true
        }
        #expect(warned, "\(onA.events(of: id))")
        // B ran it again from A's last checkpoint written before the cut, and its end is the store's.
        #expect(try psql(server, "SELECT state FROM trailbook_jobs WHERE id = '\(id)'") == "succeeded")
        let result = try b.show(id)["result"]
        #expect((result?["resumed_at"]?.intValue ?? 0) > 0, "\(String(describing: result))")
        for daemon in [a, b] { _ = try daemon.stop() }
    }

    /// A run's end whose first write landed but whose answer was lost (simulated: a trigger refuses A's writes of
    /// the end, and another session writes the same end under the run's lease token, as the lost try would have)
    /// is found written when A tries it again, by the run's token: it is announced once, and not taken for
    /// another daemon's end (it was, by comparing states, before the token was recorded; and with the end only
    /// announced once written, it would never have been announced).
    @Test func aRunsEndThatLandedUnansweredIsAnnouncedOnce() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-a"])
        let onA = try FeedRecorder(a)
        let id = try a.submitSleep(units: 20, unitMilliseconds: 100)
        _ = try a.waitForState(id, "running")
        let token = try psql(server, "SELECT lease_token FROM trailbook_jobs WHERE id = '\(id)'")
        #expect(Int64(token) != nil, "\(token)")
        _ = try psql(server, """
            CREATE FUNCTION tb_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
            CREATE TRIGGER tb_refuse BEFORE UPDATE ON trailbook_jobs FOR EACH ROW
                WHEN (OLD.id = '\(id)' AND NEW.state = 'succeeded') EXECUTE FUNCTION tb_refuse();
            """)
        #expect(eventually(30) { a.log().contains("job \(id.prefix(8)) sleep: running -> succeeded waits for the shared store") })
        #expect(!onA.states(of: id).contains("succeeded"), "announced unwritten")
        // The first try's commit, as if its answer had been lost on the way.
        _ = try psql(server, """
            SET session_replication_role = replica;
            UPDATE trailbook_jobs SET state = 'succeeded', result = '{}', lease_host = NULL, lease_daemon = NULL,
                lease_token = NULL, lease_expires_at = NULL, end_token = \(token) WHERE id = '\(id)';
            DROP TRIGGER tb_refuse ON trailbook_jobs;
            """)
        #expect(eventually(20) { onA.states(of: id).contains("succeeded") }, "\(a.log().suffix(2_000))")
        #expect(onA.states(of: id).filter { $0 == "succeeded" }.count == 1)
        #expect(a.logShows("job \(id.prefix(8)) sleep running -> succeeded"))
        #expect(!a.log().contains("this run's end is not the job's"), "\(a.log().suffix(2_000))")
        _ = try a.stop()
        #expect(a.log().components(separatedBy: "job \(id.prefix(8)) sleep running -> succeeded").count == 2)
    }

    /// A `cancel` through B of a job running on A (in a queue only A serves) when A is killed: B asks A, A never
    /// answers, B rescues the job once A's lease expires (`running` → `queued`). The cancel must then cancel the
    /// job where it is: it used to exit 0 with state `queued`, and the job ran to `succeeded` once A was back.
    @Test func aCancelThroughAnotherDaemonCancelsAJobRescuedFromAKilledDaemon() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let aArguments = ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "only-a", "--lease", "2s"]
        let a = try DaemonHarness(arguments: aArguments)
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b", "--lease", "2s"])
        let id = try a.submitSleep(units: 200, unitMilliseconds: 50, options: ["queue": "only-a"])
        _ = try a.waitFor(id, timeout: 20, "some progress") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 2 }
        try a.crash()

        let cancelled = try b.cli(["cancel", id, "--json"])
        #expect(cancelled.status == 0, "\(cancelled.stdout) \(cancelled.stderr)")
        let reply = try? JSONParser.parse(Array(cancelled.stdout.utf8))
        #expect(reply?["state"]?.stringValue == "cancelled", "\(cancelled.stdout) \(cancelled.stderr)")
        #expect(try psql(server, "SELECT state FROM trailbook_jobs WHERE id = '\(id)'") == "cancelled")

        // A, back, runs a later job of its queue, and the cancelled one stays cancelled.
        let before = a.log().count
        try a.start()
        let later = try a.submitSleep(units: 1, unitMilliseconds: 1, options: ["queue": "only-a"])
        _ = try a.waitForState(later, "succeeded")
        #expect(try psql(server, "SELECT state FROM trailbook_jobs WHERE id = '\(id)'") == "cancelled")
        #expect(!a.log().dropFirst(before).contains("job \(id.prefix(8)) sleep queued -> running"), "\(a.log().suffix(2_000))")
        for daemon in [a, b] { _ = try daemon.stop() }
    }

    /// A `cancel` through B of a job running on A that ends `succeeded` before A acts on the request: the cancel
    /// fails with `invalid_state` (exit 1), as for a job already ended; it used to exit 0 with `succeeded`.
    /// Deterministic: A is stopped (SIGSTOP) in the job's one 2 s step until B's request is in the store and the
    /// step is due; resumed, A's loop runs its due timer (the job ends) before it reads the request.
    @Test func aCancelThroughAnotherDaemonOfAJobThatFinishedFirstFails() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(arguments: [
            "--store", server.socketConnectionString, "--host", "host-a", "--queues", "only-a", "--lease", "60s",
        ])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b", "--lease", "60s"])
        let id = try a.submitSleep(units: 1, unitMilliseconds: 2_000, options: ["queue": "only-a"])
        #expect(eventually(20) { a.log().contains("job \(id.prefix(8)) sleep queued -> running") })
        let started = Date()
        kill(a.pid, SIGSTOP)
        var resumed = false
        defer { if !resumed { kill(a.pid, SIGCONT) } }

        let work = try TemporaryDirectory()
        let cancel = Process()
        cancel.executableURL = URL(fileURLWithPath: Binary.path)
        cancel.arguments = ["cancel", id]
        cancel.environment = b.environment
        FileManager.default.createFile(atPath: work.file("err"), contents: nil)
        cancel.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: work.file("err")))
        cancel.standardOutput = FileHandle.nullDevice
        try cancel.run()
        defer { if cancel.isRunning { cancel.terminate() } }
        #expect(try eventually(20) { try psql(server, "SELECT coalesce(control, '') FROM trailbook_jobs WHERE id = '\(id)'") == "cancel" })
        // The step is due (2 s after the job started, and a margin), then A goes on.
        let due = 2.5 - Date().timeIntervalSince(started)
        if due > 0 { usleep(UInt32(due * 1_000_000)) }
        kill(a.pid, SIGCONT)
        resumed = true

        cancel.waitUntilExit()
        let printed = (try? String(contentsOfFile: work.file("err"), encoding: .utf8)) ?? ""
        #expect(cancel.terminationStatus == 1, "\(printed)")
        #expect(printed.contains("invalid_state") || printed.contains("ended (succeeded)"), "\(printed)")
        #expect(try psql(server, "SELECT state FROM trailbook_jobs WHERE id = '\(id)'") == "succeeded")
        for daemon in [a, b] { _ = try daemon.stop() }
    }
}
