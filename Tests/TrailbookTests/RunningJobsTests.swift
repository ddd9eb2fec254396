import Testing
import TrailbookLoop

@testable import TrailbookEngine

/// `RunningJobs`' transitions: a run holds a slot from `launched` to `ended`, a context reaches only its own run
/// (not a later run of the same job), and one clean-up try at a time per job.
@Suite("Running jobs")
struct RunningJobsTests {
    @LoopActor
    private static func run(_ id: String) -> Scheduler.RunningJob {
        let record = JobRecord(
            id: id, kind: CancellableCounter.name, state: .running,
            options: JobOptions(priority: 0, timeoutSeconds: 60, stallTimeoutSeconds: 10, maxAttempts: 3),
            attempt: 1, progress: JobProgress(total: 100, unit: .items), cancellation: nil, error: nil,
            createdAt: "", updatedAt: "", params: [:], result: .null, retryAt: nil, sequence: 0)
        let context = JobContext(
            id: id, kind: record.kind, attempt: 1, maxAttempts: 3, traits: CancellableCounter.traits,
            progress: record.progress)
        return Scheduler.RunningJob(record: record, context: context, kind: AnyJobKind(CancellableCounter()))
    }

    @Test func aRunHoldsASlotFromLaunchToEnd() async throws {
        try await onLoop {
            var running = RunningJobs()
            #expect(running.count == 0)
            let a = Self.run("a")
            running.launched(a)
            running.launched(Self.run("b"))
            #expect(running.count == 2)
            #expect(running["a"] === a)
            #expect(Set(running.values.map(\.record.id)) == ["a", "b"])
            running.ended("a")
            #expect(running["a"] == nil)
            #expect(running.count == 1)
            a.watchdog.close()
        }
    }

    @Test func aContextReachesOnlyItsOwnRun() async throws {
        try await onLoop {
            var running = RunningJobs()
            let first = Self.run("a")
            running.launched(first)
            #expect(running.run(of: first.context) === first)
            running.ended("a")
            #expect(running.run(of: first.context) == nil, "its run ended")
            let second = Self.run("a")
            running.launched(second)
            #expect(running.run(of: first.context) == nil, "a context of an earlier run of the job reaches nothing")
            #expect(running.run(of: second.context) === second)
            first.watchdog.close()
            second.watchdog.close()
        }
    }

    @Test func oneCleanUpTryAtATimePerJob() async throws {
        try await onLoop {
            var running = RunningJobs()
            #expect(!running.isCleaningUp("a"))
            let first = running.beginCleanUp("a")
            #expect(first)
            #expect(running.isCleaningUp("a"))
            let second = running.beginCleanUp("a")
            #expect(!second, "a second try waits for the first")
            let other = running.beginCleanUp("b")
            #expect(other, "another job's try is its own")
            running.endCleanUp("a")
            #expect(!running.isCleaningUp("a"))
            let again = running.beginCleanUp("a")
            #expect(again)
        }
    }
}
