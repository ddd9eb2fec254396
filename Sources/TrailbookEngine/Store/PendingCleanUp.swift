/// A pending clean-up of an ended job (see `JobKind.cleanUp`).
public struct PendingCleanUp: Sendable, Equatable {
    /// The job's id.
    public var jobID: String
    /// Tries so far.
    public var tries: Int
    /// When it was recorded (the job's end), in Unix seconds.
    public var createdAt: Double
    /// When its next try is due, in Unix seconds (kept for the next start; a running daemon waits on the
    /// monotonic clock).
    public var nextAt: Double
}
