import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// Attempts to break the feed followed on demand (`FeedRelay`, "Following"): watches that wait longer than
/// `followWait`, watchers that miss events untold, daemons that never stop (or start) following.
@Suite(.serialized)
struct SharedStoreFeedFollowingBreakTests {
    private static let following = "feed relay: following the other daemons' events"
    private static let stopped = "feed relay: stopped following the other daemons' events"

    /// The seconds `body` took.
    private func timed<T>(_ body: () throws -> T) rethrows -> (T, Double) {
        let started = Date()
        let value = try body()
        return (value, Date().timeIntervalSince(started))
    }

    /// A `watch` without `local` waits at most `followWait` (2 s) for the store to follow, also when it comes
    /// while an earlier one's `LISTEN` is still unanswered (the daemon's link to PostgreSQL silently cut): the
    /// second watcher used to join the waiters after their timer had fired, with no timer of its own, and wait
    /// until the `LISTEN` failed (the store's request timeout, 8 s here), holding the heavy gate (every `list`
    /// and replay) all along.
    @Test func aWatchWaitsAtMostTheFollowWaitWhileTheStoreDoesNotAnswer() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let proxy = try CutProxy(unixSocket: server.socketPath)
        defer { proxy.stop() }
        let a = try DaemonHarness(
            arguments: [
                "--store", server.tcpURI(port: proxy.port), "--host", "host-a", "--queues", "elsewhere", "--lease", "120s",
                "--store-timeout", "8s",
            ],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0.5"])
        try proxy.cut()
        let (first, firstSeconds) = try timed { try FeedRecorder(a) }
        #expect(first.header["watching"]?.boolValue == true, "\(first.header)")
        #expect(firstSeconds < 3.5, "the first watch waited \(firstSeconds) s")
        // The `LISTEN` is still unanswered (it fails only after 8 s): a second and a third watcher, one after the
        // other, each wait at most the follow wait too.
        var watchers = [first]
        for round in 2...3 {
            let (next, seconds) = try timed { try FeedRecorder(a) }
            #expect(next.header["watching"]?.boolValue == true, "\(next.header)")
            #expect(seconds < 2.5, "watch \(round) waited \(seconds) s")
            watchers.append(next)
        }
        // Added before the store followed, each is told it may have missed events once the `LISTEN` fails.
        for (index, watcher) in watchers.enumerated() {
            let gap = try watcher.waitForUnnumbered("gap", timeout: 20)
            #expect(gap["message"]?.stringValue?.contains("refresh with list") == true, "watcher \(index + 1): \(gap)")
        }
        try proxy.heal()
        _ = try a.stop()
    }
}
