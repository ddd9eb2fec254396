import Dispatch
import Foundation
import TestSupport
import Testing
import TrailbookLoop
import TrailbookPostgres

@testable import TrailbookEngine

/// A group commit on the shared store is a few statements whatever its size (issue 40): its new jobs one
/// `INSERT … unnest`, their duplicate keys one, its lifecycle writes one `UPDATE … unnest`; each row keeps the
/// guarantees of a write alone (submission order, fencing by the lease token, keys dropped and clean-ups recorded
/// only for what was written).
struct SharedStoreSetWriteTests {
    private func id(_ n: Int) -> String { String(format: "0a000000-0000-4000-8000-%012d", n) }

    /// `store.sendClaim` made on the main loop, waited for here.
    private func claim(_ store: PostgresJobStore, limit: Int) throws -> [ClaimedRun] {
        _ = MainLoopThread.started
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var outcome: Result<[ClaimedRun], any Error>?
        // Used on the main loop only while this thread waits.
        nonisolated(unsafe) let store = store
        EventLoop.main.execute {
            store.sendClaim(limit: limit, kinds: ["sleep"]) { result in
                outcome = result
                done.signal()
            }
        }
        done.wait()
        return try outcome!.get()
    }

    @Test func aGroupsInsertsAndEndsAreSetBasedAndFencedRowByRow() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let connection = try PostgresConnectionString(server.socketConnectionString)
        let store = try PostgresJobStore(connectionString: connection, options: SharedStoreOptions(), daemonID: "daemon-a")
        let other = try PostgresJobStore(connectionString: connection, options: SharedStoreOptions(), daemonID: "daemon-b")

        var jobs = (1...5).map { JobStoreTests().makeJob(id($0)) }
        try store.commitGroup(
            inserting: &jobs, digests: [nil, "digest-2", nil, nil, nil],
            duplicateKeys: [["key-1", "key-1", "shared"], [], ["shared"], [], []], updating: [], durable: true)
        // Sequences follow the submission order; each job got its own row back.
        #expect(jobs.map(\.sequence) == jobs.map(\.sequence).sorted() && Set(jobs.map(\.sequence)).count == 5)
        #expect(jobs.allSatisfy { !$0.createdAt.isEmpty })
        #expect(try store.unfinishedJobs(sharing: ["shared"], kind: "sleep").map(\.id) == [id(1), id(3)])
        #expect(try store.unfinishedJobs(sharing: ["key-1"], kind: "sleep").map(\.id) == [id(1)])

        let claimed = try claim(store, limit: 4)
        #expect(claimed.map(\.job.id) == [id(1), id(2), id(3), id(4)])
        // Another daemon took job 2 over (its lease rescued and re-claimed): this daemon's end of it is fenced off.
        _ = try other.rows("UPDATE trailbook_jobs SET lease_token = 999999, lease_daemon = 'daemon-b' WHERE id = $1", [.text(id(2))])
        var ends = claimed.map(\.job)
        for index in ends.indices { ends[index].state = .succeeded }
        ends[2].state = .failed
        // And job 5, still queued, is cancelled in the same group (an unleased write, fenced the other way).
        var cancelled = jobs[4]
        cancelled.state = .cancelled
        var none: [JobRecord] = []
        try store.commitGroup(
            inserting: &none, digests: [], duplicateKeys: [],
            updating: ends.map { ($0, $0.state == .failed) } + [(cancelled, false)], durable: true)
        #expect(store.takeLostWrites() == [id(2)])
        let states = try (1...5).map { try #require(try store.job(id: id($0))).state }
        #expect(states == [.succeeded, .running, .failed, .succeeded, .cancelled])
        // The ended jobs' keys are gone, the clean-up was recorded for the one that asked, nothing for the others.
        #expect(try store.unfinishedJobs(sharing: ["shared", "key-1"], kind: "sleep").isEmpty)
        #expect(try store.dueCleanUps(now: .infinity).map(\.jobID) == [id(3)])
        let leases = try other.rows("SELECT id, lease_token, end_token FROM trailbook_jobs ORDER BY id")
        #expect(leases.map { $0.int(1) } == [nil, 999_999, nil, nil, nil])
        // The runs' ends recorded their tokens (`end_token`); the unleased cancel none.
        #expect(leases.map { $0.int(2) != nil } == [true, false, true, true, false])
        // The same ends again (as after a lost answer): the leases are released, nothing is written twice.
        try store.commitGroup(
            inserting: &none, digests: [], duplicateKeys: [], updating: ends.map { ($0, false) }, durable: true)
        #expect(try store.dueCleanUps(now: .infinity).map(\.jobID) == [id(3)])
        #expect(try (1...4).map { try #require(try store.job(id: id($0))).state } == [.succeeded, .running, .failed, .succeeded])
    }
}
