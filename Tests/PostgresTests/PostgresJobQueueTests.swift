import Foundation
import Testing
import TestSupport
import TrailbookLoop
import TrailbookPostgres

/// A migrated queue on its own connection to `server`.
@LoopActor
private func queue(on server: PostgresServer) async throws -> PostgresJobQueue {
    let queue = PostgresJobQueue(connection: try await connected(to: server))
    try await queue.migrate()
    return queue
}

/// Two migrated queues on their own connections (two daemons), closed after `body`.
@LoopActor
private func twoQueues(
    on server: PostgresServer, _ body: @LoopActor (PostgresJobQueue, PostgresJobQueue) async throws -> Void
) async throws {
    let first = try await queue(on: server)
    let second = try await queue(on: server)
    defer {
        first.connection.close()
        second.connection.close()
    }
    try await body(first, second)
}

private let hostA = PostgresJobQueue.Owner(host: "host-a", daemonID: "daemon-a")
private let hostB = PostgresJobQueue.Owner(host: "host-b", daemonID: "daemon-b")

/// Claims batches of 7 for `owner` until none is left; the ids taken.
@LoopActor
private func drain(_ jobs: PostgresJobQueue, _ owner: PostgresJobQueue.Owner) async throws -> [String] {
    var taken: [String] = []
    while true {
        let batch = try await jobs.claim(owner: owner, limit: 7, leaseSeconds: 30)
        if batch.isEmpty { return taken }
        taken += batch.map(\.id)
    }
}

@Suite(.serialized)
struct PostgresJobQueueTests {
    @Test func twoDaemonsStartingTogetherMigrateOnce() async throws {
        try await withPostgresServer { server in
            let first = PostgresJobQueue(connection: try await connected(to: server))
            let second = PostgresJobQueue(connection: try await connected(to: server))
            defer {
                first.connection.close()
                second.connection.close()
            }
            let a = Task { @LoopActor in try await first.migrate() }
            let b = Task { @LoopActor in try await second.migrate() }
            let applied = try await [a.value, b.value].sorted()
            #expect(applied == [0, PostgresJobQueue.migrationCount])
            let versions = try await first.connection.query("SELECT version FROM trailbook_schema ORDER BY version")
            #expect(versions.rows.map { $0.int(0) } == (1...PostgresJobQueue.migrationCount).map { Int64($0) })
            #expect(try await second.migrate() == 0)
        }
    }

    @Test func aSchemaNewerThanTheBuildIsRefused() async throws {
        try await withPostgresServer { server in
            let jobs = try await queue(on: server)
            defer { jobs.connection.close() }
            _ = try await jobs.connection.query("INSERT INTO trailbook_schema VALUES (99, now())")
            await #expect {
                try await jobs.migrate()
            } throws: { ($0 as? PostgresError)?.sqlState == "TB001" }
            // The refused migration's transaction was rolled back: the connection is usable, nothing changed.
            #expect(try await jobs.connection.query("SELECT max(version) FROM trailbook_schema").rows.first?.int(0) == 99)
        }
    }

    @Test func claimTakesPriorityThenSubmissionOrderUnderTheLimit() async throws {
        try await withPostgresServer { server in
            let jobs = try await queue(on: server)
            defer { jobs.connection.close() }
            let sequences = try await jobs.submit([
                .init(id: "low-1", kind: "sleep", priority: 0), .init(id: "high-1", kind: "sleep", priority: 5),
                .init(id: "low-2", kind: "sleep", priority: 0), .init(id: "high-2", kind: "sleep", priority: 5),
                .init(id: "mid", kind: "sleep", priority: 1),
            ])
            #expect(sequences == sequences.sorted() && Set(sequences).count == 5)
            // A job the daemon still runs (its old run stopping after a lost lease) is passed over.
            let mid = try await jobs.claim(owner: hostA, limit: 1, leaseSeconds: 30, excluding: ["high-1", "high-2"])
            #expect(mid.map(\.id) == ["mid"])
            let first = try await jobs.claim(owner: hostA, limit: 2, leaseSeconds: 30)
            #expect(first.map(\.id) == ["high-1", "high-2"])
            #expect(first.allSatisfy { $0.attempt == 1 })
            let rest = try await jobs.claim(owner: hostA, limit: 10, leaseSeconds: 30)
            #expect(rest.map(\.id) == ["low-1", "low-2"])
            #expect(try await jobs.claim(owner: hostA, limit: 10, leaseSeconds: 30).isEmpty)
            let snapshot = try #require(try await jobs.snapshot(id: "mid"))
            #expect(snapshot.state == "running" && snapshot.leaseDaemon == "daemon-a")
            // Tokens are unique.
            #expect(Set((mid + first + rest).map(\.lease.token)).count == 5)
        }
    }

    @Test func claimRespectsTheHostPinAndTheQueueLabel() async throws {
        try await withPostgresServer { server in
            let jobs = try await queue(on: server)
            defer { jobs.connection.close() }
            _ = try await jobs.submit([
                .init(id: "upload-on-b", kind: "upload", pinnedHost: "host-b"),
                .init(id: "photos-anywhere", kind: "tag", queue: "photos"),
                .init(id: "sleep-anywhere", kind: "sleep"),
                .init(id: "photos-on-b", kind: "tag", queue: "photos", pinnedHost: "host-b"),
            ])
            let aDefault = try await jobs.claim(owner: hostA, limit: 10, leaseSeconds: 30)
            #expect(aDefault.map(\.id) == ["sleep-anywhere"])
            let aPhotos = try await jobs.claim(owner: hostA, queues: ["photos"], limit: 10, leaseSeconds: 30)
            #expect(aPhotos.map(\.id) == ["photos-anywhere"])
            let b = try await jobs.claim(owner: hostB, queues: ["default", "photos"], limit: 10, leaseSeconds: 30)
            #expect(b.map(\.id) == ["upload-on-b", "photos-on-b"])
        }
    }

    @Test func twoConnectionsClaimingConcurrentlyNeverTakeTheSameJob() async throws {
        try await withPostgresServer { server in try await twoQueues(on: server) { a, b in
            let count = 500
            _ = try await a.submit((0..<count).map { .init(id: String(format: "job-%04d", $0), kind: "sleep") })
            // Both claim in small batches at once: their statements run concurrently on two server backends.
            let takenByA = Task { @LoopActor in try await drain(a, hostA) }
            let takenByB = Task { @LoopActor in try await drain(b, hostB) }
            let (fromA, fromB) = try await (takenByA.value, takenByB.value)
            #expect(fromA.count + fromB.count == count)
            #expect(Set(fromA).isDisjoint(with: Set(fromB)))
            #expect(Set(fromA + fromB).count == count)
            #expect(!fromA.isEmpty && !fromB.isEmpty)
            let owners = try await a.connection.query(
                "SELECT lease_daemon, count(*) FROM trailbook_jobs WHERE state = 'running' GROUP BY 1 ORDER BY 1")
            #expect(owners.rows.map(\.values) == [["daemon-a", String(fromA.count)], ["daemon-b", String(fromB.count)]])
        } }
    }

    @Test func anExpiredLeaseIsRescuedWithTheSameAttempt() async throws {
        try await withPostgresServer { server in
            let jobs = try await queue(on: server)
            defer { jobs.connection.close() }
            _ = try await jobs.submit([.init(id: "dies", kind: "sleep"), .init(id: "lives", kind: "sleep")])
            // A lease that is already over (as after its daemon's kill -9), and one that is not.
            let dying = try #require(try await jobs.claim(owner: hostA, limit: 1, leaseSeconds: -1).first)
            let living = try #require(try await jobs.claim(owner: hostA, limit: 1, leaseSeconds: 60).first)
            #expect(dying.id == "dies" && living.id == "lives")
            #expect(try await jobs.saveCheckpoint(dying.lease, checkpoint: #"{"offset":4096}"#, progress: #"{"done":4096}"#))

            #expect(try await jobs.rescueExpiredLeases() == ["dies"])
            #expect(try await jobs.rescueExpiredLeases() == [])
            let rescued = try #require(try await jobs.snapshot(id: "dies"))
            #expect(rescued.state == "queued" && rescued.attempt == 1 && rescued.resumesAttempt)
            #expect(rescued.leaseToken == nil && rescued.leaseDaemon == nil)
            #expect(try await jobs.snapshot(id: "lives")?.state == "running")

            // Another daemon takes it up: same attempt, from the checkpoint, under a new token.
            let again = try #require(try await jobs.claim(owner: hostB, limit: 5, leaseSeconds: 60).first)
            #expect(again.id == "dies" && again.attempt == 1)
            #expect(again.checkpoint == #"{"offset":4096}"#)
            #expect(again.lease.token > dying.lease.token)
            #expect(try await jobs.snapshot(id: "dies")?.resumesAttempt == false)
        }
    }

    @Test func progressRenewsTheLeaseAndKeepsTheJobFromRescue() async throws {
        try await withPostgresServer { server in
            let jobs = try await queue(on: server)
            defer { jobs.connection.close() }
            _ = try await jobs.submit([.init(id: "busy", kind: "upload"), .init(id: "quiet", kind: "upload")])
            let claimed = try await jobs.claim(owner: hostA, limit: 2, leaseSeconds: 0.3)
            #expect(claimed.count == 2)
            let busy = try #require(claimed.first { $0.id == "busy" })
            let renewed = try await jobs.renew([.init(lease: busy.lease, progress: #"{"done":10}"#)], leaseSeconds: 60)
            let lease = try #require(renewed.first ?? nil)
            #expect(lease.token == busy.lease.token)
            #expect(lease.expiresAt > busy.lease.expiresAt + 50)
            // Wait out the short lease on the database's clock, not this process's.
            _ = try await jobs.connection.query("SELECT pg_sleep(0.4)")
            #expect(try await jobs.rescueExpiredLeases() == ["quiet"])
            let snapshot = try #require(try await jobs.snapshot(id: "busy"))
            #expect(snapshot.state == "running" && snapshot.progress == #"{"done":10}"#)
        }
    }

    @Test func aStaleLeaseTokenCannotRenewCheckpointOrEndTheJob() async throws {
        try await withPostgresServer { server in try await twoQueues(on: server) { a, b in
            _ = try await a.submit([.init(id: "contested", kind: "sleep", maxAttempts: 3)])
            let stale = try #require(try await a.claim(owner: hostA, limit: 1, leaseSeconds: -1).first)
            #expect(try await b.rescueExpiredLeases() == ["contested"])
            let current = try #require(try await b.claim(owner: hostB, limit: 1, leaseSeconds: 60).first)

            // Daemon A comes back from a network cut and tries to carry on: every write is refused.
            #expect(try await a.renew([.init(lease: stale.lease, progress: #"{"done":1}"#)], leaseSeconds: 60) == [nil])
            #expect(try await a.saveCheckpoint(stale.lease, checkpoint: "{}", progress: "{}") == false)
            let staleEnd = PostgresJobQueue.RunEnd(state: "failed", attempt: 1, error: #"{"code":"x"}"#)
            #expect(try await a.endRun(stale.lease, staleEnd) == false)
            let during = try #require(try await b.snapshot(id: "contested"))
            #expect(during.state == "running" && during.leaseDaemon == "daemon-b" && during.leaseToken == current.lease.token)

            // The holder's end is written once; a second end with the same (now released) token is refused too.
            let end = PostgresJobQueue.RunEnd(state: "succeeded", attempt: 1, result: #"{"slept":1}"#)
            #expect(try await b.endRun(current.lease, end))
            #expect(try await b.endRun(current.lease, end) == false)
            let after = try #require(try await b.snapshot(id: "contested"))
            #expect(after.state == "succeeded" && after.leaseToken == nil && after.attempt == 1)
            let stored = try await a.connection.query("SELECT result, error FROM trailbook_jobs WHERE id = 'contested'")
            #expect(stored.rows.first?.values == [#"{"slept":1}"#, nil])
        } }
    }

    @Test func aSubmitNotifiesListeningDaemonsAtCommitOnly() async throws {
        try await withPostgresServer { server in try await twoQueues(on: server) { listener, submitter in
            var payloads: [String] = []
            listener.connection.onNotification = { payloads.append($0.payload) }
            try await listener.connection.listen(PostgresJobQueue.jobsChannel)
            // A failed batch (duplicate id) commits nothing and notifies nobody.
            await #expect(throws: PostgresError.self) {
                _ = try await submitter.submit([.init(id: "dup", kind: "sleep"), .init(id: "dup", kind: "sleep")])
            }
            _ = try await submitter.submit([
                .init(id: "one", kind: "sleep"), .init(id: "two", kind: "tag", queue: "photos"),
                .init(id: "three", kind: "sleep"),
            ])
            #expect(await eventually(within: 5) { payloads.count >= 2 })
            _ = try await listener.connection.query("SELECT 1")  // anything still on its way has arrived by now
            #expect(payloads == ["queue default", "queue photos"])
            #expect(try await listener.connection.query("SELECT count(*) FROM trailbook_jobs").rows.first?.int(0) == 3)
        } }
    }

    @Test func dueRetriesAreQueuedAgain() async throws {
        try await withPostgresServer { server in
            let jobs = try await queue(on: server)
            defer { jobs.connection.close() }
            _ = try await jobs.submit([.init(id: "flaky", kind: "sleep", maxAttempts: 3), .init(id: "later", kind: "sleep", maxAttempts: 3)])
            let claimed = try await jobs.claim(owner: hostA, limit: 2, leaseSeconds: 60)
            let now = Date().timeIntervalSince1970
            for job in claimed {
                let retryAt = job.id == "flaky" ? now - 1 : now + 3600
                #expect(try await jobs.endRun(job.lease, .init(state: "needs_retry", attempt: 1, retryAt: retryAt)))
            }
            #expect(try await jobs.queueDueRetries().count == 1)
            let next = try await jobs.claim(owner: hostA, limit: 5, leaseSeconds: 60)
            #expect(next.map(\.id) == ["flaky"])
            #expect(next.first?.attempt == 2)
        }
    }
}
