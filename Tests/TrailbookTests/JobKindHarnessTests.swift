import SleepJob
import Synchronization
import Testing
import TrailbookEngine
import TrailbookJobsTesting
import TrailbookLoop

/// The `sleep` kind and a kind of the test's own, run by `TrailbookJobsTesting`'s harness: no daemon, no store,
/// only the public API (no `@testable`).
@Suite struct JobKindHarnessTests {
    @Test func sleepJobResumesAfterATimeoutFromItsCheckpoint() async throws {
        let harness = JobKindHarness(SleepJob(), params: SleepJob.Params(units: 6, unitMilliseconds: 1))
        let first = await harness.runAttempt(stoppingAt: .progress(atLeast: 3), reason: .timeout)
        #expect(first.stopReason == .timeout)
        #expect(first.onCancelReason == .timeout)
        #expect(first.state == .needsRetry)
        #expect(await harness.checkpoint?["done"]?.intValue == 3)

        let second = await harness.runAttempt()
        #expect(second.number == 2)
        #expect(second.state == .succeeded)
        #expect(second.output?["resumed_at"]?.intValue == 3)
        #expect(second.output?["units"]?.intValue == 6)
        let completed = await harness.progressReports.map(\.completed)
        #expect(completed == [0, 1, 2, 3, 3, 4, 5, 6])
        #expect(await harness.jobEndedCalled)
    }

    @Test func userStopCancelsForGoodAndResourceReclaimKeepsTheAttempt() async throws {
        let reclaimed = JobKindHarness(SleepJob(), params: SleepJob.Params(units: 4, unitMilliseconds: 1))
        let cut = await reclaimed.runAttempt(stoppingAt: .checkpointSave(2), reason: .resourceReclaim)
        #expect(cut.state == .queued)
        let resumed = await reclaimed.runAttempt(stoppingAt: .checkpointSave(1), reason: .userStop)
        #expect(resumed.number == 1)  // a reclaimed run does not use up its attempt
        #expect(resumed.state == .cancelled)
        #expect(resumed.onCancelReason == .userStop)
        #expect(await reclaimed.checkpoint?["done"]?.intValue == 3)
        #expect(await reclaimed.jobEndedCalled)
    }

    @Test func taskCancellationInsideRunSeesTheStopAndItsReason() async throws {
        let harness = JobKindHarness(CancellableCounter(), params: CancellableCounter.Params(count: 1_000))
        let attempt = await harness.runAttempt(stoppingAt: .log(containing: "step 5"), reason: .userStop)
        #expect(attempt.stopReason == .userStop)
        #expect(attempt.state == .cancelled)
        #expect(attempt.cleanUps == [.done])
        let logs = await harness.logs.map(\.message)
        #expect(logs.contains("cancellation handler ran for user_stop"))
        #expect(logs.contains("Task.checkCancellation threw for user_stop"))
        #expect(logs.contains("onCancel user_stop"))
        #expect(logs.contains("cleanUp after cancelled"))
        #expect(await harness.progressReports.last?.unit.rawValue == "steps")
    }

    @Test func typedOutputAndTypedCheckpointRoundTrip() async throws {
        let harness = JobKindHarness(CancellableCounter(), params: CancellableCounter.Params(count: 3))
        let attempt = await harness.runAttempt()
        #expect(attempt.output == CancellableCounter.Output(steps: 3, resumedFrom: 0))
        #expect(try await harness.checkpoint(as: CancellableCounter.Checkpoint.self)?.done == 3)
    }

    @Test func progressUnitNamesAreChecked() {
        #expect(ProgressUnit(rawValue: "thumbnails")?.rawValue == "thumbnails")
        #expect(ProgressUnit(rawValue: "") == nil)
        #expect(ProgressUnit(rawValue: "Bytes") == nil)
        #expect(ProgressUnit(rawValue: "two words") == nil)
        #expect(ProgressUnit(rawValue: String(repeating: "a", count: 33)) == nil)
        #expect(ProgressUnit.bytes.rawValue == "bytes")
    }
}

/// Counts steps, yielding between them, and stops the Swift way: `Task.checkCancellation()` and a cancellation
/// handler, with `JobContext.stopReason` saying why.
struct CancellableCounter: JobKind {
    struct Params: Codable, Sendable { var count: Int64 }
    struct Checkpoint: Codable { var done: Int64 }
    struct Output: Codable, Sendable, Equatable {
        var steps: Int64
        var resumedFrom: Int64
    }

    static let name = "test.counter"

    nonisolated init() {}
    static let traits = JobKindTraits(
        unit: ProgressUnit("steps"), isLongRunning: true, executionTargets: [.daemonLoop], cleansUpAfterEnd: true)

    func run(_ params: Params, in job: JobContext) async throws -> Output {
        let start = try job.loadCheckpoint(as: Checkpoint.self)?.done ?? 0
        var done = start
        let handlerRan = Flag()
        do {
            try await withTaskCancellationHandler {
                while done < params.count {
                    await Task.yield()
                    try Task.checkCancellation()
                    done += 1
                    try job.saveCheckpoint(Checkpoint(done: done))
                    job.reportProgress(completed: done, total: params.count)
                    job.log(.info, "step \(done)")
                }
            } onCancel: {
                handlerRan.value.store(true, ordering: .releasing)
            }
        } catch is CancellationError {
            if handlerRan.value.load(ordering: .acquiring) {
                job.log(.info, "cancellation handler ran for \(job.stopReason?.rawValue ?? "nil")")
            }
            job.log(.info, "Task.checkCancellation threw for \(job.stopReason?.rawValue ?? "nil")")
            throw CancellationError()
        }
        return Output(steps: done, resumedFrom: start)
    }

    func onCancel(_ reason: CancellationReason, params: Params, in job: JobContext) async {
        job.log(.info, "onCancel \(reason.rawValue)")
    }

    func cleanUp(after state: JobState, params: Params, in job: JobContext) async -> CleanUpOutcome {
        job.log(.info, "cleanUp after \(state.rawValue)")
        return .done
    }
}

/// A flag a cancellation handler (any thread) sets.
final class Flag: Sendable {
    let value = Atomic<Bool>(false)
}
