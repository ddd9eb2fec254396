import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine
import TrailbookSQLite

/// What a daemon meets in a long life (issue 42): SIGHUP, a store whose one-time switch to incremental vacuum
/// failed because SQLite's temporary directory was full.
@Suite(.serialized)
struct DaemonLifeTests {
    /// SIGHUP (its terminal closed, `kill -HUP`) stops the daemon as SIGTERM does: a log line naming the signal,
    /// running jobs stopped and checkpointed (not left `running` in the store), exit 0; the job runs on at the
    /// next start. Before, the daemon died of the signal (exit 129), silently.
    @Test func sighupStopsLikeSIGTERMWithALogLineAndNoJobLeftRunning() throws {
        let daemon = try DaemonHarness()
        let id = try daemon.submitSleep(units: 200, unitMilliseconds: 10)
        try daemon.waitFor(id, "some progress") { $0["progress"]?["completed"]?.intValue ?? 0 >= 5 }
        let stopped = try daemon.stop(signal: SIGHUP)
        #expect(stopped.status == 0, "exit \(stopped.status)")
        let log = daemon.log()
        #expect(log.contains("SIGHUP"), "\(log)")
        #expect(log.contains("stopped"), "\(log)")
        let store = try Database(path: daemon.statePath + "/jobs.sqlite3", readOnly: true)
        let state = try store.query("SELECT state FROM jobs WHERE id = ?", [.text(id)]).first?.text(0)
        #expect(state != nil && state != "running", "state in the store: \(state ?? "none")")
        try daemon.start()
        defer { _ = try? daemon.stop() }
        #expect(try daemon.waitForState(id, "succeeded", timeout: 30)["state"]?.stringValue == "succeeded")
    }

    /// A store made before retention (auto_vacuum NONE) whose switch to incremental vacuum fails because SQLite's
    /// temporary directory (`SQLITE_TMPDIR`, a 512 KiB tmpfs here) cannot hold the `VACUUM`'s copy: the warning
    /// names that directory (not "the store's file system is full"), `prune` answers (it looped for ever over
    /// free pages it could not give back), and the daemon is idle afterwards.
    @Test func pruneAnswersOnAStoreThatCouldNotSwitchToIncrementalVacuum() throws {
        let work = TemporaryDirectory()
        let temporary = try SmallFileSystem(in: work, size: "512k", named: "sqlite-tmp")
        defer { temporary.unmount() }
        var daemon = try DaemonHarness()
        var ids: [String] = []
        for _ in 0..<5 { ids.append(try daemon.submitSleep(units: 1, unitMilliseconds: 1)) }
        for id in ids { try daemon.waitForState(id, "succeeded") }
        _ = try daemon.stop()
        // Back to a store of before retention: auto_vacuum NONE, 8 MiB of other pages (so the VACUUM's copy does
        // not fit the small temporary directory), and free pages.
        do {
            let store = try Database(path: daemon.statePath + "/jobs.sqlite3")
            try store.execute("CREATE TABLE ballast (x BLOB); CREATE TABLE dropped (x BLOB)")
            for _ in 0..<8 {
                try store.execute("INSERT INTO ballast VALUES (randomblob(1048576)); INSERT INTO dropped VALUES (randomblob(262144))")
            }
            try store.execute("PRAGMA auto_vacuum = NONE; VACUUM; DROP TABLE dropped; PRAGMA wal_checkpoint(TRUNCATE)")
            #expect(try store.query("PRAGMA auto_vacuum").first?.int(0) == 0)
            #expect(try store.query("PRAGMA freelist_count").first?.int(0) ?? 0 > 0)
        }
        daemon = try DaemonHarness(home: daemon.home, environment: ["SQLITE_TMPDIR": temporary.path])
        defer { _ = try? daemon.stop() }
        let log = daemon.log()
        #expect(log.contains("could not switch the job store to incremental vacuum"), "\(log)")
        #expect(log.contains("SQLite's temporary directory \(temporary.path) is full"), "\(log)")
        #expect(!log.contains("its file system is full"), "\(log)")
        let started = Date()
        let result = try DaemonHarness.run(
            "/usr/bin/timeout", ["20", Binary.path, "prune", "--older-than", "0s", "--json"], environment: daemon.environment)
        #expect(result.status == 0, "prune: exit \(result.status) after \(Date().timeIntervalSince(started)) s: \(result.stderr)")
        let reply = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
        #expect(reply["pruned"]?["succeeded"]?.intValue == 5, "\(reply)")
        usleep(300_000)
        let before = try daemon.cpuSeconds()
        usleep(1_000_000)
        #expect(try daemon.cpuSeconds() - before < 0.2, "the daemon kept working after the prune")
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
    }
}
