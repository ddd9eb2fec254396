/// Why a submit (of one job or a batch) queued nothing.
public struct SubmitRefusal: Error, Sendable, Equatable {
    /// The refused entry's index in the batch (from 0); `nil` when no one entry is to blame (the store refused
    /// the write, the daemon is shutting down).
    public var index: Int?
    /// The reason, with its stable code.
    public var error: JobError

    /// A refusal; see the members.
    public init(index: Int?, error: JobError) {
        self.index = index
        self.error = error
    }
}
