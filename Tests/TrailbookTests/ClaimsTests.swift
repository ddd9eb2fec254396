import Testing
import TrailbookLoop

@testable import TrailbookEngine

/// `Claims`' transitions, without a store: one claim in flight at a time, a claim asked for meanwhile claims again,
/// a group in flight puts a claim off, and what held claims and remembered checkpoints keep.
@Suite("Claims")
struct ClaimsTests {
    private static func run(_ id: String, checkpoint: JSONValue?) -> ClaimedRun {
        ClaimedRun(
            job: JobRecord(
                id: id, kind: "upload", state: .running,
                options: JobOptions(priority: 0, timeoutSeconds: 60, stallTimeoutSeconds: 10, maxAttempts: 3),
                attempt: 1, progress: JobProgress(total: 100, unit: .bytes), cancellation: nil, error: nil,
                createdAt: "", updatedAt: "", params: [:], result: .null, retryAt: nil, sequence: 0),
            checkpoint: checkpoint)
    }

    @Test func oneClaimIsInFlightAndOneAskedMeanwhileClaimsAgain() async throws {
        try await onLoop {
            let claims = Claims()
            #expect(claims.isIdle)
            #expect(claims.answered() == nil, "an answer with no claim in flight is ignored")
            #expect(claims.ask(groupInFlight: false) == .send)
            #expect(claims.phase == .inFlight(again: false))
            #expect(claims.ask(groupInFlight: false) == .wait, "never two in flight")
            #expect(claims.ask(groupInFlight: true) == .wait)
            #expect(claims.phase == .inFlight(again: true), "asked meanwhile: its answer claims again")
            #expect(!claims.askAlone(groupInFlight: false), "a preempting claim waits for its turn")
            #expect(claims.answered() == true)
            #expect(claims.isIdle)
            #expect(claims.ask(groupInFlight: false) == .send)
            #expect(claims.answered() == false, "nothing asked meanwhile")
            #expect(claims.answered() == nil, "answered once")
        }
    }

    @Test func aGroupInFlightPutsAClaimOff() async throws {
        try await onLoop {
            let claims = Claims()
            #expect(claims.ask(groupInFlight: true) == .wait)
            #expect(claims.isPutOff)
            #expect(!claims.isIdle)
            #expect(!claims.askAlone(groupInFlight: false), "a put-off claim goes first, after the group")
            #expect(claims.answered() == nil, "nothing is in flight")
            #expect(claims.ask(groupInFlight: false) == .send, "the group's answer claims")
            #expect(!claims.isPutOff)
        }
    }

    @Test func aPreemptingClaimIsSentAloneOnly() async throws {
        try await onLoop {
            let claims = Claims()
            #expect(!claims.askAlone(groupInFlight: true))
            #expect(claims.isIdle, "not sent, nothing changed")
            #expect(claims.askAlone(groupInFlight: false))
            #expect(claims.phase == .inFlight(again: false))
            #expect(claims.ask(groupInFlight: false) == .wait)
            #expect(claims.answered() == true)
        }
    }

    @Test func settledWaitsForTheAnswerAndTheLaunches() async throws {
        try await onLoop {
            let claims = Claims()
            await claims.settled()  // none in flight: returns at once
            #expect(claims.ask(groupInFlight: false) == .send)
            let waiter = Task.onLoop {
                await claims.settled()
                return claims.phase
            }
            await Task.yield()
            #expect(claims.answered() == false)
            claims.resumeWaiters()
            #expect(await waiter.value == .none, "resumed once the claim was answered, never before")
        }
    }

    @Test func heldClaimsStartOldestFirstAndCheckpointsAreTakenOnce() async throws {
        try await onLoop {
            let claims = Claims()
            #expect(claims.takeHeld() == nil)
            claims.hold(Self.run("a", checkpoint: nil))
            claims.hold(Self.run("b", checkpoint: nil))
            #expect(claims.heldCount == 2)
            #expect(claims.takeHeld()?.job.id == "a")
            #expect(claims.takeHeld()?.job.id == "b")
            #expect(claims.heldCount == 0)

            claims.remember(Self.run("c", checkpoint: ["at": .number(7)]))
            claims.remember(Self.run("d", checkpoint: nil))
            #expect(claims.takeCheckpoint(of: "c") == .some(["at": .number(7)]))
            #expect(claims.takeCheckpoint(of: "c") == nil, "taken once: the store has anything newer")
            #expect(claims.takeCheckpoint(of: "d") == .some(nil), "claimed without a checkpoint: none to read")
            claims.remember(Self.run("e", checkpoint: ["at": .number(1)]))
            claims.forgetCheckpoint(of: "e")
            #expect(claims.takeCheckpoint(of: "e") == nil)
        }
    }
}
