import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// Preemption by priority on a shared store: two daemons on one throwaway PostgreSQL, every slot taken by
/// low-priority jobs; a higher job takes the slot of exactly one of them, on a daemon that serves its queue.
@Suite(.serialized)
struct SharedStorePreemptionEndToEndTests {
    /// Lease of the daemons: their lease tick (where they preempt) comes every third of it.
    private static let lease = 1.5

    private func daemon(_ server: PostgresServer, queues: String = "default") throws -> DaemonHarness {
        try DaemonHarness(arguments: [
            "--store", server.socketConnectionString, "--lease", "\(Self.lease)s", "--concurrency", "2",
            "--queues", queues,
        ])
    }

    /// Waits until each of `ids` runs on some daemon and has checkpointed `units` items.
    private func waitUntilRunning(_ ids: [String], units: Int, on daemon: DaemonHarness) throws {
        for id in ids {
            try daemon.waitFor(id, timeout: 60, "running with \(units) items done") {
                $0["state"]?.stringValue == "running" && ($0["progress"]?["completed"]?.intValue ?? 0) >= units
            }
        }
    }

    /// Waits until `recorder` has seen job `id` reach `state`.
    private func waitForEvent(_ recorder: FeedRecorder, _ id: String, _ state: String, timeout: Double = 60) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !recorder.states(of: id).contains(state) {
            guard Date() < deadline else {
                throw HarnessError("job \(id) never reached \(state) on the feed; states: \(recorder.states(of: id))")
            }
            usleep(10_000)
        }
    }

    /// The jobs of `ids` the feed shows stopped and queued again (`running` → `queued`), with their stop's event.
    private func preempted(_ ids: [String], in recorder: FeedRecorder) -> [String: JSONValue] {
        var found: [String: JSONValue] = [:]
        for id in ids {
            let event = recorder.events(of: id).first {
                $0["type"]?.stringValue == "state" && $0["from"]?.stringValue == "running"
                    && $0["to"]?.stringValue == "queued"
            }
            if let event { found[id] = event }
        }
        return found
    }

    /// The feed's state events in order, each as "<job> <new state>".
    private func stateOrder(_ recorder: FeedRecorder) -> [String] {
        recorder.all().compactMap { event -> String? in
            guard event["type"]?.stringValue == "state", let job = event["job"]?.stringValue else { return nil }
            return "\(job) \(event["to"]?.stringValue ?? "")"
        }
    }

    /// How many runs a daemon's log shows stopped to free a slot.
    private func preemptions(in daemon: DaemonHarness) -> Int {
        daemon.log().components(separatedBy: "stopping (resource_reclaim): paused to free a slot").count - 1
    }

    @Test func aHigherJobTakesTheSlotOfExactlyOneLowRunWhichResumesFromItsCheckpoint() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let (a, b) = (try daemon(server), try daemon(server))
        let feed = try FeedRecorder(a)
        // Four low jobs fill both daemons' two slots; a fifth waits behind them.
        let low = try (0..<4).map { n in
            try [a, b][n % 2].submitSleep(units: 200, unitMilliseconds: 50)
        }
        try waitUntilRunning(low, units: 3, on: a)
        let queuedLow = try b.submitSleep(units: 5, unitMilliseconds: 20)
        let submitted = Date()
        let high = try b.submitSleep(units: 10, unitMilliseconds: 20, options: ["priority": 10])
        try waitForEvent(feed, high, "running")
        let waited = Date().timeIntervalSince(submitted)
        // Within a lease tick or two (a third of the lease each), plus the stopped run's checkpoint and end.
        #expect(waited < 4 * Self.lease, "the high job started \(waited) s after its submit")
        try waitForEvent(feed, high, "succeeded")

        // Exactly one low run stopped, with resource_reclaim, saying which job took its slot.
        let stopped = preempted(low, in: feed)
        #expect(stopped.count == 1, "preempted: \(stopped.keys.sorted())")
        let victim = try #require(stopped.keys.first)
        let cancellation = stopped[victim]?["cancellation"]
        #expect(cancellation?["reason"]?.stringValue == "resource_reclaim")
        #expect(cancellation?["detail"]?.stringValue == "paused to free a slot for job \(high) (priority 10)")
        #expect(preemptions(in: a) + preemptions(in: b) == 1)
        // The daemon that stopped it is the one that ran the high job.
        let runner = a.log().contains("job \(high.prefix(8)) sleep queued -> running") ? a : b
        #expect(preemptions(in: runner) == 1)

        // The preempted job resumes from its checkpoint on the same attempt; the low job that waited behind it in
        // the queue, submitted later, did not overtake it: it resumed first (or on another daemon at once).
        try waitForEvent(feed, victim, "succeeded", timeout: 120)
        let done = try a.show(victim)
        #expect(done["attempt"]?.intValue == 1, "a reclaim does not use up an attempt")
        #expect((done["result"]?["resumed_at"]?.intValue ?? 0) >= 3, "resumed from its checkpoint: \(done)")
        try waitForEvent(feed, queuedLow, "succeeded", timeout: 120)
        for id in low { try waitForEvent(feed, id, "succeeded", timeout: 120) }
        // No thrashing: still one preemption, and every low run but the victim ran once.
        #expect(preemptions(in: a) + preemptions(in: b) == 1)
        for id in low where id != victim { #expect(feed.states(of: id) == ["running", "succeeded"], "job \(id)") }
        #expect(feed.states(of: victim) == ["running", "queued", "running", "succeeded"])
        #expect(feed.states(of: high) == ["running", "succeeded"], "the high job ran once, to its end")
        let order = stateOrder(feed)
        let resumed = order.lastIndex(of: "\(victim) running") ?? Int.max
        let laterStarted = order.firstIndex(of: "\(queuedLow) running") ?? -1
        #expect(resumed < laterStarted, "the later low job overtook the victim: \(order)")
        _ = try a.stop()
        _ = try b.stop()
    }

    @Test func equalPrioritiesNeverPreempt() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let (a, b) = (try daemon(server), try daemon(server))
        let feed = try FeedRecorder(a)
        // Four runs of priority 5 for several lease ticks (2 s each, a tick every 0.5 s).
        let running = try (0..<4).map { n in
            try [a, b][n % 2].submitSleep(units: 40, unitMilliseconds: 50, options: ["priority": 5])
        }
        try waitUntilRunning(running, units: 1, on: a)
        let same = try a.submitSleep(units: 5, unitMilliseconds: 20, options: ["priority": 5])
        try waitForEvent(feed, same, "succeeded", timeout: 120)
        for id in running { try waitForEvent(feed, id, "succeeded", timeout: 120) }
        // It waited for a run's end: no run stopped for it.
        #expect(preempted(running, in: feed).isEmpty)
        #expect(preemptions(in: a) + preemptions(in: b) == 0)
        let order = stateOrder(feed)
        let started = try #require(order.firstIndex(of: "\(same) running"))
        #expect(running.contains { order.firstIndex(of: "\($0) succeeded") ?? Int.max < started }, "\(order)")
        _ = try a.stop()
        _ = try b.stop()
    }

    @Test func aDaemonNotServingTheQueueNeverPreemptsForIt() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        // A serves only `default`; B serves `default` and `gpu`. Both are full of low `default` jobs.
        let (a, b) = (try daemon(server), try daemon(server, queues: "default,gpu"))
        let feed = try FeedRecorder(a)
        let low = try (0..<4).map { n in try [a, b][n % 2].submitSleep(units: 200, unitMilliseconds: 50) }
        try waitUntilRunning(low, units: 2, on: a)
        // A high `gpu` job, submitted through A: only B may take it, so only one of B's runs stops.
        let high = try a.submitSleep(units: 10, unitMilliseconds: 20, options: ["priority": 10, "queue": "gpu"])
        try waitForEvent(feed, high, "succeeded", timeout: 60)
        #expect(b.log().contains("job \(high.prefix(8)) sleep queued -> running"))
        #expect(preemptions(in: a) == 0, "A preempted for a queue it does not serve")
        #expect(preemptions(in: b) == 1)
        let stopped = preempted(low, in: feed)
        #expect(stopped.count == 1)
        let victim = try #require(stopped.keys.first)
        #expect(b.log().contains("job \(victim.prefix(8)) sleep queued -> running"), "the victim ran on B")
        for id in low { try waitForEvent(feed, id, "succeeded", timeout: 120) }
        _ = try a.stop()
        _ = try b.stop()
    }
}
