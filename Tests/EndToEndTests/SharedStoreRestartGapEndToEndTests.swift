import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// A daemon writes a job's end in its group commit and sends the end's event to the other daemons in a later
/// `NOTIFY`: killed between the two, the end is in the store and no other daemon's watcher hears of it. The
/// other daemons cannot see that happen, but they see the daemon's next run: once it is started again, their
/// watchers are told `gap` and read the jobs again (found by the shared crash loop: a watcher with neither the
/// end nor a gap).
@Suite(.serialized)
struct SharedStoreRestartGapEndToEndTests {
    @Test func aDaemonStartedAgainAfterAKillTellsTheOthersWatchersTheyMayHaveMissedEvents() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        let onB = try FeedRecorder(b)
        // A's first start is no restart: B's watcher is not told anything.
        let a = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-a"])
        let id = try a.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try onB.waitFor(id, "succeeded", timeout: 20)
        #expect(!onB.all().contains { $0["type"]?.stringValue == "gap" }, "\(onB.all())")
        #expect(!onB.all().contains { $0["type"]?.stringValue == "relay_started" }, "never published on a feed")

        try a.crash()
        try a.start()
        let gap = try onB.waitForUnnumbered("gap", timeout: 20)
        #expect(gap["message"]?.stringValue?.contains("a daemon on host-a was started again") == true, "\(gap)")
        #expect(gap["message"]?.stringValue?.contains("refresh with list") == true, "\(gap)")
        // A's feed goes on as before: its next job is seen live on B.
        let later = try a.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try onB.waitFor(later, "succeeded", timeout: 20)
        for daemon in [a, b] { _ = try daemon.stop() }
    }
}
