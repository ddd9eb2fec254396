import TrailbookEngine
import TrailbookLoop

/// Version 2 of the checkpoint (a folder upload): the files, their destination names and identities are the job's
/// file list in the store (`UploadTreeEntries`), read in pages when the checkpoint is loaded, never written into
/// the checkpoint's JSON. What is saved is the cursor (`fileIndex`, `offset`), the files landed or failed ahead of
/// it, and counts, so one save costs the same for 10 files or 100 000.
extension UploadCheckpoint {
    /// Entries read from the job's file list per store call when a version-2 checkpoint is loaded.
    static let listPage = 1_000

    /// Lists kept in a version-2 checkpoint's tree (`skipped`, `failed`) at most; every entry is in the job's
    /// file list (`show ID --files`).
    static let listedInStore = 32

    /// A new version-2 checkpoint of a folder upload of `tree` (the files listed on the first run, with their
    /// `identities`): the files stay in memory for this attempt and are saved only in the job's file list.
    static func listing(_ tree: UploadTreePlan, identities: [SourceIdentity]) -> UploadCheckpoint {
        var checkpoint = UploadCheckpoint(version: 2, sources: identities)
        checkpoint.tree = tree
        checkpoint.fileCount = identities.count
        checkpoint.finishedCount = 0
        checkpoint.finishedBytes = 0
        return checkpoint
    }

    /// The job's checkpoint, or `nil` on a first run. A version-2 one gets its files, names and identities back
    /// from the job's file list, read `listPage` entries at a time.
    /// - Throws: `JobError` `store_error` (retryable) when the store cannot be read, `bad_checkpoint` when it does
    ///   not decode or the file list does not match it (not retryable: cancel the job and submit it again).
    @LoopActor
    static func load(in job: JobContext) throws(JobError) -> UploadCheckpoint? {
        guard var checkpoint = try job.loadCheckpoint(as: UploadCheckpoint.self) else { return nil }
        guard checkpoint.listsInStore, var tree = checkpoint.tree else { return checkpoint }
        let count = checkpoint.fileCount ?? -1
        var files: [BytePath] = []
        var names: [BytePath] = []
        var sources: [SourceIdentity] = []
        var failedBefore: Set<Int> = []
        files.reserveCapacity(max(0, count))
        names.reserveCapacity(max(0, count))
        sources.reserveCapacity(max(0, count))
        var after = -1
        while files.count < count {
            let page = try job.entries.page(after: after, limit: min(listPage, count - files.count))
            guard !page.isEmpty else { break }
            for entry in page {
                guard entry.position == files.count,
                    let item = try? JSONCoding.convert(entry.item, to: UploadTreeEntries.Item.self),
                    let name = item.name, let identity = item.identity
                else { throw mismatch(job, "entry \(entry.position) is not a file the checkpoint expects") }
                files.append(item.path)
                names.append(name)
                sources.append(identity)
                if entry.position < checkpoint.fileIndex, entry.outcome.state == .failed {
                    failedBefore.insert(entry.position)
                }
            }
            after = page.last!.position
        }
        guard files.count == count else {
            throw mismatch(job, "the file list has \(files.count) files to upload, the checkpoint \(count)")
        }
        tree.files = files
        tree.names = names
        checkpoint.tree = tree
        checkpoint.sources = sources
        checkpoint.failedBefore = failedBefore
        return checkpoint
    }

    @LoopActor
    private static func mismatch(_ job: JobContext, _ what: String) -> JobError {
        job.log(.error, "the saved upload state and the job's file list disagree: \(what)")
        return JobError(
            code: "bad_checkpoint",
            message: "the saved upload state does not match this job's file list (\(what)); cancel it and submit again")
    }

    /// Encodes the checkpoint. Version 1 writes every member; version 2 writes `sources`, `finished` and the
    /// tree's `files` and `names` empty and its `skipped` and `failed` lists cut to `listedInStore`: those live
    /// in the job's file list.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let compact = listsInStore && tree != nil
        try container.encode(version, forKey: .version)
        try container.encode(fileIndex, forKey: .fileIndex)
        try container.encode(offset, forKey: .offset)
        try container.encode(compact ? [] : sources, forKey: .sources)
        try container.encode(compact ? [] : finished, forKey: .finished)
        try container.encode(bytesResent, forKey: .bytesResent)
        try container.encode(fileBytesResent, forKey: .fileBytesResent)
        try container.encodeIfPresent(uploadURL, forKey: .uploadURL)
        try container.encodeIfPresent(uploadExpires, forKey: .uploadExpires)
        try container.encodeIfPresent(sentThrough, forKey: .sentThrough)
        try container.encodeIfPresent(partFile, forKey: .partFile)
        try container.encodeIfPresent(checksumVerified, forKey: .checksumVerified)
        try container.encodeIfPresent(s3Plan, forKey: .s3Plan)
        try container.encodeIfPresent(s3UploadID, forKey: .s3UploadID)
        try container.encodeIfPresent(s3PartsSent, forKey: .s3PartsSent)
        try container.encodeIfPresent(photos, forKey: .photos)
        if compact, var tree {
            tree.files = []
            tree.names = []
            tree.skipped = Array(tree.skipped.prefix(Self.listedInStore))
            tree.failed = Array(tree.failed.prefix(Self.listedInStore))
            try container.encode(tree, forKey: .tree)
        } else {
            try container.encodeIfPresent(tree, forKey: .tree)
        }
        try container.encodeIfPresent(s3CreateStarted, forKey: .s3CreateStarted)
        try container.encodeIfPresent(failingSince, forKey: .failingSince)
        try container.encodeIfPresent(finishedAhead, forKey: .finishedAhead)
        try container.encodeIfPresent(failedAhead, forKey: .failedAhead)
        try container.encodeIfPresent(fileCount, forKey: .fileCount)
        try container.encodeIfPresent(finishedCount, forKey: .finishedCount)
        try container.encodeIfPresent(finishedBytes, forKey: .finishedBytes)
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
