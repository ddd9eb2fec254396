import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// Blocking POSIX file operations of a directory upload. Everything here runs on the thread pool (through
/// `JobContext.runOnPool`) or, for submit-time checks, off the loop thread; never on the loop.
enum DirectoryIO {
    /// Bytes of one `pread` when hashing, and of one `pread`/`pwrite` when a copy cannot be made in the kernel.
    static let maxPieceBytes = 1 << 20
    /// Bytes written to a `.part` file between two starts of its writeback (`PartFile.copyPiece`).
    static let writebackBytes: Int64 = 8 << 20

    static func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }

    /// Whether `code` is an I/O condition another attempt may get past (disk full, quota, device error, too many
    /// open files).
    static func isTransientWriteError(_ code: Int32) -> Bool {
        [ENOSPC, EIO, EDQUOT, EINTR, EAGAIN, EMFILE, ENFILE].contains(code)
    }

    static func writeFailed(_ what: String, _ code: Int32) -> JobError {
        let transient = isTransientWriteError(code)
        return JobError(
            code: "write_failed",
            message: "\(what): \(errorText(code))"
                + (code == ENOSPC || code == EDQUOT
                    ? "; free some space at the destination, the upload resumes where it stopped"
                    : transient ? "; the upload will be retried" : ""),
            retryable: transient)
    }

    static func sourceError(_ path: BytePath, _ code: Int32) -> JobError {
        switch code {
        case ENOENT, ENOTDIR:
            return JobError(code: "source_missing", message: "source \(path) does not exist; check the path")
        case EACCES, EPERM:
            return JobError(
                code: "source_unreadable", message: "cannot read source \(path): permission denied; fix its permissions")
        default:
            return JobError(
                code: "source_unreadable", message: "cannot read source \(path): \(errorText(code))")
        }
    }

    /// An `errno` value.
    struct Errno: Error { var code: Int32 }

    /// `stat(2)` of `path`, following links: the identity and whether it is a regular file, or the errno.
    static func status(_ path: BytePath) -> Result<(SourceIdentity, mode: UInt32), Errno> {
        var info = stat()
        guard path.withCString({ stat($0, &info) }) == 0 else { return .failure(Errno(code: errno)) }
        return .success((identity(info), UInt32(info.st_mode)))
    }

    /// `lstat(2)` of `path`: its mode, or `nil` if it does not exist (or cannot be examined).
    static func linkMode(_ path: BytePath) -> UInt32? {
        var info = stat()
        guard path.withCString({ lstat($0, &info) }) == 0 else { return nil }
        return UInt32(info.st_mode)
    }

    static func identity(_ info: stat) -> SourceIdentity {
        SourceIdentity(
            size: Int64(info.st_size),
            modifiedNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
            inode: UInt64(info.st_ino), device: UInt64(info.st_dev),
            changedNanoseconds: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
    }

    static func isRegular(_ mode: UInt32) -> Bool { mode & UInt32(S_IFMT) == UInt32(S_IFREG) }
    static func isDirectory(_ mode: UInt32) -> Bool { mode & UInt32(S_IFMT) == UInt32(S_IFDIR) }
    static func isLink(_ mode: UInt32) -> Bool { mode & UInt32(S_IFMT) == UInt32(S_IFLNK) }

    /// `realpath(3)`, or `nil`.
    static func resolved(_ path: BytePath) -> BytePath? {
        guard let pointer = path.withCString({ realpath($0, nil) }) else { return nil }
        defer { free(pointer) }
        return BytePath(bytes: UnsafeBufferPointer(start: pointer, count: strlen(pointer)).map { UInt8(bitPattern: $0) })
    }

    /// Said after a source ended early while `stat` saw no change (the only time a `source_changed` message gives
    /// its detail): a `/sys` file says 4 096 bytes and holds a few.
    static let specialFileHint =
        " though its size, times and inode did not change: if it is a special file whose size is not its length (as in "
        + "/sys), copy it to a regular file and upload that"

    /// Whether the open file `fd` has a byte at offset `size`: it holds more than the `size` its `stat` gave (it
    /// grew, or it is a file whose size is not its length, as in `/proc`, where most files say 0 bytes).
    static func hasBytes(_ fd: Int32, past size: Int64) -> Result<Bool, Errno> {
        var byte: UInt8 = 0
        while true {
            let got = pread(fd, &byte, 1, off_t(size))
            if got >= 0 { return .success(got > 0) }
            if errno != EINTR { return .failure(Errno(code: errno)) }
        }
    }

    /// `fsync(2)` of a directory, so a rename in it survives a power loss. File systems that cannot sync
    /// directories (`EINVAL`) are accepted.
    static func syncDirectory(_ path: BytePath) throws(JobError) {
        let fd = path.withCString { open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { throw writeFailed("cannot open directory \(path) to sync it", errno) }
        defer { close(fd) }
        if fsync(fd) != 0, errno != EINVAL { throw writeFailed("fsync \(path)", errno) }
    }

    /// SHA-256 of bytes `[offset, offset + count)` of `path` fed into `hash`, reading with `buffer`.
    /// - Returns: the bytes hashed (less than `count` if the file is shorter).
    /// - Throws: `write_failed` if `path` cannot be opened or read.
    static func hashRange(
        of path: BytePath, from offset: Int64, count: Int64, into hash: SHA256, buffer: UnsafeMutableRawBufferPointer
    ) throws(JobError) -> Int64 {
        let fd = path.withCString { open($0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { throw writeFailed("cannot reopen \(path) to check what was written", errno) }
        defer { close(fd) }
        return try hashRange(of: fd, path: path, from: offset, count: count, into: hash, buffer: buffer)
    }

    /// SHA-256 of bytes `[offset, offset + count)` of the open file `fd` (named `path` in errors) fed into
    /// `hash`, reading with `buffer` (`pread`: the descriptor's position is not used).
    /// - Returns: the bytes hashed (less than `count` if the file is shorter).
    /// - Throws: `write_failed` if a read fails.
    static func hashRange(
        of fd: Int32, path: BytePath, from offset: Int64, count: Int64, into hash: SHA256,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(JobError) -> Int64 {
        var done: Int64 = 0
        while done < count {
            let want = Int(min(Int64(buffer.count), count - done))
            let got = pread(fd, buffer.baseAddress, want, off_t(offset + done))
            if got < 0 {
                if errno == EINTR { continue }
                throw writeFailed("cannot read back \(path)", errno)
            }
            if got == 0 { break }
            hash.update(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
            done += Int64(got)
        }
        return done
    }
}

extension DirectoryIO {
    /// Whether file `finalPath` is the finished copy of a `.part` file that was `node` and is gone: the `.part`
    /// at `partPath` does not exist, and `finalPath` is a regular file (not a link) with that inode and device and
    /// `size` bytes. A rename keeps the inode, and the upload renames a `.part` only once it holds every byte, so
    /// this is the file the job finished before a crash lost the checkpoint that would have said so.
    static func isFinished(finalPath: BytePath, partPath: BytePath, node: FileNode, size: Int64) -> Bool {
        var info = stat()
        guard partPath.withCString({ lstat($0, &info) }) != 0, errno == ENOENT,
            finalPath.withCString({ lstat($0, &info) }) == 0
        else { return false }
        return isRegular(UInt32(info.st_mode)) && UInt64(info.st_ino) == node.inode
            && UInt64(info.st_dev) == node.device && Int64(info.st_size) == size
    }
}
