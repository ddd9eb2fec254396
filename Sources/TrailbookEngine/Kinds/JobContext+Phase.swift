// Long steps that move none of a job's units: what the job is doing, and the stall timeout's heartbeat meanwhile.
extension JobContext {
    /// Reports a long step of the job that moves none of its units — listing a destination, comparing a folder
    /// with it, hashing files to tell whether they are there already, selecting photos — and how far it got:
    /// `count` `unit`s (objects listed, files compared, bytes hashed). `show` and `watch` say it
    /// ("listing the destination: 41 000 objects", JSON `progress.phase`) until `endPhase()` or the next phase.
    ///
    /// The stall timeout's heartbeat: a report whose label or count differs from the last one is movement, as
    /// moving `completed` is, so a step longer than `stallTimeoutSeconds` is not taken for a stalled job. Report
    /// often enough (each page listed, each file compared, each chunk hashed: well within the stall timeout), and
    /// count only work done, never time: a step truly stuck (a listing request that never answers) must still
    /// time out. Reports are cheap (the scheduler throttles what it stores and publishes no more than any
    /// progress report); a count that does not change is no movement.
    /// - Parameters:
    ///   - label: what the job is doing, lower case, without the count ("listing the destination").
    ///   - count: how far it got, in `unit`, from 0 at the phase's start; it only grows within one phase.
    ///   - unit: what `count` counts (`ProgressUnit("objects")`, `.files`, `.bytes`).
    public func reportPhase(_ label: String, count: Int64, unit: ProgressUnit) {
        progress.phase = ProgressPhase(label: label, count: count, unit: unit)
        host?.jobDidReportProgress(self)
    }

    /// Ends the phase reported by `reportPhase`: the published progress no longer names it (and the end counts
    /// as movement). Nothing if no phase is reported.
    public func endPhase() {
        guard progress.phase != nil else { return }
        progress.phase = nil
        host?.jobDidReportProgress(self)
    }
}
