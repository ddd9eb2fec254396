import Foundation
import Synchronization
import TestSupport
import Testing

@testable import TrailbookEngine

/// The request queue of the shared store's connection (`PostgresStoreActor`): writes made without waiting start in
/// the order they were made, a bounded number at once, and a job's newer checkpoint replaces its older one.
@Suite(.serialized) struct PostgresStoreActorTests {
    /// What the requests saw, shared with the test's thread.
    final class Record: Sendable {
        struct State {
            var started: [Int] = []
            var finished = 0
            var inFlight = 0
            var mostInFlight = 0
            var gates: [CheckedContinuation<Void, Never>] = []
        }
        let state = Mutex(State())

        /// A request that first passes through `hops` isolated async calls on the actor (as a real request does
        /// through the queue's and the connection's functions) before it records its start.
        func request(_ index: Int, hops: Int = 0) -> PostgresStoreActor.Request {
            { actor in
                for _ in 0..<hops { await actor.isolatedStep() }
                self.state.withLock {
                    $0.started.append(index)
                    $0.inFlight += 1
                    $0.mostInFlight = max($0.mostInFlight, $0.inFlight)
                }
                // Held until the test lets it go: a round trip that takes as long as the test likes.
                await withCheckedContinuation { gate in self.state.withLock { $0.gates.append(gate) } }
                self.state.withLock {
                    $0.inFlight -= 1
                    $0.finished += 1
                }
            }
        }

        func waitUntil(_ condition: (State) -> Bool) throws {
            let deadline = Date().addingTimeInterval(10)
            while !state.withLock({ condition($0) }) {
                guard Date() < deadline else { throw HarnessFailure("timed out: \(state.withLock { $0.started.count }) started") }
                usleep(1_000)
            }
        }

        func releaseAll() {
            for gate in state.withLock({ state -> [CheckedContinuation<Void, Never>] in
                defer { state.gates.removeAll() }
                return state.gates
            }) {
                gate.resume()
            }
        }
    }

    struct HarnessFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    @Test func requestsStartInTheOrderMadeAtMostMaxInFlightAtOnceAndANewerOneReplacesAWaitingOneOfItsKey() throws {
        let thread = LoopThread()
        defer { _ = thread.finish() }
        let actor = PostgresStoreActor(loop: thread.loop)
        let record = Record()
        let count = PostgresStoreActor.maxInFlight + 36
        // Requests that reach their first suspension through different numbers of isolated calls still start in
        // order: each runs on the store's loop, FIFO, up to there.
        for index in 0..<count { actor.submit(record.request(index, hops: index % 5)) }
        try record.waitUntil { $0.started.count == PostgresStoreActor.maxInFlight }
        usleep(50_000)
        #expect(record.state.withLock { $0.started } == Array(0..<PostgresStoreActor.maxInFlight))
        // Two checkpoints of one job while it waits behind the rest: only the newer is sent, last.
        actor.submit(record.request(1_000), coalescing: "checkpoint job")
        actor.submit(record.request(1_001), coalescing: "checkpoint job")
        actor.submit(record.request(1_002), coalescing: "checkpoint other")
        while record.state.withLock({ $0.finished }) < count + 2 {
            record.releaseAll()
            usleep(1_000)
        }
        let state = record.state.withLock { $0 }
        #expect(state.started == Array(0..<count) + [1_001, 1_002])
        #expect(state.mostInFlight == PostgresStoreActor.maxInFlight)
    }

    /// A group commit (`ahead`: the jobs it writes) passes the waiting checkpoints and progress of other jobs, but
    /// not those of its own jobs (a job's end lands after its last checkpoint) nor any request without a key (a
    /// lease tick, a read, another group).
    @Test func aRequestAheadPassesOtherJobsCoalescedWritesButNotItsOwnNorUnkeyedOnes() throws {
        let thread = LoopThread()
        defer { _ = thread.finish() }
        let actor = PostgresStoreActor(loop: thread.loop)
        let record = Record()
        // Every slot taken, so what follows waits in order.
        for index in 0..<PostgresStoreActor.maxInFlight { actor.submit(record.request(index)) }
        try record.waitUntil { $0.started.count == PostgresStoreActor.maxInFlight }
        actor.submit(record.request(100), coalescing: "checkpoint a", job: "a")
        actor.submit(record.request(101))  // unkeyed: a lease tick
        actor.submit(record.request(102), coalescing: "checkpoint d", job: "d")
        actor.submit(record.request(103), coalescing: "checkpoint b", job: "b")
        actor.submit(record.request(104), coalescing: "progress c", job: "c")
        actor.submit(record.request(105), coalescing: "progress e", job: "e")
        // The end of job d: ahead of b's, c's and e's writes, behind the tick and d's own checkpoint.
        actor.submit(record.request(200), ahead: ["d"])
        // A claim (no job of its own): ahead of b's, c's and e's writes too, behind the group.
        actor.submit(record.request(201), ahead: [])
        let total = PostgresStoreActor.maxInFlight + 8
        while record.state.withLock({ $0.finished }) < total {
            record.releaseAll()
            usleep(1_000)
        }
        let started = Array(record.state.withLock { $0.started }.dropFirst(PostgresStoreActor.maxInFlight))
        #expect(started == [100, 101, 102, 200, 201, 103, 104, 105], "\(started)")
    }
}

extension PostgresStoreActor {
    /// An isolated call that does nothing (a step a request takes before it sends anything).
    func isolatedStep() async {}
}
