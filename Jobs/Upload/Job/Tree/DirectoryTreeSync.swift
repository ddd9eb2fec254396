import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// "Send only what changed" for a folder upload to `file://`: before the first attempt copies anything, each
/// listed file whose destination `DIR/NAME` is a regular file (not a link) of the same size is compared, and when
/// the destination holds the same bytes the file is left out of the job (`already_there`), so uploading the same
/// folder again copies nothing, and after adding or editing files copies only those. `--again` skips this check.
/// Nothing at the destination is ever deleted.
///
/// How the bytes are compared, reading as little as it can (`TreeSyncMemory`): the destination is taken to hold
/// what the upload memory says this daemon wrote there when its `stat` (device, inode, size, mtime, ctime: its
/// `signature`) is the one remembered — any write to it since, by anyone, moves its ctime — else it is read and
/// hashed; the source's SHA-256 is the remembered one when its `stat` is the remembered source's, else it is read
/// and hashed. A re-run of an unchanged folder therefore reads no file: one `lstat` of each destination file.
enum DirectoryTreeSync {
    /// Files compared per pool call.
    static let filesPerCall = 256

    /// What comparing one file found.
    enum Verdict: Sendable {
        /// Not the same bytes (or not a regular file of the size, or unreadable): the file is sent.
        case differs
        /// The same bytes, proven from the memory alone: nothing new to remember.
        case sameAsRemembered
        /// The same bytes, proven by reading (the SHA-256, hex, and the destination's `signature`): remembered for
        /// next time.
        case same(sha256: String, signature: String)
    }

    /// One file to compare (a value handed to the pool).
    struct Candidate: Sendable {
        let source: BytePath
        let target: BytePath
        let size: Int64
        /// The source's SHA-256 from the stat cache, `nil` if it must be read.
        let knownSHA256: String?
        /// The destination's remembered `signature` and SHA-256, if any.
        let remembered: (signature: String, sha256: String)?
    }

    /// Takes out of `plan` (and `identities`, aligned with its files) each file that `directory` already holds
    /// with the same bytes, counting them in `plan.unchangedCount` / `unchangedBytes`. One pool call per
    /// `filesPerCall` files; a stop ends it between calls, and each call's end is reported to `phase`.
    /// - Throws: `JobStopped` when stopped; `JobError` `store_error` when the upload memory cannot be read.
    @LoopActor
    static func leaveOutUnchanged(
        _ plan: inout UploadTreePlan, identities: inout [SourceIdentity], directory: BytePath,
        params: UploadJob.Params, attemptStart: Double, phase: UploadListingPhase, in job: JobContext
    ) async throws {
        var memory = try TreeSyncMemory.load(
            plan, destination: .directory(path: directory), params: params, attemptStart: attemptStart, in: job)
        var same: [Int] = []
        var start = 0
        while start < plan.files.count {
            try job.checkCancellation()
            let range = start..<min(plan.files.count, start + filesPerCall)
            let candidates = range.map { index in
                let row = memory.remembered(index)
                return Candidate(
                    source: plan.files[index], target: BytePath.join(directory, plan.names[index]),
                    size: identities[index].size,
                    knownSHA256: memory.knownSHA256(index, path: plan.files[index], identity: identities[index]),
                    remembered: row.flatMap { row in
                        row.state.sha256.flatMap { row.location.isEmpty ? nil : (row.location, $0) }
                    })
            }
            let verdicts = try await job.runOnPool { candidates.map(compare) }
            for (index, verdict) in zip(range, verdicts) {
                switch verdict {
                case .differs: continue
                case .sameAsRemembered:
                    same.append(index)
                    memory.vouched += 1
                case .same(let sha256, let signature):
                    same.append(index)
                    memory.prove(
                        index, path: plan.files[index], identity: identities[index], sha256: sha256,
                        location: signature)
                }
            }
            start = range.upperBound
            phase.reached(start, in: job)
        }
        memory.write(in: job)
        plan.leaveOut(same, identities: &identities)
    }

    /// Whether `candidate.target` holds the bytes of `candidate.source` (see the type). Blocking.
    static func compare(_ candidate: Candidate) -> Verdict {
        guard let identity = regularFile(candidate.target), identity.size == candidate.size,
            let signature = signature(identity)
        else { return .differs }
        guard candidate.size > 0 else { return .sameAsRemembered }
        if let remembered = candidate.remembered, remembered.signature == signature {
            // The destination is what was written there, untouched since.
            let ours = candidate.knownSHA256 ?? sha256(of: candidate.source, flags: 0)
            guard ours == remembered.sha256 else { return .differs }
            return candidate.knownSHA256 == nil ? .same(sha256: remembered.sha256, signature: signature) : .sameAsRemembered
        }
        guard let theirs = sha256(of: candidate.target, flags: O_NOFOLLOW),
            let ours = candidate.knownSHA256 ?? sha256(of: candidate.source, flags: 0), theirs == ours
        else { return .differs }
        return .same(sha256: ours, signature: signature)
    }

    /// The `lstat` of `path` when it is a regular file (not a link), else `nil`. Blocking.
    static func regularFile(_ path: BytePath) -> SourceIdentity? {
        var info = stat()
        guard path.withCString({ lstat($0, &info) }) == 0, DirectoryIO.isRegular(UInt32(info.st_mode)) else {
            return nil
        }
        return DirectoryIO.identity(info)
    }

    /// A destination file's `stat` as the upload memory keeps it: `device:inode:size:mtime_ns:ctime_ns`.
    static func signature(_ identity: SourceIdentity) -> String? {
        guard let changed = identity.changedNanoseconds else { return nil }
        return "\(identity.device):\(identity.inode):\(identity.size):\(identity.modifiedNanoseconds):\(changed)"
    }

    /// The `signature` of the regular file at `path`, or `nil` when it is not one or (with `changedBy`,
    /// nanoseconds since the Unix epoch) its ctime is later than that. Blocking.
    static func signature(of path: BytePath, changedBy: Int64) -> String? {
        guard let identity = regularFile(path), let changed = identity.changedNanoseconds, changed <= changedBy else {
            return nil
        }
        return signature(identity)
    }

    /// SHA-256 (hex) of the file at `path` (opened with `flags` added), or `nil` if it cannot be read. Blocking.
    static func sha256(of path: BytePath, flags: Int32) -> String? {
        let fd = path.withCString { open($0, O_RDONLY | O_CLOEXEC | flags) }
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let hash = SHA256()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: DirectoryIO.maxPieceBytes, alignment: 4096)
        defer { buffer.deallocate() }
        while true {
            let got = read(fd, buffer.baseAddress, buffer.count)
            if got < 0, errno == EINTR { continue }
            guard got >= 0 else { return nil }
            if got == 0 { return hash.hexDigest }
            hash.update(UnsafeRawBufferPointer(rebasing: buffer[..<got]))
        }
    }
}
