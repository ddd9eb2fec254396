import Testing
import TrailbookEngine

struct JobLifecycleTests {
    @Test func startRunsAndCountsAnAttempt() {
        var lifecycle = JobLifecycle(state: .queued, attempt: 0, maxAttempts: 3)
        #expect(lifecycle.handle(.start) == .run)
        #expect(lifecycle.state == .running)
        #expect(lifecycle.attempt == 1)
    }

    @Test func userStopCancels() {
        var lifecycle = JobLifecycle(state: .running, attempt: 1, maxAttempts: 3)
        #expect(lifecycle.handle(.stopped(.userStop, pausing: false)) == JobLifecycle.Effect.none)
        #expect(lifecycle.state == .cancelled)
    }

    @Test func timeoutRetriesUntilTheLastAttemptThenFails() {
        var lifecycle = JobLifecycle(state: .running, attempt: 1, maxAttempts: 2)
        #expect(lifecycle.handle(.stopped(.timeout, pausing: false)) == .scheduleRetry(afterAttempt: 1))
        #expect(lifecycle.state == .needsRetry)
        #expect(lifecycle.handle(.retryDue) == JobLifecycle.Effect.none)
        #expect(lifecycle.state == .queued)
        #expect(lifecycle.handle(.start) == .run)
        #expect(lifecycle.attempt == 2)
        #expect(lifecycle.handle(.stopped(.timeout, pausing: false)) == JobLifecycle.Effect.none)
        #expect(lifecycle.state == .failed)
    }

    /// Issue 11 §4: credentials refused pause the job (a person must act), keeping the attempt for the resume.
    @Test func aBlockedRunPausesWithoutUsingAnAttempt() {
        var lifecycle = JobLifecycle(state: .running, attempt: 2, maxAttempts: 2)
        #expect(lifecycle.handle(.blocked) == JobLifecycle.Effect.none)
        #expect(lifecycle.state == .paused)
        #expect(lifecycle.handle(.blocked) == nil, "only a running job can be blocked")
        #expect(lifecycle.handle(.resume) == JobLifecycle.Effect.none)
        #expect(lifecycle.handle(.start) == .run)
        #expect(lifecycle.attempt == 2, "the same attempt goes on")
    }

    @Test func reclaimRequeuesWithoutUsingAnAttempt() {
        var lifecycle = JobLifecycle(state: .running, attempt: 2, maxAttempts: 5)
        _ = lifecycle.handle(.stopped(.resourceReclaim, pausing: false))
        #expect(lifecycle.state == .queued)
        #expect(lifecycle.attempt == 2, "a waiting job still shows the attempt it is in")
        #expect(lifecycle.resumesAttempt)
        _ = lifecycle.handle(.start)
        #expect(lifecycle.attempt == 2)
        #expect(!lifecycle.resumesAttempt)
        _ = lifecycle.handle(.stopped(.timeout, pausing: false))
        _ = lifecycle.handle(.retryDue)
        _ = lifecycle.handle(.start)
        #expect(lifecycle.attempt == 3, "a timeout ends the attempt")
    }

    @Test func pauseOfARunningJobEndsPaused() {
        var lifecycle = JobLifecycle(state: .running, attempt: 1, maxAttempts: 5)
        _ = lifecycle.handle(.stopped(.resourceReclaim, pausing: true))
        #expect(lifecycle.state == .paused)
        #expect(lifecycle.handle(.start) == nil, "a paused job is not started")
        _ = lifecycle.handle(.resume)
        #expect(lifecycle.state == .queued)
    }

    @Test func crashRecoveryRequeues() {
        var lifecycle = JobLifecycle(state: .running, attempt: 1, maxAttempts: 5)
        _ = lifecycle.handle(.recoverAfterCrash)
        #expect(lifecycle.state == .queued)
        #expect(lifecycle.attempt == 1)
        _ = lifecycle.handle(.start)
        #expect(lifecycle.attempt == 1, "the crashed run is resumed as the same attempt")
    }

    @Test func retryableFailureRetriesAndPermanentFailureFails() {
        var retryable = JobLifecycle(state: .running, attempt: 1, maxAttempts: 3)
        #expect(retryable.handle(.fail(retryable: true)) == .scheduleRetry(afterAttempt: 1))
        var permanent = JobLifecycle(state: .running, attempt: 1, maxAttempts: 3)
        _ = permanent.handle(.fail(retryable: false))
        #expect(permanent.state == .failed)
    }

    @Test(arguments: [JobState.succeeded, .failed, .cancelled])
    func terminalStatesAcceptNothing(_ state: JobState) {
        let events: [JobEvent] = [
            .start, .succeed, .fail(retryable: true), .stopped(.userStop, pausing: false), .cancelWhileWaiting,
            .pauseWhileWaiting, .resume, .retryDue, .recoverAfterCrash,
        ]
        for event in events {
            var lifecycle = JobLifecycle(state: state, attempt: 1, maxAttempts: 3)
            #expect(lifecycle.handle(event) == nil, "\(state) accepted \(event)")
            #expect(lifecycle.state == state)
        }
    }

    @Test func waitingJobsCanBeCancelledOrPaused() {
        for state in [JobState.queued, .needsRetry, .paused] {
            var lifecycle = JobLifecycle(state: state, attempt: 1, maxAttempts: 3)
            _ = lifecycle.handle(.cancelWhileWaiting)
            #expect(lifecycle.state == .cancelled)
        }
        var running = JobLifecycle(state: .running, attempt: 1, maxAttempts: 3)
        #expect(running.handle(.cancelWhileWaiting) == nil, "a running job is stopped, not cancelled in place")
        #expect(running.handle(.resume) == nil)
    }

    @Test func backoffDoublesWithJitterAndCaps() {
        let backoff = RetryBackoff(baseSeconds: 1, capSeconds: 60)
        #expect(backoff.delay(afterAttempt: 1, unitRandom: 1) == 1)
        #expect(backoff.delay(afterAttempt: 1, unitRandom: 0) == 0.5)
        #expect(backoff.delay(afterAttempt: 4, unitRandom: 1) == 8)
        #expect(backoff.delay(afterAttempt: 20, unitRandom: 1) == 60)
        #expect(backoff.delay(afterAttempt: 20, unitRandom: 0) == 30)
    }
}
