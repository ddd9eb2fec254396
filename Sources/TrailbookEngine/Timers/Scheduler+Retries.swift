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
    /// Puts the `needs_retry` jobs that are due back in the queue (`JobEvent.retryDue`), earliest first, then
    /// arms the timer for the next and starts what can run.
    func retryDue() {
        for id in retries.due() {
            retries[id] = nil
            guard var job = current(id), (try? transition(&job, .retryDue, verb: "retry")) != nil else { continue }
            job.retryAt = nil
            commit(job, from: .needsRetry)
        }
        retries.arm()
        schedule()
    }
}
