import TrailbookEngine
import TrailbookLoop

/// A folder upload's file list in the job store (`JobContext.entries`, issue 35), beside its checkpoint: every
/// file listed on the first run with what became of it (uploaded with its SHA-256, already there, failed with its
/// code, passed over with its reason), so `show ID --files` pages through all of them whatever their number,
/// while the checkpoint and `show` keep counts and the first few.
///
/// Positions: the files to upload first, in upload order (position = the file's index), then the entries not
/// uploaded (passed over, failed at listing, already there), in the order they were met; the first run writes
/// them a page at a time as it lists (`UploadTreeListing`). Each entry's item is
/// `{"path", "name", "identity"}` (`BytePath` JSON; `name` the destination name, absent for an entry passed over;
/// `identity` the file's `SourceIdentity` when listed, for files to upload). A version-2 checkpoint
/// (`UploadCheckpoint+FileList.swift`) reads the files back from here.
///
/// The per-file seam: `landed` and `failed` are called for each file's outcome, whichever destination sent it;
/// they note it (`JobEntries.note`), and the job's next checkpoint save writes every outcome noted, in one
/// statement, before the checkpoint.
@LoopActor
enum UploadTreeEntries {
    /// An entry's item as stored: `{"path", "name"?, "identity"?}`.
    struct Item: Codable, Sendable {
        /// The file's absolute path.
        var path: BytePath
        /// Its destination name; `nil` for an entry passed over.
        var name: BytePath?
        /// Its identity when listed; `nil` for an entry not uploaded, and in lists written before it was kept.
        var identity: SourceIdentity?
    }

    /// Outcomes noted and not written (`JobEntries.notedCount`) at which a transfer saves its checkpoint even when
    /// its own cadence would wait (a `file://` upload saves once `chunkSize` bytes landed: 8 192 files of 1 KiB):
    /// each noted outcome is held in memory (its SHA-256 and path) until written, and a version-2 checkpoint's
    /// save costs the same at any count.
    static let notedLimit = 1_000

    /// Whether `job` holds `notedLimit` outcomes or more not yet written: save the checkpoint (which writes them).
    static func notedOutcomesAreDue(in job: JobContext) -> Bool { job.entries.notedCount >= notedLimit }

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
