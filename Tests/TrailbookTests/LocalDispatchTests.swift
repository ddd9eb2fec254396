import Testing

@testable import TrailbookEngine

/// The local dispatcher's preemption choice (`LocalDispatch`), without a store: when a full daemon alone on its
/// store preempts, and which run stops for which waiting job.
struct LocalDispatchTests {
    private func run(
        _ id: String, _ priority: Int, startedAt: Double = 0, stopping: Bool = false
    ) -> PreemptionChoice.Run {
        PreemptionChoice.Run(id: id, priority: priority, startedAt: startedAt, isStopping: stopping)
    }

    private func waiting(_ id: String, _ priority: Int) -> JobRecord {
        JobStoreTests().makeJob(id, priority: priority)
    }

    @Test func theFloorIsTheLowestRunNotStoppingOnceEverySlotIsTaken() {
        #expect(LocalDispatch.preemptionFloor(runs: [run("a", 3), run("b", 1)], concurrency: 2) == 1)
        #expect(LocalDispatch.preemptionFloor(runs: [run("a", 3)], concurrency: 2) == nil, "a slot is free")
        #expect(
            LocalDispatch.preemptionFloor(runs: [run("a", 3), run("b", 1, stopping: true)], concurrency: 2) == 3,
            "a run already stopping is not preempted again")
        #expect(
            LocalDispatch.preemptionFloor(
                runs: [run("a", 3, stopping: true), run("b", 1, stopping: true)], concurrency: 2) == nil)
    }

    @Test func eachWaitingJobAboveALowerRunStopsTheLowestNewestOne() {
        let runs = [run("old-low", 0, startedAt: 1), run("new-low", 0, startedAt: 2), run("high", 5, startedAt: 0)]
        let chosen = LocalDispatch.preemptions(runs: runs, waiting: [waiting("w1", 7), waiting("w2", 3)])
        #expect(
            chosen == [
                .init(run: "new-low", job: "w1", priority: 7), .init(run: "old-low", job: "w2", priority: 3),
            ])
    }

    @Test func equalPrioritiesNeverPreemptAndTheFirstJobNoRunIsBelowEndsTheChoice() {
        let runs = [run("a", 2), run("b", 4)]
        #expect(LocalDispatch.preemptions(runs: runs, waiting: [waiting("w", 2)]).isEmpty)
        // `w2` (priority 3) would outrank `a`, but the queue is in run order: a job at or below every run ends it.
        #expect(LocalDispatch.preemptions(runs: runs, waiting: [waiting("w1", 1), waiting("w2", 3)]).isEmpty)
        #expect(
            LocalDispatch.preemptions(runs: runs, waiting: [waiting("w1", 9), waiting("w2", 9), waiting("w3", 9)])
                == [.init(run: "a", job: "w1", priority: 9), .init(run: "b", job: "w2", priority: 9)],
            "no run left to stop for the third")
    }

    @Test func aRunAlreadyStoppingFreesItsSlotForTheFirstWaitingJob() {
        let runs = [run("stopping", 0, stopping: true), run("low", 1)]
        let chosen = LocalDispatch.preemptions(runs: runs, waiting: [waiting("w1", 5), waiting("w2", 5)])
        #expect(chosen == [.init(run: "low", job: "w2", priority: 5)], "w1 takes the stopping run's slot")
    }
}
