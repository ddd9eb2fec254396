import TrailbookLoop

/// The upload memory: what this daemon's jobs (or those of daemons sharing its store) uploaded, by destination
/// and name (`RememberedFile`), with the source file's `stat` when its SHA-256 was known (`RememberedSource`, the
/// stat cache). A tus server has no way to ask which uploads it holds under a name, so the memory is how a folder
/// upload to tus sends only what changed, and how a resumed tus upload knows which files already landed before
/// its last saved checkpoint; on every destination, the stat cache is how a folder uploaded again is compared
/// without reading its unchanged files. Reached through `JobContext.uploadMemory`.
///
/// The memory is a cache of the truth at the destination, never the truth itself: a kind checks a remembered
/// upload there (tus: `HEAD`; S3: the listed ETag; `file://`: the file's `stat`) before trusting it, and a file
/// whose memory is lost is simply hashed or sent again. Rows are replaced when the same name is uploaded to the
/// same destination again and are kept when the job that wrote them is pruned; rows not written for
/// `keptSeconds` are forgotten (`forgetOlder`, at the start of each folder upload).
///
/// Each call is one store transaction and waits for it (on a shared store, one round trip). Errors are
/// `JobError` `store_error` (retryable); `store_error` not retryable when the daemon's store keeps no memory (a
/// test host).
@LoopActor
public struct UploadMemory {
    /// The job that asks (written into the rows it remembers).
    public let jobID: String
    let store: (any UploadMemoryStoring)?

    /// Names per store read: `remembered` splits a longer list into reads of this many.
    nonisolated public static let namesPerRead = 500

    /// How long a row is kept after it was last written, in seconds: 180 days. An older row is forgotten: a tus
    /// file it described is sent again, a file to S3 or `file://` is read and compared again.
    nonisolated public static let keptSeconds: Double = 180 * 24 * 3600

    /// Whether the daemon's store keeps a memory at all (a test host's may not).
    public var isKept: Bool { store != nil }

    /// Keeps `uploads` (each with this job's id and written now), in one store transaction.
    /// - Throws: `JobError` `store_error`.
    public func remember(_ uploads: [RememberedFile]) throws(JobError) {
        guard !uploads.isEmpty else { return }
        let now = Timestamp.now()
        let stamped = uploads.map { upload in
            var upload = upload
            upload.jobID = jobID
            upload.uploadedAt = now
            return upload
        }
        try call("remember uploads") { try $0.rememberUploads(stamped) }
    }

    /// Forgets every row of every destination last written more than `seconds` ago (`keptSeconds` by default).
    /// - Returns: how many were forgotten.
    /// - Throws: `JobError` `store_error`.
    @discardableResult
    public func forgetOlder(than seconds: Double = keptSeconds) throws(JobError) -> Int {
        let cutoff = Timestamp.now() - seconds
        return try call("prune the upload memory") { try $0.forgetUploads(rememberedBefore: cutoff) }
    }

    /// Remembers that this job's upload of `name` (`size` bytes) to `destination`, at `location`, is in `state`:
    /// `.created` as soon as the destination made it, `.complete` once the destination holds it whole.
    /// - Throws: `JobError` `store_error`.
    public func remember(
        destination: String, name: [UInt8], size: Int64, state: RememberedFile.State, location: String
    ) throws(JobError) {
        let upload = RememberedFile(
            destination: destination, name: name, size: size, state: state, location: location, jobID: jobID,
            uploadedAt: Timestamp.now())
        try call("remember an upload") { try $0.rememberUploads([upload]) }
    }

    /// What is remembered for `destination` under `names`, by name (in reads of `namesPerRead` names).
    /// - Throws: `JobError` `store_error`.
    public func remembered(destination: String, names: [[UInt8]]) throws(JobError) -> [[UInt8]: RememberedFile] {
        var found: [[UInt8]: RememberedFile] = [:]
        var start = 0
        while start < names.count {
            let slice = Array(names[start..<min(names.count, start + Self.namesPerRead)])
            let read = try call("read the upload memory") {
                try $0.rememberedUploads(destination: destination, names: slice)
            }
            for upload in read { found[upload.name] = upload }
            start += Self.namesPerRead
        }
        return found
    }

    /// Forgets what is remembered for `destination` under `name`.
    /// - Throws: `JobError` `store_error`.
    public func forget(destination: String, name: [UInt8]) throws(JobError) {
        try call("forget an upload") { try $0.forgetUpload(destination: destination, name: name) }
    }

    private func call<R>(_ what: String, _ body: (any UploadMemoryStoring) throws -> R) throws(JobError) -> R {
        guard let store else {
            throw JobError(
                code: "store_error", message: "cannot \(what): this daemon's job store keeps no upload memory")
        }
        do {
            return try body(store)
        } catch {
            throw JobError(
                code: "store_error", message: "cannot \(what) for job \(jobID.prefix(8)): \(error); the job is retried",
                retryable: true)
        }
    }
}

/// A job host whose store keeps the upload memory (the scheduler's, over either store).
@LoopActor
protocol UploadMemoryHost: AnyObject {
    /// The store of the upload memory, or `nil` when it keeps none.
    var uploadMemoryStore: (any UploadMemoryStoring)? { get }
}

extension JobContext {
    /// The daemon's upload memory, asked for this job (see `UploadMemory`).
    public var uploadMemory: UploadMemory {
        UploadMemory(jobID: id, store: (host as? any UploadMemoryHost)?.uploadMemoryStore)
    }
}

extension Scheduler: UploadMemoryHost {
    /// Both stores keep it; another `JobStoring` (a test's) may not.
    var uploadMemoryStore: (any UploadMemoryStoring)? { store as? any UploadMemoryStoring }
}
