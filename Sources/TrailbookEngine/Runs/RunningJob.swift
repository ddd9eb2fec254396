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

// One run of a job holding a slot, and how a run ended.
extension Scheduler {
    /// A job that holds a slot.
    final class RunningJob {
        var record: JobRecord
        let context: JobContext
        let kind: AnyJobKind
        let watchdog: LoopTimer
        let startedAt = Timestamp.monotonic()
        var lastMoveAt = Timestamp.monotonic()
        var lastCompleted: Int64
        /// The phase last reported (`JobContext.reportPhase`): a new count is movement, as new units are.
        var lastPhase: ProgressPhase?
        var lastSample: (at: Double, completed: Int64)
        /// Whether progress has stepped forward since the first report, so rate samples are taken.
        var sampling = false
        /// Units in the last report before sampling began.
        var previousReport: Int64?
        var rate: Double?
        var lastPersistAt = Timestamp.monotonic()
        /// Seconds this run spent waiting out outages (`JobContext.waitOut`): they extend its deadline.
        var excusedSeconds = 0.0
        /// When the wait in progress began (monotonic), if the job is waiting out an outage now.
        var waitingSince: Double?
        /// Why it stops, once something asked it to (`Scheduler.stop`, `failForStore`, `loseLease`).
        var stop = RunStop.none
        /// Whether the job is known to have no checkpoint: its first start (no run of it could have saved one),
        /// until the run loads or saves one. Its first `loadCheckpoint` then answers `nil` without a store read.
        var hasNoCheckpoint = false
        let waiters = WaitList()

        init(record: JobRecord, context: JobContext, kind: AnyJobKind) {
            self.record = record
            self.context = context
            self.kind = kind
            watchdog = LoopTimer(loop: .main)
            lastCompleted = record.progress.completed
            lastSample = (Timestamp.monotonic(), record.progress.completed)
        }
    }

    enum Outcome {
        case succeeded(JSONValue)
        case failed(JobError)
        case stopped(CancellationReason)
    }
}
