import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// "Send only what changed" for a folder upload to `file://`: before the first attempt copies anything, each
/// listed file whose destination `DIR/NAME` is a regular file of the same size is hashed on both sides; when the
/// SHA-256 is the same the file is left out of the job (`already_there`), so uploading the same folder again
/// copies nothing, and after adding or editing files copies only those. `--again` skips this check. Nothing at
/// the destination is ever deleted.
enum DirectoryTreeSync {
    /// Takes out of `plan` (and `identities`, aligned with its files) each file that `directory` already holds
    /// with the same bytes, counting them in `plan.unchangedCount` / `unchangedBytes`. One pool call per
    /// candidate file; a stop ends it between files.
    /// - Throws: `JobStopped` when stopped.
    @LoopActor
    static func leaveOutUnchanged(
        _ plan: inout UploadTreePlan, identities: inout [SourceIdentity], directory: BytePath, in job: JobContext
    ) async throws {
        var same: [Int] = []
        for index in plan.files.indices {
            try job.checkCancellation()
            let source = plan.files[index]
            let target = BytePath.join(directory, plan.names[index])
            let size = identities[index].size
            if try await job.runOnPool({ sameBytes(source, target, size: size) }) { same.append(index) }
        }
        plan.leaveOut(same, identities: &identities)
    }

    /// Whether `target` is a regular file (not a link) of `size` bytes with the bytes of `source`. Blocking.
    static func sameBytes(_ source: BytePath, _ target: BytePath, size: Int64) -> Bool {
        guard let mode = DirectoryIO.linkMode(target), DirectoryIO.isRegular(mode),
            case .success(let (identity, _)) = DirectoryIO.status(target), identity.size == size
        else { return false }
        guard size > 0 else { return true }
        guard let theirs = sha256(of: target, flags: O_NOFOLLOW), let ours = sha256(of: source, flags: 0) else {
            return false
        }
        return theirs == ours
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
