import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// A daemon of a shared store receives the other daemons' feed only while one of its watchers wants their events
/// (`FeedRelay`, "Following"): watchers of its own events (`"local": true`) cost it nothing of the others', and a
/// watcher of every daemon's events is answered once the daemon follows them, so it misses no end.
@Suite(.serialized)
struct SharedStoreFeedFollowingEndToEndTests {
    private static let following = "feed relay: following the other daemons' events"
    private static let stopped = "feed relay: stopped following the other daemons' events"

    /// Two daemons: A serves a queue nobody submits to (every job runs on B), and stops following 0.5 s after its
    /// last watcher of every daemon's events leaves.
    private func daemons(_ server: PostgresServer) throws -> (a: DaemonHarness, b: DaemonHarness) {
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0.5"])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        return (a, b)
    }

    /// Local watchers see their daemon's own events only, and keep it from following the others: a watcher of
    /// every daemon's events that comes back to A with a `since` of that time is told it may have missed some
    /// (`gap`), and from then on sees B's jobs live. Once it leaves, A stops following again, and a watcher back
    /// with a `since` of the time it followed is told so too. Fails if A follows whatever its watchers want (no
    /// `gap`: the replay would be whole) or if local watchers get other daemons' events.
    @Test func aDaemonFollowsTheOthersEventsOnlyWhileAWatcherWantsThem() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let (a, b) = try daemons(server)
        let localA = try FeedRecorder(a, local: true)
        let localB = try FeedRecorder(b, local: true)
        let before = try #require(localA.header["seq"]?.intValue)

        // Submitted through A (its `submitted` event is A's own), run on B (its states are B's).
        let first = try a.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try localB.waitFor(first, "succeeded", timeout: 20)
        #expect(localB.events(of: first).allSatisfy { $0["host"]?.stringValue == "host-b" }, "\(localB.events(of: first))")
        #expect(localA.events(of: first).map { $0["type"]?.stringValue } == ["submitted"], "\(localA.events(of: first))")
        #expect(!a.log().contains(Self.following), "no watcher of A wanted B's events: \(a.log())")

        // A watcher of every daemon's events, back with a `since` of that time: A's own events, then the gap.
        let everything = try FeedRecorder(a, since: before)
        let gap = try everything.waitForUnnumbered("gap", timeout: 10)
        #expect(gap["message"]?.stringValue?.contains("did not follow other daemons' events") == true, "\(gap)")
        // The replay (before the gap line) starts with A's own event. (B's last events of the job may follow it
        // there or after the gap: B sends its feed a moment after its own watchers see it, and A receives from the
        // moment it follows, which may come before this watcher is added.)
        let lines = everything.all()
        let gapAt = try #require(lines.firstIndex { $0["type"]?.stringValue == "gap" })
        #expect(lines[..<gapAt].first { $0["job"]?.stringValue == first }?["type"]?.stringValue == "submitted", "\(lines)")
        #expect(a.logShows(Self.following))
        // From now on B's jobs are seen live through A, and still not by A's local watcher.
        let second = try b.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try everything.waitFor(second, "succeeded", timeout: 20)
        #expect(everything.events(of: second).first?["type"]?.stringValue == "submitted")
        _ = try localB.waitFor(second, "succeeded", timeout: 20)
        #expect(localA.events(of: second).isEmpty, "\(localA.events(of: second))")
        #expect(!localA.all().contains { $0["type"]?.stringValue == "gap" }, "a local watcher missed nothing: \(localA.all())")
        let seen = try #require(everything.events(of: second).last?["seq"]?.intValue)

        // The watcher leaves; 0.5 s later A stops following, and B's next job passes A by.
        everything.close()
        #expect(a.logShows(Self.stopped, within: 10), "\(a.log())")
        let third = try b.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try localB.waitFor(third, "succeeded", timeout: 20)
        let back = try FeedRecorder(a, since: seen)
        let missed = try back.waitForUnnumbered("gap", timeout: 10)
        #expect(missed["message"]?.stringValue?.contains("did not follow other daemons' events") == true, "\(missed)")
        let again = back.all()
        let missedAt = try #require(again.firstIndex { $0["type"]?.stringValue == "gap" })
        #expect(again[..<missedAt].allSatisfy { $0["job"]?.stringValue != third }, "\(again)")
        for daemon in [a, b] { _ = try daemon.stop() }
    }

    /// `watch ID` through a daemon that follows nobody's events, of a job another daemon runs (a few tenths of a
    /// second): A starts following for the watch, the job's end reaches it, and `watch` exits with it. Five times,
    /// each starting from a daemon that does not follow. (The watch is answered only once A follows, so no event
    /// committed after the answer passes it by; this test cannot catch that moment: the CLI's reads after it go
    /// through A's one store connection behind the `LISTEN`, which closes the window for `watch ID` anyway.)
    @Test func watchingAJobAnotherDaemonRunsThroughADaemonThatFollowsNobodySeesItsEnd() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let (a, b) = try daemons(server)
        for round in 1...5 {
            let id = try b.submitSleep(units: 4, unitMilliseconds: 50)
            let watched = try a.cli(["watch", String(id.prefix(8))])
            #expect(watched.status == 0, "round \(round): \(watched.stderr)")
            #expect(watched.stdout.contains("-> succeeded") || watched.stdout.contains("succeeded"), "round \(round): \(watched.stdout)")
            // A stops following once the watch is gone: the next round starts from there.
            let stops = { a.log().components(separatedBy: Self.stopped).count - 1 }
            let deadline = Date().addingTimeInterval(10)
            while stops() < round && Date() < deadline { usleep(20_000) }
            #expect(stops() == round, "round \(round): \(a.log())")
        }
        for daemon in [a, b] { _ = try daemon.stop() }
    }
}
