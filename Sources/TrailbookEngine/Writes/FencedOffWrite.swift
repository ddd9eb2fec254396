import TrailbookProtocol

/// A transition of a job that a shared store fenced off: this daemon made it, but another daemon took the job
/// over before it was written (the run's lease was lost, or the waiting job was claimed or ended meanwhile). It
/// is reported as such, on the feed (a warning `log` event) and in the daemon's log, and never as a `state` event:
/// the job's state is the other daemon's to announce.
struct FencedOffWrite {
    /// The job as this daemon would have written it.
    var job: JobRecord
    /// The state it had before, as this daemon last announced it.
    var from: JobState

    /// The warning: for a run's end, that it is not the job's end.
    var message: String {
        guard from == .running else {
            return "its change here (\(from.rawValue) -> \(job.state.rawValue)) was not written: another daemon "
                + "sharing the store changed the job first"
        }
        return "its lease was lost before its end (\(job.state.rawValue)) was written; not written: this run's end "
            + "is not the job's (another daemon took the job over and runs it)"
    }
}
