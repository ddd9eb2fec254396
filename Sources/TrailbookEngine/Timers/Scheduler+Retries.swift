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

// Retries: the timer that puts `needs_retry` jobs back in the queue when they are due.
extension Scheduler {
    func armRetryTimer() {
        guard !isShuttingDown else { return }
        guard let next = retryDueAt.values.min() else {
            retryTimer?.stop()
            return
        }
        let timer = retryTimer ?? LoopTimer(loop: .main)
        retryTimer = timer
        timer.start(seconds: max(0, next - Timestamp.monotonic())) { [weak self] in self?.retryDue() }
    }

    func retryDue() {
        let now = Timestamp.monotonic() + 0.001
        for (id, _) in retryDueAt.filter({ $0.value <= now }).sorted(by: { $0.value < $1.value }) {
            retryDueAt[id] = nil
            guard var job = current(id), (try? transition(&job, .retryDue, verb: "retry")) != nil else { continue }
            job.retryAt = nil
            commit(job, from: .needsRetry)
        }
        armRetryTimer()
        schedule()
    }
}
