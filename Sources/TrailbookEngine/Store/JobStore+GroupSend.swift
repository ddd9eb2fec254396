/// The SQLite store's answers to the group commit's calls a shared store answers without waiting (`sendGroup`) or
/// fills in after a fenced-off write (`takeLostWrites`, `forgetLostLease`): a local commit is short, so it is
/// written at once, before the call returns, and nothing is ever fenced off, so the scheduler has one path for both
/// stores.
extension JobStore {
    /// `commitGroup`, written at once: `completion` is called before this returns, with the new jobs (their
    /// `sequence` filled in, in order) and no write fenced off, or with the `SQLiteError` `commitGroup` threw
    /// (locked, disk full), and then nothing of the group was written. It never throws.
    public func sendGroup(
        inserting: [JobRecord], digests: [String?], duplicateKeys: [[String]],
        updating: [(job: JobRecord, addingCleanUp: Bool)], durable: Bool,
        completion: @escaping (Result<GroupWritten, any Error>) -> Void
    ) {
        var inserted = inserting
        completion(
            Result {
                try commitGroup(
                    inserting: &inserted, digests: digests, duplicateKeys: duplicateKeys, updating: updating,
                    durable: durable)
                return GroupWritten(inserted: inserted, lost: [])
            })
    }

    /// None: the SQLite store fences no write off.
    public func takeLostWrites() -> Set<String> { [] }

    /// Nothing to forget: the SQLite store leases nothing.
    public func forgetLostLease(of id: String) {}
}
