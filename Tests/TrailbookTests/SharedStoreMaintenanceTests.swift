import Foundation
import TestSupport
import Testing
import TrailbookLoop
import TrailbookPostgres

@testable import TrailbookEngine

/// What the heartbeat of a shared store does in SQL, against what the engine does in Swift (issue 37): a rescue of an
/// expired lease and a retry coming due move a job as `JobLifecycle` says they do; and a daemon on a shared store
/// leaves due retries to the heartbeat instead of arming a timer per waiting retry on start.
@Suite(.serialized)
struct SharedStoreMaintenanceTests {
    private static func id(_ n: Int) -> String { String(format: "0f000000-0000-4000-8000-%012d", n) }

    /// The cases: two runs whose daemon died (a first attempt; a resumed second attempt with an earlier stop and
    /// error on record), a retry that is due (its failure on record) and one that is not.
    private static func cases() -> [JobRecord] {
        var first = JobStoreTests().makeJob(id(1), state: .running)
        first.attempt = 1
        var resumed = JobStoreTests().makeJob(id(2), state: .running)
        resumed.attempt = 2
        resumed.resumesAttempt = true
        resumed.cancellation = Cancellation(reason: .resourceReclaim, at: "2026-01-01T00:00:00Z", detail: "daemon shutting down")
        resumed.error = JobError(code: "upload_failed", message: "the server answered 503", retryable: true)
        var due = JobStoreTests().makeJob(id(3), state: .needsRetry)
        due.attempt = 1
        due.error = JobError(code: "upload_failed", message: "the server answered 503", retryable: true)
        due.retryAt = Timestamp.now() - 60
        var notDue = due
        notDue.id = id(4)
        notDue.retryAt = Timestamp.now() + 3600
        return [first, resumed, due, notDue]
    }

    /// `job` after `event` as the engine decides it (`JobLifecycle`), with what the engine's own code for the event
    /// changes besides (a retry that came due has no due time any more).
    private static func expected(_ job: JobRecord, _ event: JobEvent) -> JobRecord {
        var job = job
        var lifecycle = job.lifecycle
        #expect(lifecycle.handle(event) != nil)
        job.adopt(lifecycle)
        if case .retryDue = event { job.retryAt = nil }
        return job
    }

    /// The fields a transition decides: state, attempt, whether the next start resumes it, the last stop's reason
    /// and detail, the error, the due time (to the second: the shared store keeps it on the database's clock).
    private static func decided(_ job: JobRecord) -> String {
        let due = job.retryAt.map { "\(Int($0.rounded()))" } ?? "none"
        return "\(job.state.rawValue) attempt \(job.attempt) resumes \(job.resumesAttempt) "
            + "stop \(job.cancellation.map { "\($0.reason.rawValue): \($0.detail)" } ?? "none") "
            + "error \(job.error.map { "\($0.code): \($0.message)" } ?? "none") due \(due)"
    }

    @Test func rescueAndDueRetriesInSQLAgreeWithJobLifecycle() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let connection = try PostgresConnectionString(server.socketConnectionString)
        let cases = Self.cases()
        let (rescued, queuedAgain, notDue) = try await onLoop { () -> ([JobRecord], [JobRecord], JobRecord?) in
            let store = try PostgresJobStore(connectionString: connection, options: SharedStoreOptions())
            var jobs = cases.map { job -> JobRecord in
                var queued = job
                queued.state = .queued
                return queued
            }
            try store.insert(&jobs, digests: jobs.map { _ in nil }, duplicateKeys: jobs.map { _ in [] })
            for job in cases {
                // Written as waiting (no lease needed), then the runs made a dead daemon's, its lease expired.
                var waiting = job
                if job.state == .running { waiting.state = .needsRetry }
                try store.update(waiting, addingCleanUp: false)
                if job.state == .running {
                    _ = try store.rows(
                        """
                        UPDATE trailbook_jobs SET state = 'running', lease_host = 'gone', lease_daemon = 'gone',
                            lease_token = nextval('trailbook_lease_tokens'), retry_at = NULL,
                            lease_expires_at = clock_timestamp() - interval '5 seconds'
                        WHERE id = $1
                        """, [.text(job.id)])
                }
            }
            let found = await withCheckedContinuation { continuation in
                store.maintainLeases { continuation.resume(returning: ($0.rescued, $0.queuedAgain)) }
            }
            return (found.0, found.1, try store.job(id: cases[3].id))
        }
        #expect(rescued.map(\.id) == [cases[0].id, cases[1].id])
        #expect(queuedAgain.map(\.id) == [cases[2].id])
        for (job, stored) in zip(cases[0...1], rescued) {
            #expect(Self.decided(stored) == Self.decided(Self.expected(job, .recoverAfterCrash)), "\(job.id)")
        }
        for (job, stored) in zip(cases[2...2], queuedAgain) {
            #expect(Self.decided(stored) == Self.decided(Self.expected(job, .retryDue)), "\(job.id)")
        }
        #expect(notDue.map(Self.decided) == Self.decided(cases[3]))
    }

    /// The SQLite store's rescue is the daemon's start after a crash (`requeueRunsLeftByACrash`), which applies
    /// `JobLifecycle` itself: the same cases come out as on the shared store. (Its due retries go through
    /// `Scheduler.retryDue`, `JobLifecycle`'s `.retryDue` too.)
    @Test func aRestartOnSQLiteRequeuesRunsAsTheSharedStoresRescueDoes() async throws {
        let path = JobStoreTests().temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let cases = Self.cases()
        let after = try await onLoop { () -> [JobRecord] in
            let store = try JobStore(path: path)
            for job in cases {
                var stored = job
                stored.state = .queued
                try store.insert(&stored)
                try store.update(job, addingCleanUp: false)
            }
            let scheduler = Scheduler(store: store, feed: ProgressFeed(firstSeq: 1), options: SchedulerOptions())
            try scheduler.requeueRunsLeftByACrash()
            return try cases.map { try #require(try store.job(id: $0.id)) }
        }
        for (job, stored) in zip(cases[0...1], after) {
            #expect(Self.decided(stored) == Self.decided(Self.expected(job, .recoverAfterCrash)), "\(job.id)")
        }
    }

    /// A daemon starting on a shared store with retries waiting (another daemon's, due in an hour) arms no retry
    /// timer: the heartbeat puts due retries back in the queue for every daemon. It used to arm one per waiting
    /// retry, each a round trip when due, repeating the heartbeat's work on every daemon. On SQLite each gets one.
    @Test func aDaemonOnASharedStoreLeavesWaitingRetriesToTheHeartbeat() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let connection = try PostgresConnectionString(server.socketConnectionString)
        let path = JobStoreTests().temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (shared, local) = try await onLoop { () -> (Int, Int) in
            var armed: [Int] = []
            let stores: [any JobStoring] = [
                try PostgresJobStore(connectionString: connection, options: SharedStoreOptions()), try JobStore(path: path),
            ]
            for store in stores {
                var jobs = (10..<15).map { JobStoreTests().makeJob(Self.id($0)) }
                try store.insert(&jobs, digests: jobs.map { _ in nil }, duplicateKeys: jobs.map { _ in [] })
                for var job in jobs {
                    job.state = .needsRetry
                    job.attempt = 1
                    job.retryAt = Timestamp.now() + 3600
                    try store.update(job, addingCleanUp: false)
                }
                let scheduler = Scheduler(store: store, feed: ProgressFeed(firstSeq: 1), options: SchedulerOptions())
                try scheduler.start()
                armed.append(scheduler.retries.count)
                await scheduler.shutdown()
            }
            return (armed[0], armed[1])
        }
        #expect(shared == 0)
        #expect(local == 5)
    }
}
