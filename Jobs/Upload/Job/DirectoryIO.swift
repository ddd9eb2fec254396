import Dispatch
import Synchronization
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

    /// Whether `code` is an I/O condition another attempt may get past (disk full, quota, device error).
    static func isTransientWriteError(_ code: Int32) -> Bool {
        code == ENOSPC || code == EIO || code == EDQUOT || code == EINTR || code == EAGAIN
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

    /// The checks of a directory upload that need the file system, for the sources at `indices`.
    ///
    /// Sources: exist (`source_missing`), are regular files (`source_not_regular`), are readable
    /// (`source_unreadable`). Destination: exists (`destination_missing`), is a directory
    /// (`destination_not_directory`), is writable (`destination_not_writable`). Names: `DIR/NAME` must not be a
    /// link that resolves outside `DIR` or a directory (`bad_name`). (The job's `.part` file, named per job, is
    /// opened with `O_NOFOLLOW`, so a link put there fails the write instead of being followed.)
    /// - Returns: the identities of the checked sources, in `indices` order.
    static func preflight(files: [BytePath], names: [BytePath], directory: BytePath, indices: Range<Int>)
        throws(JobError) -> [SourceIdentity]
    {
        let identities = try sourceIdentities(files: files, indices: indices)
        try checkDestination(names: names, directory: directory, indices: indices, files: files)
        return identities
    }

    /// The source checks of `preflight` alone (for uploads that go to a server): each source at `indices` exists
    /// (`source_missing`), is a regular file (`source_not_regular`) and is readable (`source_unreadable`).
    /// - Returns: their identities, in `indices` order.
    static func sourceIdentities(files: [BytePath], indices: Range<Int>) throws(JobError) -> [SourceIdentity] {
        var identities: [SourceIdentity] = []
        for index in indices {
            let path = files[index]
            switch status(path) {
            case .failure(let error): throw sourceError(path, error.code)
            case .success(let (identity, mode)):
                guard isRegular(mode) else {
                    throw JobError(
                        code: "source_not_regular",
                        message: "source \(path) is not a regular file (a directory, device or pipe); "
                            + "upload the files themselves")
                }
                guard path.withCString({ access($0, R_OK) }) == 0 else { throw sourceError(path, errno) }
                try checkLength(of: path, size: identity.size)
                identities.append(identity)
            }
        }
        return identities
    }

    /// Refuses a source that holds more than its `stat` size (`source_not_regular`): a `/proc` file says 0 bytes
    /// and would be uploaded empty (a `/sys` file that says more than it holds fails at its end instead).
    private static func checkLength(of path: BytePath, size: Int64) throws(JobError) {
        let fd = path.withCString { open($0, O_RDONLY | O_NONBLOCK | O_CLOEXEC) }
        guard fd >= 0 else { throw sourceError(path, errno) }
        defer { close(fd) }
        switch hasBytes(fd, past: size) {
        case .failure(let error): throw sourceError(path, error.code)
        case .success(false): return
        case .success(true):
            throw JobError(
                code: "source_not_regular",
                message: "source \(path) holds more than the \(size) bytes its size says: a special file (as in /proc or "
                    + "/sys) or one being written right now; copy it to a regular file and upload that")
        }
    }

    private static func checkDestination(names: [BytePath], directory: BytePath, indices: Range<Int>, files: [BytePath])
        throws(JobError)
    {
        switch status(directory) {
        case .failure(let error):
            let code = error.code
            if code == ENOENT || code == ENOTDIR {
                throw JobError(
                    code: "destination_missing",
                    message: "destination directory \(directory) does not exist; create it first (mkdir -p)")
            }
            throw JobError(
                code: "destination_not_writable",
                message: "cannot examine destination directory \(directory): \(errorText(code))")
        case .success(let (_, mode)):
            guard isDirectory(mode) else {
                throw JobError(
                    code: "destination_not_directory",
                    message: "destination \(directory) is not a directory; give the directory to upload into")
            }
        }
        guard directory.withCString({ access($0, W_OK | X_OK) }) == 0 else {
            throw JobError(
                code: "destination_not_writable",
                message: "cannot write into destination directory \(directory): \(errorText(errno)); "
                    + "fix its permissions or choose another directory")
        }
        guard let root = resolved(directory) else {
            throw JobError(
                code: "destination_missing", message: "cannot resolve destination directory \(directory)")
        }
        for index in indices {
            let name = names[index]
            let final = BytePath.join(root, name)
            if let mode = linkMode(final) {
                if isLink(mode) {
                    let inside = resolved(final).map { $0.bytes.starts(with: BytePath.join(root, "").bytes) } ?? false
                    guard inside else {
                        throw JobError(
                            code: "bad_name",
                            message: "\(final) is a symbolic link that leads outside the destination directory; "
                                + "remove it or choose another destination")
                    }
                } else if isDirectory(mode) {
                    throw JobError(
                        code: "bad_name",
                        message: "\(final) is a directory and cannot be replaced by the upload of \(files[index]); "
                            + "move it away or choose another destination")
                }
            }
        }
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

/// The open files of one file's directory upload: the source, the `.part` file, and the running SHA-256 of the
/// `.part` file's bytes.
///
/// Disk speed (issue 14): each piece (at most 8 MiB) is copied inside the kernel with `copy_file_range(2)`
/// (`KernelCopy`), page cache to page cache, as `cp` does, so the bytes never cross into user space to be
/// written. The SHA-256 is computed from the `.part` file itself, on a serial queue of its own, while the next
/// pieces are copied: each copied range is read back from the destination's page cache (still hot) in 1 MiB
/// reads and hashed, then its writeback is started (`posix_fadvise(POSIX_FADV_DONTNEED)`, which on Linux starts
/// writeback of the range's dirty pages without waiting and drops the clean ones), so the disk writes while the
/// next pieces are copied and the `fsync` at a chunk end finds little left to do. The hash so covers the bytes
/// the destination holds, not a buffer on their way there. Where the kernel cannot copy between the two files
/// (`KernelCopy.CopyError.isUnsupported`: another file system on an older kernel, a file system without the call)
/// or the call fails, the piece is copied with `pread`/`pwrite` through a 1 MiB buffer instead, which also tells
/// a read error of the source from a write error of the destination. The `fsync` still precedes every checkpoint.
///
/// Used from one pool call at a time, each awaited by the loop before the next, and from its hashing queue:
/// `@unchecked Sendable`, the state the two share (`hashFailure`) behind a mutex. Closes its descriptors when
/// released.
final class PartFile: @unchecked Sendable {
    let sourcePath: BytePath
    let partPath: BytePath
    /// The SHA-256 of the `.part` file's bytes copied so far; read it only after `finishHashing()`.
    let hash = SHA256()
    /// The buffer `rehash` reads with; used by the hashing queue otherwise (`rehash` drains it first).
    let buffer: UnsafeMutableRawBufferPointer
    /// The buffer of the `pread`/`pwrite` fallback copy (pool thread only).
    private let copyBuffer: UnsafeMutableRawBufferPointer
    /// The end of the range last handed to writeback (`posix_fadvise`); hashing queue only.
    private var advisedUpTo: Int64 = 0
    /// Whether `copy_file_range` was refused for these two files; then every piece goes through `copyBuffer`.
    private(set) var kernelCopyUnsupported = false
    /// Bytes copied inside the kernel, and through `copyBuffer`, so far (pool thread only; tests read them).
    private(set) var kernelCopiedBytes: Int64 = 0
    private(set) var bufferCopiedBytes: Int64 = 0
    private let hashing = DispatchQueue(label: "trailbook-jobs.upload.sha256")
    /// Pieces copied and not yet hashed, at most 4 (32 MiB): the copy waits for the hash rather than run ahead
    /// without bound, so a stop or a failure waits at most that long for the hashing queue to let go of the file.
    private let hashSlots = DispatchSemaphore(value: 4)
    /// The first failure of the hashing queue (reading the `.part` file back), thrown by the next `copy` or
    /// `finishHashing`.
    private let hashFailure = Mutex<JobError?>(nil)
    private let source: Int32
    private let part: Int32

    /// Bytes one `copy_file_range` call copies at most: a stop is seen between two of them.
    static let kernelPieceBytes = 8 << 20

    /// Opens `sourcePath` for reading and `partPath` for reading and writing (`O_CREAT | O_RDWR`, mode 0644, never
    /// through a symbolic link), checks the source still is `expected` (`source_changed`) and returns the `.part`
    /// file's current length with it.
    static func open(sourcePath: BytePath, partPath: BytePath, expected: SourceIdentity) throws(JobError)
        -> (PartFile, partLength: Int64)
    {
        let source = sourcePath.withCString { Glibc.open($0, O_RDONLY | O_CLOEXEC) }
        guard source >= 0 else { throw DirectoryIO.sourceError(sourcePath, errno) }
        var info = stat()
        guard fstat(source, &info) == 0 else {
            let code = errno
            close(source)
            throw DirectoryIO.sourceError(sourcePath, code)
        }
        let identity = DirectoryIO.identity(info)
        guard identity == expected else {
            close(source)
            throw PartFile.changed(sourcePath, expected: expected, now: identity)
        }
        let part = partPath.withCString { Glibc.open($0, O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0o644) }
        guard part >= 0 else {
            let code = errno
            close(source)
            switch code {
            case ELOOP:
                throw JobError(
                    code: "bad_name",
                    message: "\(partPath) is a symbolic link; remove it, uploads never write through links")
            case EACCES, EPERM, EROFS:
                throw JobError(
                    code: "destination_not_writable",
                    message: "cannot create \(partPath): \(DirectoryIO.errorText(code)); fix the directory's permissions")
            case ENOENT, ENOTDIR:
                throw JobError(
                    code: "destination_missing", message: "cannot create \(partPath): the destination directory is gone")
            default:
                throw DirectoryIO.writeFailed("cannot create \(partPath)", code)
            }
        }
        guard fstat(part, &info) == 0 else {
            let code = errno
            close(source)
            close(part)
            throw DirectoryIO.writeFailed("stat \(partPath)", code)
        }
        let node = FileNode(inode: UInt64(info.st_ino), device: UInt64(info.st_dev))
        return (
            PartFile(sourcePath: sourcePath, partPath: partPath, source: source, part: part, node: node),
            Int64(info.st_size)
        )
    }

    /// The `.part` file's inode and device (a rename into place keeps them).
    let node: FileNode

    private init(sourcePath: BytePath, partPath: BytePath, source: Int32, part: Int32, node: FileNode) {
        self.sourcePath = sourcePath
        self.partPath = partPath
        self.source = source
        self.part = part
        self.node = node
        buffer = .allocate(byteCount: DirectoryIO.maxPieceBytes, alignment: 4096)
        copyBuffer = .allocate(byteCount: DirectoryIO.maxPieceBytes, alignment: 4096)
    }

    // No wait for the hashing queue: each block on it holds the file, so none is left by the time this runs (and
    // this may run on that queue, when its last block lets go of the file after a stopped job did).
    deinit {
        close(source)
        close(part)
        buffer.deallocate()
        copyBuffer.deallocate()
    }

    /// Waits until every piece copied so far is in `hash`.
    /// - Throws: `write_failed` (retryable) if the `.part` file could not be read back or came up short.
    func finishHashing() throws(JobError) {
        drainHashing()
        try throwHashFailure()
    }

    /// Waits until the hashing queue is idle, whatever it found (a failed upload lets go of the file after this).
    func drainHashing() {
        hashing.sync {}
    }

    private func throwHashFailure() throws(JobError) {
        if let failure = hashFailure.withLock({ $0 }) { throw failure }
    }

    /// The `source_changed` error for `path`, naming each field that differs between `expected` and `now` with
    /// both values (or, when `stat` sees no difference, `detail`: how the change showed, e.g. an early end).
    static func changed(_ path: BytePath, expected: SourceIdentity, now: SourceIdentity, detail: String? = nil)
        -> JobError
    {
        let changes = expected.changes(to: now)
        let what = changes.isEmpty ? detail ?? "its content changed" : changes
        return JobError(
            code: "source_changed",
            message: "source \(path) changed since the upload started (\(what)); the upload stopped before its "
                + "last byte and the partial copy is removed. Submit the upload again to send the new version")
    }

    /// Cuts the `.part` file to `length` bytes.
    func truncate(to length: Int64) throws(JobError) {
        guard ftruncate(part, off_t(length)) == 0 else { throw DirectoryIO.writeFailed("truncate \(partPath)", errno) }
    }

    /// Hashes bytes `[offset, offset + count)` already in the `.part` file (resuming).
    /// - Returns: the bytes hashed; less than `count` if the file is shorter.
    func rehash(from offset: Int64, count: Int64) throws(JobError) -> Int64 {
        try finishHashing()
        return try DirectoryIO.hashRange(of: partPath, from: offset, count: count, into: hash, buffer: buffer)
    }

    /// Copies up to `count` bytes at `offset` from the source to the `.part` file in pieces of at most 8 MiB, and
    /// hands them to the hashing queue: in one pool call, so a fast disk is not held up by a trip through the loop
    /// per piece. Returns early once `stop` is raised (the job is being stopped: it stops within a piece) or
    /// `timeLimit` seconds have passed (the loop reports progress between calls).
    /// - Returns: the bytes copied (less than `count` at the source's end, on a stop or at the time limit), and
    ///   whether the source ended before `count` bytes.
    /// - Throws: as `copyPiece`, and `write_failed` (retryable) if hashing an earlier piece failed.
    func copy(at offset: Int64, count: Int64, stop: CopyStop, timeLimit: Double) throws(JobError) -> Copied {
        try throwHashFailure()
        let started = Timestamp.monotonic()
        var done: Int64 = 0
        while done < count {
            let want = Int(min(Int64(Self.kernelPieceBytes), count - done))
            let got = try copyPiece(at: offset + done, count: want)
            done += Int64(got)
            if got < want { return Copied(bytes: done, sourceEnded: true) }
            if stop.isRaised || Timestamp.monotonic() - started >= timeLimit { break }
        }
        return Copied(bytes: done, sourceEnded: false)
    }

    /// What one `copy` did.
    struct Copied: Sendable {
        /// Bytes copied.
        var bytes: Int64
        /// The source ended before the bytes asked for (it was truncated or replaced since it was examined).
        var sourceEnded: Bool
    }

    /// Copies up to `count` bytes at `offset` from the source to the `.part` file (in the kernel, or through
    /// `copyBuffer` where it cannot), then queues the range for hashing.
    /// - Returns: the bytes copied; less than `count` only at the source's end.
    /// - Throws: `source_unreadable` on a read error; `write_failed` on a write error (retryable for ENOSPC,
    ///   EDQUOT, EIO).
    func copyPiece(at offset: Int64, count: Int) throws(JobError) -> Int {
        var copied = 0
        var sourceEnded = false
        // Unsupported: through user space for good. Any other failure: this piece through user space, which names
        // the side that failed (the source's read or the destination's write).
        var throughBuffer = kernelCopyUnsupported
        while copied < count, !throughBuffer, !sourceEnded {
            let at = offset + Int64(copied)
            switch KernelCopy.copy(from: source, at: at, to: part, at: at, count: count - copied) {
            case .success(0): sourceEnded = true
            case .success(let got):
                copied += got
                kernelCopiedBytes += Int64(got)
            case .failure(let error):
                if error.isUnsupported { kernelCopyUnsupported = true }
                throughBuffer = true
            }
        }
        if copied < count, !sourceEnded { copied += try copyThroughBuffer(at: offset + Int64(copied), count: count - copied) }
        queueHash(from: offset, count: copied)
        return copied
    }

    /// The fallback copy: `pread` from the source and `pwrite` to the `.part` file, 1 MiB at a time.
    /// - Returns: the bytes copied; less than `count` only at the source's end.
    private func copyThroughBuffer(at offset: Int64, count: Int) throws(JobError) -> Int {
        var done = 0
        while done < count {
            let want = min(copyBuffer.count, count - done)
            var read = 0
            while read < want {
                let got = pread(source, copyBuffer.baseAddress! + read, want - read, off_t(offset + Int64(done + read)))
                if got < 0 {
                    if errno == EINTR { continue }
                    throw DirectoryIO.sourceError(sourcePath, errno)
                }
                if got == 0 { break }
                read += got
            }
            var written = 0
            while written < read {
                let put = pwrite(
                    part, copyBuffer.baseAddress! + written, read - written, off_t(offset + Int64(done + written)))
                if put < 0 {
                    if errno == EINTR { continue }
                    throw DirectoryIO.writeFailed("cannot write \(partPath)", errno)
                }
                written += put
            }
            done += read
            bufferCopiedBytes += Int64(read)
            if read < want { break }
        }
        return done
    }

    /// Queues bytes `[offset, offset + count)` of the `.part` file for hashing: read back with `pread` (from the
    /// page cache the copy just filled) and fed to `hash` in order, then handed to writeback. A failed or short
    /// read is kept in `hashFailure`; nothing is hashed after it.
    private func queueHash(from offset: Int64, count: Int) {
        guard count > 0 else { return }
        hashSlots.wait()
        hashing.async { [self] in
            defer { hashSlots.signal() }
            guard hashFailure.withLock({ $0 == nil }) else { return }
            do throws(JobError) {
                let got = try DirectoryIO.hashRange(
                    of: part, path: partPath, from: offset, count: Int64(count), into: hash, buffer: buffer)
                guard got == Int64(count) else {
                    throw JobError(
                        code: "write_failed",
                        message: "\(partPath) is shorter than what was copied into it (something else changed it); "
                            + "the upload will be retried", retryable: true)
                }
            } catch {
                hashFailure.withLock { $0 = $0 ?? error }
                return
            }
            // Start writing the pages hashed since the last advice to disk now, 8 MiB at a time; the fsync at
            // the chunk end waits for what is left. After the hash, so no page is dropped before it was read.
            // Advice only: its result does not matter.
            let end = offset + Int64(count)
            if end - advisedUpTo >= DirectoryIO.writebackBytes || end < advisedUpTo {
                let from = min(advisedUpTo, offset)
                _ = posix_fadvise(part, off_t(from), off_t(end - from), POSIX_FADV_DONTNEED)
                advisedUpTo = end
            }
        }
    }

    /// The source's identity now, through the open descriptor.
    /// - Throws: `source_unreadable` if `fstat` fails.
    func sourceIdentity() throws(JobError) -> SourceIdentity {
        var info = stat()
        guard fstat(source, &info) == 0 else { throw DirectoryIO.sourceError(sourcePath, errno) }
        return DirectoryIO.identity(info)
    }

    /// `fsync(2)` of the `.part` file: its bytes are durable once this returns.
    func sync() throws(JobError) {
        guard fsync(part) == 0 else { throw DirectoryIO.writeFailed("fsync \(partPath)", errno) }
    }

    /// Checks that the source still is `expected`, through the open descriptor (modified in place) and the path
    /// (replaced or removed).
    /// - Throws: `source_changed`, `source_missing`, `source_unreadable`.
    func checkSource(is expected: SourceIdentity) throws(JobError) {
        // The path first: a file replaced (`mv` over it) shows as another inode there, where the open descriptor
        // shows only the ctime its unlinking changed.
        switch DirectoryIO.status(sourcePath) {
        case .failure(let error): throw DirectoryIO.sourceError(sourcePath, error.code)
        case .success(let (now, _)):
            guard now == expected else { throw Self.changed(sourcePath, expected: expected, now: now) }
        }
        var info = stat()
        guard fstat(source, &info) == 0 else { throw DirectoryIO.sourceError(sourcePath, errno) }
        let open = DirectoryIO.identity(info)
        guard open == expected else { throw Self.changed(sourcePath, expected: expected, now: open) }
    }

    /// Checks that nothing but this copy changed the `.part` file, so what was hashed is what it holds: it is still
    /// linked, still at `partPath` (not replaced), exactly `length` bytes long (the bytes copied so far: not
    /// truncated, not written past), and has no hole before `length` that the source does not have (truncated
    /// and written again past the cut, which reads back as zeros). Run at every chunk end and before the rename.
    /// A change in place that keeps size and layout is not seen here; the read-back hash sees it only if it came
    /// before the range was hashed.
    /// - Throws: `write_failed` (retryable: the next attempt copies again from the last checkpoint, or from the
    ///   start if the `.part` is short).
    func checkPart(length: Int64) throws(JobError) {
        func tampered(_ what: String) -> JobError {
            JobError(
                code: "write_failed",
                message: "\(partPath) \(what) while the upload wrote it: something else changed the partial file; "
                    + "the upload will be retried", retryable: true)
        }
        var info = stat()
        guard fstat(part, &info) == 0 else { throw DirectoryIO.writeFailed("stat \(partPath)", errno) }
        guard info.st_nlink > 0 else { throw tampered("was removed (or another file put in its place)") }
        guard Int64(info.st_size) == length else {
            throw tampered("became \(info.st_size) bytes long, but \(length) were copied into it,")
        }
        var atPath = stat()
        guard partPath.withCString({ lstat($0, &atPath) }) == 0, atPath.st_ino == info.st_ino, atPath.st_dev == info.st_dev
        else { throw tampered("was replaced by another file") }
        // A sparse source may be copied with its holes (a reflink): only a hole before the source's first counts.
        if let partHole = FileHoles.first(in: part), partHole < length,
            partHole < FileHoles.first(in: source) ?? Int64.max
        {
            throw tampered("has a hole at byte \(partHole) (it was cut short and written again past the cut)")
        }
    }

    /// Checks that the source holds no byte past `size`, the length its `stat` gave: a file that grew, or a file
    /// whose size is not its length (`/proc` and `/sys` files say 0 or 4 096 bytes whatever they hold).
    /// - Throws: `source_changed`; `source_unreadable` if the read fails.
    func checkSourceEnds(at size: Int64) throws(JobError) {
        switch DirectoryIO.hasBytes(source, past: size) {
        case .failure(let error): throw DirectoryIO.sourceError(sourcePath, error.code)
        case .success(false): return
        case .success(true):
            throw JobError(
                code: "source_changed",
                message: "source \(sourcePath) holds more than the \(size) bytes its size said: it grew since the upload "
                    + "started, or it is a special file whose size is not its length (as in /proc or /sys); the partial "
                    + "copy is removed. Submit the upload again, or copy such a file to a regular one and upload that")
        }
    }

    /// Makes the finished `.part` file `finalPath` (replacing any file there) and syncs `directory` so the rename
    /// is durable.
    /// The hash is complete once this returns (the `fsync` runs while its last pieces are hashed); a `.part`
    /// file that could not be read back, or that something else changed (`checkPart(length:)`), is not renamed.
    func commit(to finalPath: BytePath, directory: BytePath, length: Int64) throws(JobError) {
        try sync()
        try finishHashing()
        try checkPart(length: length)
        guard partPath.withCString({ part in finalPath.withCString { rename(part, $0) } }) == 0 else {
            throw DirectoryIO.writeFailed("cannot rename \(partPath) to \(finalPath)", errno)
        }
        try DirectoryIO.syncDirectory(directory)
    }
}

/// Raised from the loop when a job is stopped, read by a copy running on the thread pool between its pieces.
final class CopyStop: Sendable {
    private let raised = Atomic<Bool>(false)
    /// Whether the copy should return now.
    var isRaised: Bool { raised.load(ordering: .relaxed) }
    /// Tells the copy to return after its current piece.
    func raise() { raised.store(true, ordering: .relaxed) }
}
