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
    /// Files compared per pool call, at most.
    static let filesPerCall = 256
    /// Bytes a pool call of comparisons may have to read, at most, counting both copies of each file whole (what
    /// it reads when neither is remembered): a call stays well within a stall timeout. A file larger than that
    /// goes in a call of its own, and if it must be read it is hashed in steps, each reported
    /// (`Verdict.hashInSteps`, `SteppedSHA256`).
    static let bytesPerCall: Int64 = 256 << 20

    /// What comparing one file found.
    enum Verdict: Sendable {
        /// Not the same bytes (or not a regular file of the size, or unreadable): the file is sent.
        case differs
        /// The same bytes, proven from the memory alone: nothing new to remember.
        case sameAsRemembered
        /// The same bytes, proven by reading (the SHA-256, hex, and the destination's `signature`): remembered for
        /// next time.
        case same(sha256: String, signature: String)
        /// A regular file of the size whose bytes must be read to tell, too large to read within one pool call:
        /// the loop hashes it in steps (`compareInSteps`). The destination's `signature`.
        case hashInSteps(signature: String)
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
    /// `filesPerCall` files or `bytesPerCall` bytes (`callEnd`), a larger file hashed in steps; a stop ends it
    /// between calls and steps, and each call's end is reported to `phase`.
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
            let range = start..<callEnd(from: start, sizes: identities.lazy.map(\.size))
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
            let inOneCall = range.count > 1 || 2 * identities[start].size <= bytesPerCall
            let verdicts = try await job.runOnPool { candidates.map { compare($0, inOneCall: inOneCall) } }
            for (offset, (index, found)) in zip(range, verdicts).enumerated() {
                var verdict = found
                if case .hashInSteps(let signature) = found {
                    verdict = try await compareInSteps(candidates[offset], signature: signature, in: job)
                }
                switch verdict {
                case .differs, .hashInSteps: continue
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

    /// The end of the pool call of comparisons that starts at file `start`: at most `filesPerCall` files whose
    /// sizes (`sizes`, aligned with the plan's files), counted twice, add up to at most `bytesPerCall` — or the
    /// one file at `start` if it alone is larger.
    static func callEnd<Sizes: Collection<Int64>>(
        from start: Int, sizes: Sizes, filesPerCall: Int = filesPerCall, bytesPerCall: Int64 = bytesPerCall
    ) -> Int where Sizes.Index == Int {
        var end = start
        var bytes: Int64 = 0
        while end < sizes.endIndex, end - start < filesPerCall {
            let cost = 2 * sizes[end]
            if end > start, bytes + cost > bytesPerCall { break }
            bytes += cost
            end += 1
        }
        return end
    }

    /// Whether `candidate.target` holds the bytes of `candidate.source` (see the type). Blocking. Unless
    /// `inOneCall`, a file whose bytes must be read to tell is left to the loop (`.hashInSteps`).
    static func compare(_ candidate: Candidate, inOneCall: Bool = true) -> Verdict {
        guard let identity = regularFile(candidate.target), identity.size == candidate.size,
            let signature = signature(identity)
        else { return .differs }
        guard candidate.size > 0 else { return .sameAsRemembered }
        let provenByStat = candidate.remembered?.signature == signature && candidate.knownSHA256 != nil
        if !inOneCall, !provenByStat { return .hashInSteps(signature: signature) }
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

    /// `compare` for a file too large to read within one pool call: the same rule, with each copy that must be
    /// read hashed in steps on the pool (`SteppedSHA256`), each step reported as the job's phase.
    /// - Throws: `JobStopped` when the job is stopped between steps.
    @LoopActor
    static func compareInSteps(
        _ candidate: Candidate, signature: String, in job: JobContext
    ) async throws -> Verdict {
        var ours = candidate.knownSHA256
        if ours == nil { ours = try await SteppedSHA256.hexDigest(of: candidate.source, flags: 0, in: job) }
        guard let ours else { return .differs }
        if let remembered = candidate.remembered, remembered.signature == signature {
            guard ours == remembered.sha256 else { return .differs }
            return candidate.knownSHA256 == nil ? .same(sha256: ours, signature: signature) : .sameAsRemembered
        }
        let theirs = try await SteppedSHA256.hexDigest(of: candidate.target, flags: O_NOFOLLOW, in: job)
        return theirs == ours ? .same(sha256: ours, signature: signature) : .differs
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
