import PhotoLibrary
import TrailbookEngine
import TrailbookLoop
import TrailbookSQLite

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's one connection to the photo store (`$TRAILBOOK_JOBS_HOME/photos.sqlite3`), shared by the tagging
/// job kinds and opened on first use. The daemon is the store's single writer; the CLI may read it (WAL).
///
/// Besides the photo library's schema, it keeps `job_checkpoints(job_id TEXT PRIMARY KEY, data TEXT)`: the
/// checkpoints of jobs whose work is in this same file (`tag`, `autotag`), so that a batch's writes and the
/// checkpoint that says the batch is done commit in one transaction. A job's row is deleted once the job has ended
/// for good (`jobEnded`).
@LoopActor
public final class PhotoLibraryService {
    /// Path of the store.
    public let path: String
    /// Whether (and how) `tag` and `autotag` write XMP sidecars when a job does not say (`daemon --xmp`).
    public nonisolated let xmpDefaults: XMPSidecarDefaults
    private var opened: PhotoStore?

    /// A service for the store at `path`; nothing is opened yet.
    public nonisolated init(path: String, xmpDefaults: XMPSidecarDefaults = XMPSidecarDefaults()) {
        self.path = path
        self.xmpDefaults = xmpDefaults
    }

    /// The store, opened (created and migrated if needed) on first use.
    ///
    /// - Throws: `JobError` `photo_store_error` (retryable) if it cannot be opened.
    public func store() throws(JobError) -> PhotoStore {
        if let opened { return opened }
        do {
            let store = try PhotoStore(path: path)
            try store.database.execute(
                "CREATE TABLE IF NOT EXISTS job_checkpoints (job_id TEXT PRIMARY KEY, data TEXT NOT NULL)")
            opened = store
            return store
        } catch {
            throw JobError(
                code: "photo_store_error", message: "cannot open the photo store \(path): \(error)", retryable: true)
        }
    }

    /// The checkpoint a job saved in the photo store, decoded as `C`; `nil` if none.
    ///
    /// - Throws: `JobError` `photo_store_error` (retryable) if the store cannot be read, `bad_checkpoint` if the
    ///   saved checkpoint does not decode as `C`.
    public func checkpoint<C: Decodable>(job: String, as type: C.Type) throws(JobError) -> C? {
        let store = try store()
        let text: String?
        do {
            text = try store.database.query("SELECT data FROM job_checkpoints WHERE job_id = ?", [.text(job)]).first?
                .text(0)
        } catch {
            // A busy or failing store may answer next time; only a checkpoint that cannot be decoded is final.
            throw JobError(
                code: "photo_store_error", message: "cannot read the job's checkpoint: \(error)", retryable: true)
        }
        guard let text else { return nil }
        do {
            return try JSONCoding.decode(type, from: Array(text.utf8))
        } catch {
            throw JobError(code: "bad_checkpoint", message: "cannot decode the job's checkpoint: \(error)")
        }
    }

    /// Opens (and so migrates) the store now if its file exists: the daemon calls it at start, so after an upgrade
    /// the CLI's readers (`photos list`, which never migrate) find the schema they expect. A store that cannot be
    /// opened is left for the first job to report.
    public func openIfPresent() {
        if opened == nil, access(path, F_OK) == 0 { _ = try? store() }
    }

    /// Deletes a job's checkpoint, once the job has ended for good (`JobKind.jobEnded`). Best effort: a store that
    /// cannot be written keeps the row, which is only a few hundred bytes and never read again.
    public func forgetCheckpoint(job: String) {
        // A job that ended before anything opened the store (cancelled while queued) has no row, and this must
        // not create the store for it.
        guard opened != nil || access(path, F_OK) == 0, let store = try? store() else { return }
        _ = try? store.database.query("DELETE FROM job_checkpoints WHERE job_id = ?", [.text(job)])
    }

    /// Deletes the checkpoints of jobs that retention removed from the job store, in one transaction: those whose
    /// `forgetCheckpoint` never ran (the daemon died between the end and it). Best effort, like `forgetCheckpoint`.
    public func forgetCheckpoints(jobs: [String]) {
        guard !jobs.isEmpty, opened != nil || access(path, F_OK) == 0, let store = try? store() else { return }
        _ = try? store.database.transaction {
            for job in jobs { try store.database.query("DELETE FROM job_checkpoints WHERE job_id = ?", [.text(job)]) }
        }
    }

    /// Writes a job's checkpoint; call inside `PhotoStore.transaction` so it commits with the batch it describes.
    ///
    /// - Throws: `SQLiteError` on a write error.
    public static func saveCheckpoint<C: Encodable>(_ checkpoint: C, job: String, in database: Database) throws {
        try database.query(
            "INSERT OR REPLACE INTO job_checkpoints (job_id, data) VALUES (?, ?)",
            [.text(job), .text(String(decoding: JSONCoding.encode(checkpoint), as: UTF8.self))])
    }
}

/// The resumable state of a bulk photo job (`tag`, `autotag`): where it is in its selection, and what it met.
protocol PhotoBatchCheckpoint: Codable {
    /// Index into the ID list, or the last local ID done for `all`.
    var cursor: Int64 { get set }
    /// Inputs consumed so far, in photos.
    var processed: Int64 { get set }
    /// IDs that matched no photo: how many, and the first `StableIDList.listedUnknownIDs`.
    var unknownCount: Int { get set }
    var unknownFirst: [String] { get set }
    /// Set once the last batch committed, so a restart after that does not run again.
    var finished: Bool { get set }
}

extension PhotoBatchCheckpoint {
    /// Moves past `batch`; `missing` counts resolved IDs whose photo vanished since.
    mutating func advance(past batch: SelectedBatch, missing: Int) {
        advance(
            consumed: batch.consumed, unknownCount: batch.unknown.count + missing, unknownFirst: batch.unknown,
            to: batch.nextCursor)
    }

    /// Moves the cursor to `cursor` past `consumed` inputs, of which `unknownCount` named no photo (the first of
    /// them in `unknownFirst`, kept up to `StableIDList.listedUnknownIDs` in all).
    mutating func advance(consumed: Int, unknownCount: Int, unknownFirst: [String], to cursor: Int64) {
        self.unknownCount += unknownCount
        self.unknownFirst += unknownFirst.prefix(max(0, StableIDList.listedUnknownIDs - self.unknownFirst.count))
        self.cursor = cursor
        processed += Int64(consumed)
    }
}

extension PhotoLibraryService {
    /// Runs `body` (a batch's writes, which also update the checkpoint) and saves the checkpoint in the same
    /// photo-store transaction: both commit, or neither (the exactly-once promise of the bulk jobs).
    ///
    /// - Returns: the checkpoint as `body` left it.
    /// - Throws: `JobError` from the photo library (its code), or `photo_store_error` (retryable) naming `what`.
    static func commit<C: PhotoBatchCheckpoint>(
        _ checkpoint: C, job: String, in store: PhotoStore, what: String,
        _ body: (PhotoStoreTransaction, inout C) throws -> Void = { _, _ in }
    ) throws(JobError) -> C {
        var next = checkpoint
        do {
            try store.transaction { tx in
                try body(tx, &next)
                try saveCheckpoint(next, job: job, in: tx.database)
            }
        } catch let error as PhotoLibraryError {
            throw error.jobError
        } catch let error as JobError {
            throw error
        } catch {
            throw JobError(code: "photo_store_error", message: "cannot write \(what): \(error)", retryable: true)
        }
        return next
    }
}

/// Maps photo-library errors to job errors with the same stable code.
extension PhotoLibraryError {
    /// This error as a `JobError` (code `code.name`); store errors are retryable.
    public var jobError: JobError {
        JobError(code: code == .store ? "photo_store_error" : code.name, message: message, retryable: code == .store)
    }
}
