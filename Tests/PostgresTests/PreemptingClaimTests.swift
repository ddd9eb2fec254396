import Foundation
import TestSupport
import Testing
import TrailbookLoop

@testable import TrailbookPostgres

/// The claim a full daemon sends to preempt one of its runs (`claim(outranking:)`): only jobs above the given
/// priority, through the claim index, and a job claimed by two daemons at once goes to one of them.
@Suite(.serialized)
struct PreemptingClaimTests {
    private static let a = PostgresJobQueue.Owner(host: "host-a", daemonID: "daemon-a")
    private static let b = PostgresJobQueue.Owner(host: "host-b", daemonID: "daemon-b")

    @Test func itTakesOnlyAJobAboveThePriorityGiven() async throws {
        try await withPostgresServer { server in
            let jobs = PostgresJobQueue(connection: try await connected(to: server))
            defer { jobs.connection.close() }
            try await jobs.migrate()
            _ = try await jobs.submit([
                .init(id: "low", kind: "sleep", priority: 0), .init(id: "five", kind: "sleep", priority: 5),
                .init(id: "gpu", kind: "sleep", priority: 9, queue: "gpu"),
                .init(id: "ten", kind: "sleep", priority: 10), .init(id: "ten-later", kind: "sleep", priority: 10),
            ])
            // Equal priorities never preempt: nothing above 10 waits.
            #expect(try await jobs.claim(owner: Self.a, limit: 1, leaseSeconds: 30, outranking: 10).isEmpty)
            // Above 5: the first job of priority 10 of the served queue, not the `gpu` one.
            let first = try await jobs.claim(owner: Self.a, limit: 1, leaseSeconds: 30, outranking: 5)
            #expect(first.map(\.id) == ["ten"])
            let otherKind = try await jobs.claim(
                owner: Self.a, kinds: ["upload"], limit: 1, leaseSeconds: 30, outranking: 0)
            #expect(otherKind.isEmpty)
            let next = try await jobs.claim(
                owner: Self.a, limit: 1, leaseSeconds: 30, excluding: ["ten-later"], outranking: 0)
            #expect(next.map(\.id) == ["five"])
            // The statement, unlike the ordinary claim's, reads the claim index with the priority in its condition.
            let claim = PostgresJobQueue.claimStatement(
                owner: Self.a, queues: ["default"], kinds: nil, limit: 1, leaseSeconds: 30, excluding: [],
                outranking: 3, alsoReturning: [])
            let plain = PostgresJobQueue.claimStatement(
                owner: Self.a, queues: ["default"], kinds: nil, limit: 1, leaseSeconds: 30, excluding: [],
                alsoReturning: [])
            #expect(claim.sql.contains("priority > $8::integer") && !plain.sql.contains("$8"))
            _ = try await jobs.connection.pipeline([PostgresStatement("SET enable_seqscan = off")])
            let explained = PostgresStatement("EXPLAIN " + claim.sql, claim.parameters)
            let plan = try await jobs.connection.pipeline([explained])[0].rows.compactMap { $0.text(0) }
                .joined(separator: "\n")
            #expect(plan.contains("Index Scan using trailbook_jobs_claim"), "\(plan)")
            #expect(plan.contains("priority > "), "\(plan)")
        }
    }

    @Test func twoDaemonsClaimingOneHighJobAtOnceGetItOnce() async throws {
        try await withPostgresServer { server in
            let first = PostgresJobQueue(connection: try await connected(to: server))
            let second = PostgresJobQueue(connection: try await connected(to: server))
            defer {
                first.connection.close()
                second.connection.close()
            }
            try await first.migrate()
            for round in 0..<20 {
                _ = try await first.submit([.init(id: "high-\(round)", kind: "sleep", priority: 10)])
                // Both on the loop, sent together: their statements run at once on two server backends.
                let byA = Task { @LoopActor in
                    try await first.claim(owner: Self.a, limit: 1, leaseSeconds: 30, outranking: 0)
                }
                let byB = Task { @LoopActor in
                    try await second.claim(owner: Self.b, limit: 1, leaseSeconds: 30, outranking: 0)
                }
                let (takenByA, takenByB) = try await (byA.value, byB.value)
                #expect((takenByA + takenByB).map(\.id) == ["high-\(round)"], "round \(round)")
            }
        }
    }
}
