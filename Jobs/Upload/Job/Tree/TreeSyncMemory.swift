import TrailbookEngine
import TrailbookLoop

/// The upload memory (`JobContext.uploadMemory`) as a folder upload's "send only what changed" reads and writes
/// it: per file, what the destination was last known to hold under its name (SHA-256 and the destination's proof
/// of it: `RememberedFile.location`) and the `stat` of the source it was made from (`RememberedSource`, the stat
/// cache).
///
/// The stat cache's rule: a source whose path, device, inode, size, mtime and ctime are the ones remembered is
/// taken to hold the remembered SHA-256 without being read; any difference reads and hashes it. A `stat` is only
/// remembered when its ctime is at least `settleSeconds` older than the start of the attempt that read the file
/// (as git's index treats "racily clean" entries): a file written in the same clock tick as it was read could
/// otherwise change again without its ctime moving.
@LoopActor
struct TreeSyncMemory {
    /// A source's ctime must be this much older than the attempt's start for its `stat` to be remembered, in
    /// seconds: more than a coarse file-system clock's tick (Linux: one jiffy; 1 s or 2 s on some file systems).
    nonisolated static let settleSeconds: Double = 2

    let memory: UploadMemory
    /// The destination as the memory names it (`UploadDestination.memoryKey`).
    let destination: String
    /// The memory's name of each file of the plan, aligned with `plan.files`.
    let keys: [[UInt8]]
    /// What is remembered, by the memory's name.
    let rows: [[UInt8]: RememberedFile]
    /// When the attempt started (Unix seconds): the stat cache's bound (see `settleSeconds`).
    let attemptStart: Double
    /// Rows proven while comparing, written by `write`.
    private(set) var proven: [RememberedFile] = []
    /// Files found at the destination without reading them: the memory vouched for both sides.
    var vouched = 0
    /// Files found at the destination after reading and hashing them (the stat cache could not vouch).
    var read = 0

    /// Reads what is remembered for `plan`'s files at `destination` (in reads of `UploadMemory.namesPerRead`
    /// names). With no memory (a test host's store) nothing is remembered. Rows older than
    /// `UploadMemory.keptSeconds` are forgotten once per listing, before its first page (`forgetStale`).
    /// - Throws: `JobError` `store_error`.
    static func load(
        _ plan: UploadTreePlan, destination: UploadDestination, params: UploadJob.Params, attemptStart: Double,
        in job: JobContext
    ) throws(JobError) -> TreeSyncMemory {
        let memory = job.uploadMemory
        let place = destination.memoryKey(s3Endpoint: UploadJob.s3IdentityEndpoint(params))
        let keys = plan.names.map { place.name($0) }
        var rows: [[UInt8]: RememberedFile] = [:]
        if memory.isKept {
            rows = try memory.remembered(destination: place.destination, names: keys)
        }
        return TreeSyncMemory(
            memory: memory, destination: place.destination, keys: keys, rows: rows, attemptStart: attemptStart)
    }

    /// Forgets the upload memory's rows older than `UploadMemory.keptSeconds` (one store statement), logging how
    /// many; called once per listing, before its first page is compared. Nothing without a memory.
    /// - Returns: how many rows were forgotten.
    /// - Throws: `JobError` `store_error`.
    @discardableResult
    static func forgetStale(in job: JobContext) throws(JobError) -> Int {
        let memory = job.uploadMemory
        guard memory.isKept else { return 0 }
        let forgotten = try memory.forgetOlder()
        if forgotten > 0 {
            let days = Int(UploadMemory.keptSeconds / 86_400)
            job.log(.info, "forgot \(forgotten) uploads remembered more than \(days) days ago")
        }
        return forgotten
    }

    /// What is remembered for file `index` of the plan.
    func remembered(_ index: Int) -> RememberedFile? { rows[keys[index]] }

    /// The remembered SHA-256 (hex) of file `index` at `path`, when its `identity` is the remembered source's:
    /// the file need not be read. `nil` when it must be.
    func knownSHA256(_ index: Int, path: BytePath, identity: SourceIdentity) -> String? {
        guard let row = remembered(index), let sha256 = row.state.sha256, row.size == identity.size,
            let source = Self.source(path, identity), row.source == source
        else { return nil }
        return sha256
    }

    /// Notes that the destination holds file `index` (`size` bytes with `sha256`, proven by `location`) and that
    /// its source at `path` had `identity` before it was read; written by `write`.
    mutating func prove(_ index: Int, path: BytePath, identity: SourceIdentity, sha256: String, location: String) {
        read += 1
        let source = Self.source(path, identity).flatMap { $0.changedNanoseconds < settledBefore ? $0 : nil }
        proven.append(
            RememberedFile(
                destination: destination, name: keys[index], size: identity.size, state: .complete(sha256: sha256),
                location: location, jobID: memory.jobID, uploadedAt: 0, source: source))
    }

    /// Logs how the files already there were found (`vouched`, `read`) and writes the rows `prove` noted, in one
    /// transaction; a refused write is logged (the files are then compared by reading them again next time).
    func write(in job: JobContext) {
        if vouched + read > 0 {
            job.log(
                .info,
                "already at the destination: \(vouched) files known from the upload memory without reading them, "
                    + "\(read) read and hashed")
        }
        guard memory.isKept, !proven.isEmpty else { return }
        do throws(JobError) {
            try memory.remember(proven)
        } catch {
            job.log(.warning, "the upload memory could not record \(proven.count) files compared: \(error.message)")
        }
    }

    /// The ctime (nanoseconds) a remembered source must be older than.
    var settledBefore: Int64 { Self.settledBefore(attemptStart) }

    /// The ctime (nanoseconds) a source must be older than to be remembered by an attempt started at `start`.
    nonisolated static func settledBefore(_ start: Double) -> Int64 { Int64((start - settleSeconds) * 1e9) }

    /// `identity` of the file at `path` as the memory keeps it; `nil` without a ctime (an old checkpoint's).
    nonisolated static func source(_ path: BytePath, _ identity: SourceIdentity) -> RememberedSource? {
        guard let changed = identity.changedNanoseconds else { return nil }
        return RememberedSource(
            path: path.bytes, device: identity.device, inode: identity.inode, size: identity.size,
            modifiedNanoseconds: identity.modifiedNanoseconds, changedNanoseconds: changed)
    }
}

/// Where a destination's files are in the upload memory.
struct UploadMemoryPlace: Sendable {
    /// The memory's destination: `file://` (names are whole paths), `s3://BUCKET` (with ` at ENDPOINT` for a
    /// server other than AWS; names are whole keys) or the tus endpoint (names are the `filename` metadata).
    let destination: String
    /// What goes before a file's destination name in the memory's name (the directory and a `/`, the prefix).
    let namePrefix: [UInt8]

    /// The memory's name of a file named `name` at the destination.
    func name(_ name: BytePath) -> [UInt8] { namePrefix + name.bytes }
}

extension UploadDestination {
    /// Where this destination's files are in the upload memory; `s3Endpoint` is the server of an `s3://`
    /// destination (`nil`: AWS).
    func memoryKey(s3Endpoint: String?) -> UploadMemoryPlace {
        switch self {
        case .directory(let path):
            return UploadMemoryPlace(destination: "file://", namePrefix: BytePath.join(path, "").bytes)
        case .s3(let bucket, let prefix):
            return UploadMemoryPlace(
                destination: "s3://\(bucket)" + (s3Endpoint.map { " at \($0)" } ?? ""), namePrefix: Array(prefix.utf8))
        case .tus(let endpoint):
            return UploadMemoryPlace(destination: endpoint, namePrefix: [])
        }
    }
}

extension UploadJob {
    /// The S3 server `params` names, as the upload memory and the duplicate check tell servers apart.
    static func s3IdentityEndpoint(_ params: Params) -> String? {
        S3Options.identityEndpoint(params.s3, environment: ProcessEnvironment.current())
    }
}
