/// A job a submit returned: new, or found by its idempotency key.
public struct Submitted: Sendable, Equatable {
    /// The job.
    public var job: JobRecord
    /// Whether it was already stored (a submit retried with its key) rather than made now.
    public var existing: Bool

    /// A result; see the members.
    public init(job: JobRecord, existing: Bool) {
        self.job = job
        self.existing = existing
    }
}
