import Foundation
import Testing
import TrailbookEngine

/// Daemons whose wall clocks disagree with the database's (libfaketime, ±2 h) sharing one PostgreSQL store
/// (issue 41, item 3): everything compared across hosts (retention's cutoffs, `retry_at`, leases) takes the
/// database's clock, so a daemon ahead prunes no fresh end and one behind waits a retry's backoff out. And an idle
/// daemon whose database is down says so once, not 19 times a second (item 4).
@Suite(.serialized)
struct SharedStoreClockTests {
    /// A daemon on `server` whose wall clock is the real one plus `offset` (libfaketime's syntax: `+2h`, `-2h`).
    private func daemon(
        _ server: PostgresServer, clock offset: String?, _ arguments: [String]
    ) throws -> (DaemonHarness, FakeClock?) {
        let clock = try offset.map { offset in
            let clock = try FakeClock()
            try clock.set(offset)
            return clock
        }
        let daemon = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString] + arguments, environment: clock?.environment ?? [:])
        return (daemon, clock)
    }

    /// How far `daemon`'s wall clock is from the test's, in seconds, read from the time stamp of its log's last
    /// entry (written a few seconds ago at most): proves the fake clock took.
    private func clockOffset(of daemon: DaemonHarness) throws -> Double {
        let line = try #require(daemon.log().split(separator: "\n").last { $0.contains(" trailbook-jobs: ") })
        let stamp = String(line.prefix { $0 != " " })
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        let date = try #require(formatter.date(from: stamp) ?? plain.date(from: stamp), "no time stamp: \(line)")
        return date.timeIntervalSinceNow
    }

    /// Whether `daemon`'s clock is `hours` off the real one (within a minute).
    private func isOff(_ daemon: DaemonHarness, by hours: Double) throws -> Bool {
        abs(try clockOffset(of: daemon) - hours * 3600) < 60
    }

    @Test(arguments: ["+2h", "-2h"])
    func retentionOnADaemonWhoseClockIsOffPrunesByTheDatabasesClock(offset: String) throws {
        let server = try PostgresServer()
        defer { server.stop() }
        // B (the real clock) runs the jobs; A (its clock off by 2 h) serves another queue and prunes.
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString])
        let (a, clock) = try daemon(server, clock: offset, ["--queues", "elsewhere", "--keep-succeeded", "1h"])
        // Its file holds the offset libfaketime reads: kept until the test ends.
        defer { withExtendedLifetime(clock) {} }
        #expect(try isOff(a, by: offset == "+2h" ? 2 : -2), "\(a.log())")
        // Ended seconds ago with an idempotency key: a daemon 2 h ahead pruned it at once, and the key then made a
        // new job that ran it again.
        let submitted = try b.request([
            "op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": [:], "key": "clock-41",
        ])
        let id = try #require(submitted["job"]?["id"]?.stringValue, "\(submitted)")
        try b.waitForState(id, "succeeded")
        // Each state's retention (1 h for succeeded): the job ended a second ago, on the database's clock.
        let kept = try a.request(["op": "prune"])
        #expect(kept["ok"]?.boolValue == true, "\(kept)")
        #expect(kept["pruned"]?["succeeded"]?.intValue == 0, "\(kept)")
        #expect(try a.show(id)["state"]?.stringValue == "succeeded")
        let again = try a.request([
            "op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": [:], "key": "clock-41",
        ])
        #expect(again["job"]?["id"]?.stringValue == id, "the key names the job that ran: \(again)")
        // What is older than asked is pruned, by the database's clock (a daemon behind once pruned it 2 h late).
        usleep(1_500_000)
        let pruned = try a.request(["op": "prune", "older_than_s": 1])
        #expect(pruned["pruned"]?["succeeded"]?.intValue == 1, "\(pruned)")
        #expect(try a.request(["op": "show", "job": .string(id)])["error"]?["code"]?.stringValue == "no_such_job")
        #expect(try isOff(a, by: offset == "+2h" ? 2 : -2), "\(a.log())")
        _ = try a.stop()
        _ = try b.stop()
    }

    /// The daemon behind ran the job and writes its `retry_at`: 1 h behind once made it due at once (retried at
    /// every lease tick instead of backing off). Here the daemon waits the backoff out itself; the database's
    /// clock decides when the store moves it.
    @Test func aRetryWrittenByADaemonBehindWaitsItsBackoff() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let (a, clock) = try daemon(server, clock: "-2h", ["--lease", "1s", "--retry-base", "6s"])
        // Its file holds the offset libfaketime reads: kept until the test ends.
        defer { withExtendedLifetime(clock) {} }
        #expect(try isOff(a, by: -2), "\(a.log())")
        let events = try FeedRecorder(a)
        // Stalls after 2 units: stopped for `timeout` after 0.5 s without progress, retried after 3-6 s.
        let id = try a.submitSleep(
            units: 10, unitMilliseconds: 20, stallAfter: 2, options: ["stall_timeout_s": 0.5, "max_attempts": 3])
        let waiting = try events.waitFor(id, "needs_retry", timeout: 30)
        let waitingSince = Date()
        let backoff = try #require(waiting["retry_in_s"]?.doubleValue, "\(waiting)")
        #expect(backoff >= 2.9 && backoff <= 6.1, "\(waiting)")
        _ = try events.waitFor(id, "queued", timeout: backoff + 10)
        let waited = Date().timeIntervalSince(waitingSince)
        #expect(waited >= backoff - 0.5, "retried after \(waited) s of a \(backoff) s backoff")
        #expect(waited <= backoff + 3, "retried after \(waited) s of a \(backoff) s backoff")
        #expect(try isOff(a, by: -2), "\(a.log())")
        _ = try a.stop()
    }

    /// The daemon ahead ran the job and died while it waited: its `retry_at` 2 h ahead once kept the job waiting
    /// 2 h more on every other daemon. Another daemon moves it when its backoff is over.
    @Test func aRetryWrittenByADaemonAheadComesDueOnTimeForAnother() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let (a, clock) = try daemon(server, clock: "+2h", ["--host", "host-a", "--retry-base", "6s"])
        // Its file holds the offset libfaketime reads: kept until the test ends.
        defer { withExtendedLifetime(clock) {} }
        #expect(try isOff(a, by: 2), "\(a.log())")
        // B serves another queue: it runs nothing of A's, but its lease tick (every third of a second) moves due
        // retries.
        let b = try DaemonHarness(
            arguments: [
                "--store", server.socketConnectionString, "--host", "host-b", "--queues", "elsewhere", "--lease", "1s",
            ])
        let onA = try FeedRecorder(a)
        let onB = try FeedRecorder(b)
        let id = try a.submitSleep(
            units: 10, unitMilliseconds: 20, stallAfter: 2, options: ["stall_timeout_s": 0.5, "max_attempts": 3])
        let waiting = try onA.waitFor(id, "needs_retry", timeout: 30)
        let waitingSince = Date()
        let backoff = try #require(waiting["retry_in_s"]?.doubleValue, "\(waiting)")
        // Written (the store says so) before A dies.
        try b.waitForState(id, "needs_retry", timeout: 10)
        try a.crash()
        let moved = try onB.waitFor(id, "queued", timeout: backoff + 10)
        let waited = Date().timeIntervalSince(waitingSince)
        #expect(moved["from"]?.stringValue == "needs_retry", "\(moved)")
        #expect(waited >= backoff - 0.5, "moved after \(waited) s of a \(backoff) s backoff")
        #expect(waited <= backoff + 3, "moved after \(waited) s of a \(backoff) s backoff")
        _ = try b.stop()
    }

    /// Leases are the database's clock: a daemon 2 h ahead or behind neither loses its own early nor has them taken
    /// by a daemon on the real clock, over four lease lengths of running.
    @Test func leasesOfDaemonsWhoseClocksAreOffAreNeitherLostNorStolenEarly() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let (ahead, aheadClock) = try daemon(server, clock: "+2h", ["--queues", "ahead", "--lease", "1s"])
        let (behind, behindClock) = try daemon(server, clock: "-2h", ["--queues", "behind", "--lease", "1s"])
        defer { withExtendedLifetime((aheadClock, behindClock)) {} }
        #expect(try isOff(ahead, by: 2) && isOff(behind, by: -2), "\(ahead.log() + behind.log())")
        // The real clock; it claims neither queue, and rescues any expired lease at its ticks.
        let rescuer = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--lease", "1s"])
        let watcher = try FeedRecorder(rescuer)
        // 4 s each: four lease lengths.
        let first = try ahead.submitSleep(units: 80, unitMilliseconds: 50, options: ["queue": "ahead"])
        let second = try behind.submitSleep(units: 80, unitMilliseconds: 50, options: ["queue": "behind"])
        for (daemon, id) in [(ahead, first), (behind, second)] {
            let done = try daemon.waitForState(id, "succeeded", timeout: 30)
            #expect(done["attempt"]?.intValue == 1, "\(done)")
        }
        for id in [first, second] {
            let deadline = Date().addingTimeInterval(5)
            while !watcher.states(of: id).contains("succeeded") && Date() < deadline { usleep(10_000) }
            #expect(watcher.states(of: id) == ["running", "succeeded"], "job \(id): \(watcher.events(of: id))")
        }
        #expect(!rescuer.log().contains("rescued"), "\(rescuer.log())")
        #expect(try isOff(ahead, by: 2) && isOff(behind, by: -2), "\(ahead.log() + behind.log())")
        for daemon in [ahead, behind] {
            let log = daemon.log()
            #expect(!log.contains("lease was lost") && !log.contains("lost the job's lease"), "\(log)")
        }
        for daemon in [ahead, behind, rescuer] { _ = try daemon.stop() }
    }

    /// An idle daemon whose PostgreSQL is down for 10 s: one line when the outage starts, one when writes succeed
    /// again (once logged 19 pairs a second, 1 150 lines in 20 s, though the database never came back); it claims
    /// work again once the server is back.
    @Test func anIdleDaemonLogsAStoreOutageOnceAndResumesWhenItEnds() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let daemon = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--lease", "1s"])
        let warmUp = try daemon.submitSleep(units: 1, unitMilliseconds: 1)
        try daemon.waitForState(warmUp, "succeeded")
        // Log entries (a message may span lines: libpq's have a second one).
        func entries() -> [Substring] {
            daemon.log().split(separator: "\n").filter { $0.contains(" trailbook-jobs: ") }
        }
        let before = entries().count
        try server.shutDown()
        defer { try? server.startUp() }
        // The outage is noticed (a claim at the next lease tick is refused).
        #expect(daemon.logShows("the job store refused a write", within: 5), "\(daemon.log())")
        usleep(10_000_000)
        let during = entries().dropFirst(before)
        #expect(!during.contains { $0.contains("takes writes again") }, "\(during.joined(separator: "\n"))")
        #expect(during.filter { $0.contains("refused a write") }.count == 1, "\(during.joined(separator: "\n"))")
        // Besides it, at most retention's own warning (once per outage too) if a sweep fell in it.
        let others = during.filter { !$0.contains("refused a write") && !$0.contains("retention could not prune") }
        #expect(
            others.isEmpty && during.count <= 2,
            "\(during.count) entries in 10 s of outage:\n\(during.joined(separator: "\n"))")
        try server.startUp()
        // Written again: said once, and work submitted now runs.
        #expect(daemon.logShows("the job store takes writes again", within: 30), "\(daemon.log())")
        let after = try daemon.submitSleep(units: 1, unitMilliseconds: 1)
        try daemon.waitForState(after, "succeeded", timeout: 30)
        let all = entries().dropFirst(before)
        #expect(all.filter { $0.contains("takes writes again") }.count == 1, "\(all.joined(separator: "\n"))")
        #expect(all.filter { $0.contains("refused a write") }.count == 1, "\(all.joined(separator: "\n"))")
        _ = try daemon.stop()
    }
}
