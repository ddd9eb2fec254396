import TrailbookEngine

/// Where `JobKindHarness` stops an attempt, as the scheduler would stop a job: the stop lands at the moment the
/// kind does the thing named, before the kind's next `await` resumes, so a test stops at the same point every run.
public enum HarnessStopPoint: Sendable, Equatable {
    /// When a progress report's `completed` reaches at least this many units (of the kind's unit).
    case progress(atLeast: Int64)
    /// Right after the kind's `n`-th checkpoint save of this attempt (1-based) is stored.
    case checkpointSave(Int)
    /// Right after the kind logs a line containing this text.
    case log(containing: String)
}
