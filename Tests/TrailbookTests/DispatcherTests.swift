import Foundation
import TestSupport
import Testing
import TrailbookLoop
import TrailbookPostgres

@testable import TrailbookEngine

/// The dispatcher a scheduler chooses from its store (`Dispatcher`) and the policy answers that differ between a
/// daemon alone on SQLite and daemons sharing PostgreSQL.
struct DispatcherTests {
    @Test func aSQLiteStoreDispatchesLocallyAndItsKeptWritesAreTheJobsState() async throws {
        let path = JobStoreTests().temporaryPath()
        try await onLoop {
            let dispatcher = Dispatcher(store: try JobStore(path: path))
            guard case .local = dispatcher else {
                Issue.record("a SQLite store is not shared: \(dispatcher)")
                return
            }
            #expect(!dispatcher.isShared)
            #expect(dispatcher.keptWriteIsTheJobsState, "announced at once; a cancel kept is a cancel")
            #expect(!dispatcher.capsGroups)
            #expect(dispatcher.looksForWork(afterGroupEndingRuns: false), "a local look is a read, after every group")
            #expect(dispatcher.recoversStoredJobsAtStart)
            #expect(!dispatcher.sendsProgressWithoutWaiting)
            #expect(!dispatcher.acceptsQueues)
            #expect(dispatcher.pinningHost == nil)
            #expect(dispatcher.takeClaimedCheckpoint(of: "any") == nil)
        }
    }

    @Test func aSharedStoreDispatchesByClaimsAndLooksForWorkOnlyWhenASlotFreedOrAClaimWaits() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let connection = try PostgresConnectionString(server.socketConnectionString)
        let store = try PostgresJobStore(
            connectionString: connection, options: SharedStoreOptions(leaseSeconds: 9, host: "host-a"),
            daemonID: "daemon-a")
        nonisolated(unsafe) let shared = store
        try await onLoop {
            let dispatcher = Dispatcher(store: shared)
            guard case .claiming(let claiming) = dispatcher else {
                Issue.record("a PostgreSQL store is shared: \(dispatcher)")
                return
            }
            #expect(dispatcher.isShared)
            #expect(!dispatcher.keptWriteIsTheJobsState, "another daemon may change the job before the retry")
            #expect(dispatcher.capsGroups)
            #expect(!dispatcher.recoversStoredJobsAtStart, "the heartbeat rescues and queues due retries")
            #expect(dispatcher.sendsProgressWithoutWaiting)
            #expect(dispatcher.acceptsQueues)
            #expect(dispatcher.pinningHost == "host-a")
            #expect(claiming.heartbeatMilliseconds == 3_000, "a third of the 9 s lease")
            // After a group: a claim only when its ends freed slots, or a claim was put off for it.
            #expect(dispatcher.looksForWork(afterGroupEndingRuns: true))
            #expect(!dispatcher.looksForWork(afterGroupEndingRuns: false))
            #expect(claiming.claims.ask(groupInFlight: true) == .wait)
            #expect(claiming.claims.isPutOff)
            #expect(dispatcher.looksForWork(afterGroupEndingRuns: false))
        }
    }

    @Test func aClaimedCheckpointIsTakenOnceOrForgotten() async throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let connection = try PostgresConnectionString(server.socketConnectionString)
        nonisolated(unsafe) let shared = try PostgresJobStore(
            connectionString: connection, options: SharedStoreOptions(), daemonID: "daemon-a")
        try await onLoop {
            let dispatcher = Dispatcher(store: shared)
            guard case .claiming(let claiming) = dispatcher else {
                Issue.record("a PostgreSQL store is shared")
                return
            }
            var job = JobStoreTests().makeJob("0c000000-0000-4000-8000-000000000001", state: .running)
            claiming.claims.remember(ClaimedRun(job: job, checkpoint: ["done": 3]))
            #expect(dispatcher.takeClaimedCheckpoint(of: job.id) == .some(.some(["done": 3])))
            #expect(dispatcher.takeClaimedCheckpoint(of: job.id) == nil, "taken once: the store has it after")
            job.id = "0c000000-0000-4000-8000-000000000002"
            claiming.claims.remember(ClaimedRun(job: job, checkpoint: nil))
            dispatcher.forgetClaimedCheckpoint(of: job.id)
            #expect(dispatcher.takeClaimedCheckpoint(of: job.id) == nil)
        }
    }
}
