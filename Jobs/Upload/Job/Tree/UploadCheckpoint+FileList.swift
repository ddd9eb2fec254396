import TrailbookEngine
import TrailbookLoop

/// Version 2 of the checkpoint (a folder upload): the files, their destination names and identities are the job's
/// file list in the store (`UploadTreeEntries`), which the transfers read a page at a time (`UploadFileList`); they
/// are never put into the checkpoint, in memory or in its JSON. What is saved is the cursor (`fileIndex`,
/// `offset`), the files landed or failed ahead of it, and counts, so one save costs the same for 10 files or
/// 100 000.
extension UploadCheckpoint {
    /// Lists kept in a version-2 checkpoint's tree (`skipped`, `failed`) at most; every entry is in the job's
    /// file list (`show ID --files`).
    static let listedInStore = 32

    /// A new version-2 checkpoint of a folder upload of `tree` (the counts of what the first run listed, already
    /// written to the job's file list) with `fileCount` files to upload (by default `tree.files.count`): its
    /// counts, without its files and names, its lists cut to `listedInStore`.
    static func listing(_ tree: UploadTreePlan, fileCount: Int? = nil) -> UploadCheckpoint {
        var checkpoint = UploadCheckpoint(version: 2, sources: [])
        checkpoint.fileCount = fileCount ?? tree.files.count
        checkpoint.finishedCount = 0
        checkpoint.finishedBytes = 0
        var counted = tree
        counted.files = []
        counted.names = []
        counted.notUploaded = []
        counted.skipped = Array(tree.skipped.prefix(listedInStore))
        counted.failed = Array(tree.failed.prefix(listedInStore))
        checkpoint.tree = counted
        return checkpoint
    }

    /// The job's checkpoint, or `nil` on a first run. A version-2 one comes without its files: read them through
    /// `files(in:)`.
    /// - Throws: `JobError` `store_error` (retryable) when the store cannot be read, `bad_checkpoint` when it does
    ///   not decode (not retryable: cancel the job and submit it again).
    @LoopActor
    static func load(in job: JobContext) throws(JobError) -> UploadCheckpoint? {
        try job.loadCheckpoint(as: UploadCheckpoint.self)
    }

    /// A version-2 folder upload's files: the job's file list, read a page at a time; `nil` for a checkpoint
    /// that keeps its files itself (version 1).
    @LoopActor
    func files(in job: JobContext) -> UploadFileList? {
        guard listsInStore, tree != nil else { return nil }
        return UploadFileList(entries: job.entries, count: fileCount ?? 0)
    }

    /// The result of a version-2 folder upload: the bytes and counts, not a row per file (those are the job's
    /// file list: `show ID --files`). `{"bytes", "bytes_resent", "sha256": null, "files": [], "destination"}`.
    func countedResult(destination: String) -> JSONValue {
        [
            "bytes": .number(Double(finishedBytes ?? 0) + Double(finished.reduce(Int64(0)) { $0 + $1.bytes })),
            "bytes_resent": .number(Double(bytesResent)), "sha256": .null, "files": .array([]),
            "destination": .string(destination),
        ]
    }
}
