import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// The landing of a batch of small files (`DirectoryLandingBatch`). Blocking: on the thread pool.
extension DirectoryIO {
    /// What `land` did: the first `landed` members are at their final paths, durably; `failure` is why the others
    /// (if any) were not.
    struct Landing: Sendable {
        /// Members landed, from the first, in order.
        var landed: Int
        /// Why the members after them did not land; `nil` when every member landed.
        var failure: JobError?
    }

    /// Lands `members`: one `syncfs(2)` per file system they are on (their bytes durable), then each `.part` file
    /// renamed to its final path in order (after checking it still is the file that was checked: same inode,
    /// same size), then a `syncfs` again (the renames durable, and any folder made for them).
    ///
    /// Stops at the first member that cannot land (its `.part` was replaced or changed: `write_failed`,
    /// retryable; a rename fails). When the second flush fails, none counts as landed: a renamed file that a
    /// power loss could take back is not claimed (the next attempt copies it again).
    static func land(_ members: [DirectoryLandingBatch.Member]) -> Landing {
        guard !members.isEmpty else { return Landing(landed: 0, failure: nil) }
        if let failure = syncFileSystems(of: members) { return Landing(landed: 0, failure: failure) }
        var renamed = 0
        var failure: JobError?
        for member in members {
            var info = stat()
            guard member.partPath.withCString({ lstat($0, &info) }) == 0 else {
                failure = writeFailed("cannot find \(member.partPath) to rename it", errno)
                break
            }
            guard UInt64(info.st_ino) == member.node.inode, UInt64(info.st_dev) == member.node.device,
                isRegular(UInt32(info.st_mode)), Int64(info.st_size) == member.record.bytes
            else {
                failure = JobError(
                    code: "write_failed",
                    message: "\(member.partPath) was replaced or changed before it was renamed into place: something "
                        + "else changed the partial file; the upload will be retried", retryable: true)
                break
            }
            guard member.partPath.withCString({ part in member.finalPath.withCString { rename(part, $0) } }) == 0 else {
                failure = writeFailed("cannot rename \(member.partPath) to \(member.finalPath)", errno)
                break
            }
            renamed += 1
        }
        if renamed > 0, let flushFailure = syncFileSystems(of: members.prefix(renamed)) {
            return Landing(landed: 0, failure: flushFailure)
        }
        return Landing(landed: renamed, failure: failure)
    }

    /// `syncfs(2)` of each file system that holds one of `members`' `.part` files (or, once renamed, final files:
    /// the same inode), reached through the first member on it that can be opened.
    /// - Returns: `write_failed` (retryable for a full disk or an I/O error) if a flush failed, or if no member on
    ///   a file system could be opened to reach it (too many open files, say): a batch is never taken as durable
    ///   without its flush; `nil` otherwise.
    private static func syncFileSystems(of members: some Collection<DirectoryLandingBatch.Member>) -> JobError? {
        var done: Set<UInt64> = []
        var unreached: (member: DirectoryLandingBatch.Member, errno: Int32)?
        for member in members where !done.contains(member.node.device) {
            // Before the rename the `.part` path names the file, after it the final path.
            let fd = [member.partPath, member.finalPath].lazy.map { path in
                path.withCString { open($0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
            }.first { $0 >= 0 }
            guard let fd else {
                unreached = unreached ?? (member, errno)
                continue
            }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0, UInt64(info.st_dev) == member.node.device else { continue }
            if let code = FileSystemSync.sync(containing: fd) {
                let folder = parent(of: member.finalPath) ?? member.finalPath
                return writeFailed("cannot flush the files written to \(folder)", code)
            }
            done.insert(member.node.device)
        }
        if let unreached, !done.contains(unreached.member.node.device) {
            return writeFailed("cannot open \(unreached.member.partPath) to flush the files written beside it", unreached.errno)
        }
        return nil
    }
}
