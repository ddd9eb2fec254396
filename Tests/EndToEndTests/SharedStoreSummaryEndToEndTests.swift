import Foundation
import Synchronization
import Testing
import TrailbookCLI
import TrailbookEngine

/// A shared store's maintenance and summaries (issue 37): retention's sweep waits for PostgreSQL without holding the
/// daemon's loop, and the service status line counts every daemon's waiting jobs, as the store has them.
@Suite(.serialized)
struct SharedStoreSummaryEndToEndTests {
    /// Retention's sweep (every second with `--keep-succeeded 1s`) meets another session's lock on the jobs table:
    /// its `DELETE` waits. Meanwhile the daemon answers `ping` at once (the sweep used to wait on the loop thread,
    /// holding every client up to the store's 10 s request timeout); once the lock goes, a later sweep deletes a
    /// job that ended.
    @Test func aRetentionSweepWaitingForALockDoesNotHoldUpTheLoop() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(arguments: [
            "--store", server.socketConnectionString, "--host", "host-a", "--lease", "120s", "--keep-succeeded", "1s",
        ])
        let holder = try server.lockJobsTable()
        defer { if holder.isRunning { holder.terminate() } }
        #expect(try server.waitsForLock(inStatementContaining: "doomed"), "no retention sweep met the lock")

        for _ in 0..<10 {
            let started = Date()
            #expect(try a.request(["op": "ping"])["ok"]?.boolValue == true)
            #expect(Date().timeIntervalSince(started) < 1, "the loop waited \(Date().timeIntervalSince(started)) s for the sweep")
            usleep(100_000)
        }

        // Once the lock goes the sweeps go on: a job that ends now is deleted by one of them.
        try server.releaseJobsTable(holder)
        let id = try a.submitSleep(units: 1, unitMilliseconds: 1)
        let deadline = Date().addingTimeInterval(30)
        var gone = false
        while !gone, Date() < deadline {
            let shown = try a.request(["op": "show", "job": .string(id)])
            gone = shown["error"]?["code"]?.stringValue == "no_such_job"
            if !gone { usleep(100_000) }
        }
        #expect(gone, "the ended job was not pruned once the lock went: \(a.log())")
        _ = try a.stop()
    }

    /// The status line (`STATUS=` to the service manager) of a daemon on a shared store counts the store's waiting
    /// jobs, every daemon's: A (which serves no queue the jobs are in) submits three jobs that B runs, then B
    /// submits two to a queue nobody serves. A's line ends at "0 running · 2 queued" and B's too. It used to count
    /// from each daemon's own transitions: A's stayed at 3 queued (B's claims never reached A's counters), B's went
    /// to -3 (its claims subtracted jobs it never counted) and neither saw the other's submits.
    @Test func theStatusLineCountsEveryDaemonsWaitingJobs() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let homeA = TemporaryDirectory()
        let homeB = TemporaryDirectory()
        let listenerA = try NotifyListener(path: homeA.file("notify.sock"))
        let listenerB = try NotifyListener(path: homeB.file("notify.sock"))
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere", "--lease", "3s"],
            home: homeA, environment: ["NOTIFY_SOCKET": listenerA.path])
        let b = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-b", "--lease", "3s"], home: homeB,
            environment: ["NOTIFY_SOCKET": listenerB.path])
        _ = try listenerA.next(timeout: 5) { $0["READY"] != nil }
        _ = try listenerB.next(timeout: 5) { $0["READY"] != nil }

        let ran = try (0..<3).map { _ in try a.submitSleep(units: 1, unitMilliseconds: 1) }
        for id in ran { _ = try b.waitForState(id, "succeeded") }
        for _ in 0..<2 { _ = try b.submitSleep(units: 1, unitMilliseconds: 1, options: ["queue": "nobody"]) }

        let wanted = "0 running · 2 queued"
        for (name, listener) in [("A", listenerA), ("B", listenerB)] {
            var last = "none"
            let found = try? listener.next(timeout: 15) { message in
                if let status = message["STATUS"] { last = status }
                return message["STATUS"] == wanted
            }
            #expect(found != nil, "\(name)'s last status line: \(last)")
        }
        _ = try a.stop()
        _ = try b.stop()
    }
}
