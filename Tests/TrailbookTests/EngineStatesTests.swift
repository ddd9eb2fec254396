import Testing

@testable import TrailbookEngine

/// The engine's state enums: what each transition keeps and what it cannot express.
@Suite("Engine states")
struct EngineStatesTests {
    @Test("a pause reaching a run already stopping makes it a pause, and keeps its reason and detail")
    func pauseAfterAStop() {
        let stop = RunStop.stopping(.timeout, detail: "ran past its deadline of 30 s", thenPause: false)
        guard case .stopping(let reason, let detail, let thenPause) = stop.pausedAfterwards else {
            Issue.record("not stopping any more: \(stop.pausedAfterwards)")
            return
        }
        #expect(reason == .timeout)
        #expect(detail == "ran past its deadline of 30 s")
        #expect(thenPause)
    }

    @Test("a lost lease and a store failure are final: a later pause does not change them")
    func finalStops() {
        #expect(RunStop.leaseLost.pausedAfterwards.isLeaseLost)
        let failure = JobError(code: "store_write_failed", message: "disk full", retryable: true)
        guard case .storeFailed(let kept) = RunStop.storeFailed(failure).pausedAfterwards else {
            Issue.record("the store failure was lost")
            return
        }
        #expect(kept == failure)
        #expect(RunStop.none.detailAndPause.detail.isEmpty)
        #expect(!RunStop.none.detailAndPause.thenPause)
    }

    @Test("a clean-up waits 1 s doubling up to cleanUpMaxDelaySeconds, times a factor in [0.5, 1]")
    func cleanUpBackoff() {
        var options = SchedulerOptions()
        options.cleanUpMaxDelaySeconds = 600
        let backoff = options.cleanUpBackoff
        for tries in 1...40 {
            let full = min(600, Double(1 << min(tries - 1, 30)))
            #expect(backoff.delay(afterAttempt: tries, unitRandom: 0) == full / 2)
            #expect(backoff.delay(afterAttempt: tries, unitRandom: 1) == full)
        }
    }
}
