/// Files done of files in all, published beside a job's unit count by kinds that work through files (a folder
/// upload counts bytes and files: "1.2 GiB / 8.4 GiB, 312 / 2 480 files"). JSON, inside the progress object:
/// `files_completed`, `files_total`.
public struct ProgressFileCount: Sendable, Equatable {
    /// Files done (for an upload: landed at the destination).
    public var completed: Int64
    /// Files in all.
    public var total: Int64

    /// `completed` files of `total` (counts of files, not bytes; `completed` ≤ `total` as the kind reports them).
    public init(completed: Int64, total: Int64) {
        self.completed = completed
        self.total = total
    }
}
