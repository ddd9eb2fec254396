import TrailbookEngine
import TrailbookLoop

/// A folder upload's file list in the job store (`JobContext.entries`, issue 35), beside its checkpoint: every
/// file listed on the first run with what became of it (uploaded with its SHA-256, already there, failed with its
/// code, passed over with its reason), so `show ID --files` pages through all of them whatever their number,
/// while the checkpoint and `show` keep counts and the first few.
///
/// Positions: the files to upload first, in upload order (position = index in `UploadTreePlan.files`), then the
/// entries not uploaded (`UploadTreePlan.notUploaded`), in the order they were met. Each entry's item is
/// `{"path", "name", "identity"}` (`BytePath` JSON; `name` the destination name, absent for an entry passed over;
/// `identity` the file's `SourceIdentity` when listed, for files to upload). A version-2 checkpoint
/// (`UploadCheckpoint+FileList.swift`) reads the files back from here.
///
/// The per-file seam: `landed` and `failed` are called for each file's outcome, whichever destination sent it;
/// they note it (`JobEntries.note`), and the job's next checkpoint save writes every outcome noted, in one
/// statement, before the checkpoint.
@LoopActor
enum UploadTreeEntries {
    /// Entries per store write on the first run.
    static let batchSize = 1_000

    /// An entry's item as stored: `{"path", "name"?, "identity"?}`.
    struct Item: Codable, Sendable {
        /// The file's absolute path.
        var path: BytePath
        /// Its destination name; `nil` for an entry passed over.
        var name: BytePath?
        /// Its identity when listed; `nil` for an entry not uploaded, and in lists written before it was kept.
        var identity: SourceIdentity?
    }

    /// Writes the list of the first run: clears what a walk cut short left, then the files to upload (pending,
    /// with their `identities`, aligned with `plan.files`) and the entries not uploaded with their outcome, in
    /// batches, then seals it. Call before the checkpoint that records the plan is saved: a crash in between lists
    /// again.
    /// - Throws: `JobError` `store_error`.
    static func write(_ plan: UploadTreePlan, identities: [SourceIdentity], in job: JobContext) throws(JobError) {
        let entries = job.entries
        try entries.restart()
        var batch: [JobEntry] = []
        batch.reserveCapacity(batchSize)
        func add(_ entry: JobEntry) throws(JobError) {
            batch.append(entry)
            if batch.count == batchSize {
                try entries.append(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        for index in plan.files.indices {
            try add(
                JobEntry(
                    position: index, size: identities[index].size,
                    item: item(path: plan.files[index], name: plan.names[index], identity: identities[index])))
        }
        for (offset, other) in plan.notUploaded.enumerated() {
            try add(
                JobEntry(
                    position: plan.files.count + offset, size: other.size,
                    item: item(path: other.entry.path, name: other.entry.name), outcome: other.outcome))
        }
        try entries.append(batch)
        try entries.seal(count: plan.files.count + plan.notUploaded.count)
    }

    /// The hook a transfer calls as each file lands (`FileLanded`): notes it done with its SHA-256 and where it
    /// is (the destination path, the object `s3://BUCKET/KEY` or the tus upload URL), written with the next
    /// checkpoint save (which fails, and the job is retried, if the store refuses it).
    static func landed(in job: JobContext) -> FileLanded {
        { index, file in job.entries.note(index, .done(detail: file.sha256, location: file.url ?? file.path.description)) }
    }

    /// Notes that file `index` failed alone with `error` (`UploadCheckpoint.failFile`), written with the next
    /// checkpoint save: call before the checkpoint that moves past it is saved.
    static func failed(_ index: Int, error: JobError, in job: JobContext) {
        job.entries.note(index, .failed(code: error.code, message: error.message))
    }

    /// An entry's item: `{"path", "name", "identity"}`, the name and identity left out when `nil`.
    static func item(path: BytePath, name: BytePath?, identity: SourceIdentity? = nil) -> JSONValue {
        var members: [String: JSONValue] = ["path": path.json]
        if let name { members["name"] = name.json }
        if let identity { members["identity"] = JSONCoding.value(of: identity) }
        return .object(members)
    }
}
