/// A job store that keeps the upload memory (`UploadMemory`): the SQLite `JobStore` (migrations 12 and 13,
/// `upload_memory`) and the shared `PostgresJobStore` (migrations 8 and 9, `trailbook_upload_memory`). Unlike a job's
/// entries, the rows belong to no job: they outlive the jobs that wrote them (retention prunes jobs, not these).
///
/// Calls are made on the loop thread and answer synchronously, as `JobStoring`'s do. Errors are the store's own.
public protocol UploadMemoryStoring: AnyObject {
    /// Keeps `uploads`, each replacing what was remembered for its destination and name, in one transaction.
    /// - Throws: the store's error.
    func rememberUploads(_ uploads: [RememberedFile]) throws
    /// What is remembered for `destination` under any of `names` (at most one row per name; names not
    /// remembered are absent).
    /// - Throws: the store's error.
    func rememberedUploads(destination: String, names: [[UInt8]]) throws -> [RememberedFile]
    /// Forgets what is remembered for `destination` under `name` (the destination no longer holds it).
    /// - Throws: the store's error.
    func forgetUpload(destination: String, name: [UInt8]) throws
    /// Forgets every row remembered (written) before `cutoff` (Unix seconds), whatever its destination.
    /// - Returns: how many rows were forgotten.
    /// - Throws: the store's error.
    func forgetUploads(rememberedBefore cutoff: Double) throws -> Int
}
