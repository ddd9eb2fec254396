import Foundation
import Testing
import TrailbookClient
import TrailbookEngine

/// `TrailbookClient`'s typed feed against the real daemon: the daemon's `gap` line comes through as a typed event.
/// (Following a restart without loss is tested by `examples/thumbnails`.)
@Suite struct JobFeedEndToEndTests {
    /// A watcher that asks for events after a `seq` the daemon never handed out (a number from another daemon, or
    /// from before the store was made again) cannot be replayed to: its first event is a `gap`, telling it to read
    /// the jobs again, and the feed goes on with the events that follow.
    @Test func aFeedFromAnEventTheDaemonNeverHandedOutStartsWithAGap() async throws {
        let daemon = try DaemonHarness()
        defer { _ = try? daemon.stop() }
        var feed = JobClient(socketPath: daemon.socketPath).feed(since: 1_000_000_000).makeAsyncIterator()
        let first = try await feed.next()
        guard case .gap(let message)? = first?.payload else {
            Issue.record("the first event is not a gap: \(String(describing: first))")
            return
        }
        #expect(message.contains("refresh with list"), "\(message)")

        let id = try daemon.submitSleep(units: 1, unitMilliseconds: 1)
        while let event = try await feed.next() {
            if event.jobID == id, case .state(_, .succeeded, _, _, _, _) = event.payload { break }
        }
    }
}
