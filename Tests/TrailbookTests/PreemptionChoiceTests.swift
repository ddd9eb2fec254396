import Testing

@testable import TrailbookEngine

/// The shared store's preemption decision (`PreemptionChoice`): when a full daemon claims a job above its lowest
/// run, and which run gives up its slot.
struct PreemptionChoiceTests {
    private func run(
        _ id: String, _ priority: Int, startedAt: Double = 0, stopping: Bool = false
    ) -> PreemptionChoice.Run {
        PreemptionChoice.Run(id: id, priority: priority, startedAt: startedAt, isStopping: stopping)
    }

    @Test func aFullDaemonClaimsOnlyAboveItsLowestRun() {
        let choice = PreemptionChoice(runs: [run("a", 3), run("b", 0), run("c", 5)], concurrency: 3, held: 0)
        #expect(choice.claimAbove == 0)
        #expect(!choice.hasFreeSlot)
        // Equal priorities never preempt: a job of priority 0 is not above the lowest run.
        #expect(choice.victim(for: 0) == nil)
        #expect(choice.victim(for: 1)?.id == "b")
        #expect(choice.victim(for: 4)?.id == "b")
    }

    @Test func aDaemonWithAFreeSlotLeavesItToTheOrdinaryClaim() {
        let choice = PreemptionChoice(runs: [run("a", 0)], concurrency: 2, held: 0)
        #expect(choice.claimAbove == nil)
        #expect(choice.hasFreeSlot)
        // A held job takes the free slot.
        #expect(PreemptionChoice(runs: [run("a", 0)], concurrency: 2, held: 1).claimAbove == 0)
    }

    @Test func aStoppingRunFreesItsSlotForTheHighestWaitingJobWithoutAPreemption() {
        // One run stopping (a cancel, a timeout) and nothing held for it: its slot goes to the ordinary claim.
        let freeing = PreemptionChoice(runs: [run("a", 0, stopping: true), run("b", 0)], concurrency: 2, held: 0)
        #expect(freeing.claimAbove == nil)
        // Stopping for a held job: the other runs may still be preempted, by a job above them.
        let held = PreemptionChoice(runs: [run("a", 0, stopping: true), run("b", 2)], concurrency: 2, held: 1)
        #expect(held.claimAbove == 2)
        #expect(held.victim(for: 3)?.id == "b", "a run already stopping is never picked again")
        // Every run stopping for held jobs: nothing left to preempt.
        #expect(PreemptionChoice(runs: [run("a", 0, stopping: true)], concurrency: 1, held: 1).claimAbove == nil)
    }

    @Test func amongEqualsTheNewestRunStops() {
        let choice = PreemptionChoice(
            runs: [run("old", 1, startedAt: 10), run("new", 1, startedAt: 30), run("mid", 1, startedAt: 20)],
            concurrency: 3, held: 0)
        #expect(choice.victim(for: 2)?.id == "new")
    }

    @Test func theStopSaysWhichJobTookTheSlotAsTheLocalStoreDoes() {
        let detail = PreemptionChoice.detail(preemptedBy: "0e000000-0000-4000-8000-000000000001", priority: 10)
        #expect(detail == "paused to free a slot for job 0e000000-0000-4000-8000-000000000001 (priority 10)")
    }
}
