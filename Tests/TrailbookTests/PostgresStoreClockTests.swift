import Foundation
import TestSupport
import Testing
import TrailbookPostgres

@testable import TrailbookEngine

/// `PostgresJobStore` keeps its times on the database's clock and hands them back on the daemon's
/// (`DatabaseClock`, issue 41): a retry's due time and a clean-up's next try come back as written (within the round
/// trip), and "due by", "ended before" compare as on the daemon's clock. (Daemons whose clocks are off are
/// `SharedStoreClockTests`.)
struct PostgresStoreClockTests {
    @Test func retryCleanUpAndRetentionTimesRoundTripThroughTheDatabasesClock() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let store = try PostgresJobStore(
            connectionString: try PostgresConnectionString(server.socketConnectionString),
            options: SharedStoreOptions())
        var jobs = [JobStoreTests().makeJob("0a000000-0000-4000-8000-0000000000e1")]
        try store.insert(&jobs, digests: [nil], duplicateKeys: [[]])
        var job = jobs[0]
        job.state = .needsRetry
        job.attempt = 1
        let due = Timestamp.now() + 100
        job.retryAt = due
        try store.update(job, addingCleanUp: false)
        let loaded = try #require(try store.job(id: job.id))
        #expect(abs((loaded.retryAt ?? 0) - due) < 1, "\(String(describing: loaded.retryAt)) for \(due)")

        // An end with a clean-up: due now, not a minute ago; then its next try, 5 minutes ahead.
        job.state = .failed
        job.retryAt = nil
        try store.update(job, addingCleanUp: true)
        #expect(try store.job(id: job.id)?.retryAt == nil)
        #expect(try store.dueCleanUps(now: Timestamp.now() + 1).map(\.jobID) == [job.id])
        #expect(try store.dueCleanUps(now: Timestamp.now() - 60).isEmpty)
        let next = Timestamp.now() + 300
        try store.rescheduleCleanUp(jobID: job.id, tries: 2, nextAt: next, error: "DELETE answered 503")
        let pending = try #require(try store.dueCleanUps(now: .infinity).first)
        #expect(abs(pending.nextAt - next) < 1 && abs(pending.createdAt - Timestamp.now()) < 5, "\(pending)")
        #expect(try store.dueCleanUps(now: next - 10).isEmpty)
        #expect(try store.dueCleanUps(now: next + 10).map(\.jobID) == [job.id])

        // Retention: ended a moment ago, so not before a cutoff a minute back; kept for its clean-up, then pruned.
        #expect(try store.pruneEnded(state: .failed, endedBefore: Timestamp.now() - 60, limit: 10).isEmpty)
        #expect(try store.endedJobsAwaitingCleanUp(state: .failed, endedBefore: Timestamp.now() + 1) == 1)
        #expect(try store.endedJobsAwaitingCleanUp(state: .failed, endedBefore: Timestamp.now() - 60) == 0)
        try store.removeCleanUp(jobID: job.id)
        #expect(try store.pruneEnded(state: .failed, endedBefore: Timestamp.now() + 1, limit: 10).map(\.id) == [job.id])
    }
}
