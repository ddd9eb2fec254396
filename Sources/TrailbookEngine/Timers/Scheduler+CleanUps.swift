import TrailbookLoop
import TrailbookSQLite

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

// Clean-ups of ended jobs (`JobKind.cleanUp`), tried until done or their budget is spent.
extension Scheduler {
    /// One try of the clean-up of ended job `id` (`JobKind.cleanUp`): forgets it when done or given up, else
    /// schedules the next try (1 s doubling, at most `cleanUpMaxDelaySeconds`, times a random factor in [0.5, 1])
    /// until `cleanUpBudgetSeconds` after the end, then logs that it gave up.
    func tryCleanUp(_ id: String) async {
        guard running.beginCleanUp(id) else { return }
        defer { running.endCleanUp(id) }
        cleanUps[id] = nil
        guard let job = try? store.job(id: id), let kind = kinds[job.kind] else {
            try? store.removeCleanUp(jobID: id)
            return
        }
        let pending = (try? store.dueCleanUps(now: .infinity))?.first { $0.jobID == id }
        let tries = (pending?.tries ?? 0) + 1
        let outcome = await kind.cleanUp(job.state, job.params, makeContext(for: job, kind: kind))
        switch outcome {
        case .done:
            try? store.removeCleanUp(jobID: id)
        case .giveUp(let message):
            log(job, .error, "clean-up abandoned: \(message)")
            try? store.removeCleanUp(jobID: id)
        case .retry(let message):
            let now = Timestamp.now()
            if now - (pending?.createdAt ?? now) >= options.cleanUpBudgetSeconds {
                log(job, .error, "clean-up given up after \(tries) tries over \(Self.seconds(options.cleanUpBudgetSeconds)): \(message)")
                try? store.removeCleanUp(jobID: id)
            } else {
                let delay = options.cleanUpBackoff.delay(afterAttempt: tries, unitRandom: Double.random(in: 0...1))
                log(job, .warning, "clean-up try \(tries) failed (\(message)); next try in \((delay * 10).rounded() / 10) s")
                try? store.rescheduleCleanUp(jobID: id, tries: tries, nextAt: now + delay, error: message)
                cleanUps[id] = Timestamp.monotonic() + delay
            }
        }
        cleanUps.arm()
    }

    /// Starts a try of each clean-up that is due (not those being tried now, which arm the timer again when
    /// their try ends).
    func cleanUpsDue() {
        let due = cleanUps.due()
        // A timer that fired a little early: arm it again. Those being tried now re-arm it when their try ends.
        if due.isEmpty { return cleanUps.arm() }
        for id in due where !running.isCleaningUp(id) {
            cleanUps[id] = nil
            Task.onLoop { await self.tryCleanUp(id) }
        }
    }
}
