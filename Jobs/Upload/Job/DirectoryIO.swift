import Dispatch
import Synchronization
import TrailbookEngine

#if canImport(Glibc)
    import Glibc
#endif

/// Blocking POSIX file operations of a directory upload. Everything here runs on the thread pool (through
/// `JobContext.runOnPool`) or, for submit-time checks, off the loop thread; never on the loop.
enum DirectoryIO {
    /// Largest piece one pool call reads, writes and hashes.
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
    static func preflight(files: [BytePath], names: [BytePath], directory: String, indices: Range<Int>)
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
                identities.append(identity)
            }
        }
        return identities
    }

    private static func checkDestination(names: [BytePath], directory: String, indices: Range<Int>, files: [BytePath])
        throws(JobError)
    {
        switch status(BytePath(directory)) {
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
        guard access(directory, W_OK | X_OK) == 0 else {
            throw JobError(
                code: "destination_not_writable",
                message: "cannot write into destination directory \(directory): \(errorText(errno)); "
                    + "fix its permissions or choose another directory")
        }
        guard let root = resolved(BytePath(directory)) else {
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

    /// `fsync(2)` of a directory, so a rename in it survives a power loss. File systems that cannot sync
    /// directories (`EINVAL`) are accepted.
    static func syncDirectory(_ path: String) throws(JobError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw writeFailed("cannot open directory \(path) to sync it", errno) }
        defer { close(fd) }
        if fsync(fd) != 0, errno != EINVAL { throw writeFailed("fsync \(path)", errno) }
    }

    /// SHA-256 of bytes `[offset, offset + count)` of `path` fed into `hash`, reading with `buffer`.
    /// - Returns: the bytes hashed (less than `count` if the file is shorter).
    static func hashRange(
        of path: BytePath, from offset: Int64, count: Int64, into hash: SHA256, buffer: UnsafeMutableRawBufferPointer
    ) throws(JobError) -> Int64 {
        let fd = path.withCString { open($0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { throw writeFailed("cannot reopen \(path) to check what was written", errno) }
        defer { close(fd) }
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

/// The open files of one file's directory upload: the source (read with `pread`), the `.part` file (written with
/// `pwrite`), the running SHA-256 of what was written, and two 1 MiB buffers.
///
/// Disk speed (issue 14): the SHA-256 of a piece is computed on a serial queue of its own while the next piece is
/// read and written (two buffers take turns; a buffer is reused only once its hash is done), and each written
/// piece's writeback starts at once (`posix_fadvise(POSIX_FADV_DONTNEED)`, which on Linux starts writeback of the
/// range's dirty pages without waiting and drops the clean ones), so the disk writes while the next pieces are
/// copied and the `fsync` at a chunk end finds little left to do. The `fsync` still precedes every checkpoint.
///
/// Used from one pool call at a time, each awaited by the loop before the next: `@unchecked Sendable`.
/// Closes its descriptors when released.
final class PartFile: @unchecked Sendable {
    let sourcePath: BytePath
    let partPath: BytePath
    /// The SHA-256 of what was written; read it only after `finishHashing()`.
    let hash = SHA256()
    /// The buffer `rehash` reads with (the first of the two).
    var buffer: UnsafeMutableRawBufferPointer { buffers[0] }
    private let buffers: [UnsafeMutableRawBufferPointer]
    /// One per buffer: taken while the buffer is filled or waits to be hashed.
    private let bufferFree = [DispatchSemaphore(value: 1), DispatchSemaphore(value: 1)]
    private var nextBuffer = 0
    /// The end of the range last handed to writeback (`posix_fadvise`).
    private var advisedUpTo: Int64 = 0
    private let hashing = DispatchQueue(label: "trailbook-jobs.upload.sha256")
    private let source: Int32
    private let part: Int32

    /// Opens `sourcePath` for reading and `partPath` for writing (`O_CREAT | O_WRONLY`, mode 0644, never through
    /// a symbolic link), checks the source still is `expected` (`source_changed`) and returns the `.part` file's
    /// current length with it.
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
        let part = partPath.withCString { Glibc.open($0, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0o644) }
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
        buffers = (0..<2).map { _ in .allocate(byteCount: DirectoryIO.maxPieceBytes, alignment: 4096) }
    }

    deinit {
        finishHashing()
        close(source)
        close(part)
        for buffer in buffers { buffer.deallocate() }
    }

    /// Waits until every piece copied so far is in `hash`.
    func finishHashing() {
        for free in bufferFree { free.wait() }
        for free in bufferFree { free.signal() }
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
        finishHashing()
        return try DirectoryIO.hashRange(of: partPath, from: offset, count: count, into: hash, buffer: buffer)
    }

    /// Copies up to `count` bytes at `offset` from the source to the `.part` file in pieces of at most 1 MiB, and
    /// hashes them: in one pool call, so a fast disk is not held up by a trip through the loop per piece. Returns
    /// early once `stop` is raised (the job is being stopped: it stops within a piece) or `timeLimit` seconds
    /// have passed (the loop reports progress between calls).
    /// - Returns: the bytes copied (less than `count` at the source's end, on a stop or at the time limit), and
    ///   whether the source ended before `count` bytes.
    /// - Throws: as `copyPiece`.
    func copy(at offset: Int64, count: Int64, stop: CopyStop, timeLimit: Double) throws(JobError) -> Copied {
        let started = Timestamp.monotonic()
        var done: Int64 = 0
        while done < count {
            let want = Int(min(Int64(DirectoryIO.maxPieceBytes), count - done))
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

    /// Copies up to `count` (≤ 1 MiB) bytes at `offset` from the source to the `.part` file and hashes them.
    /// - Returns: the bytes copied; less than `count` only at the source's end.
    /// - Throws: `source_unreadable` on a read error; `write_failed` on a write error (retryable for ENOSPC,
    ///   EDQUOT, EIO).
    func copyPiece(at offset: Int64, count: Int) throws(JobError) -> Int {
        let index = nextBuffer
        let buffer = buffers[index]
        precondition(count <= buffer.count)
        bufferFree[index].wait()
        var handedOn = false
        defer { if !handedOn { bufferFree[index].signal() } }
        var read = 0
        while read < count {
            let got = pread(source, buffer.baseAddress! + read, count - read, off_t(offset + Int64(read)))
            if got < 0 {
                if errno == EINTR { continue }
                throw DirectoryIO.sourceError(sourcePath, errno)
            }
            if got == 0 { break }
            read += got
        }
        var written = 0
        while written < read {
            let put = pwrite(part, buffer.baseAddress! + written, read - written, off_t(offset + Int64(written)))
            if put < 0 {
                if errno == EINTR { continue }
                throw DirectoryIO.writeFailed("cannot write \(partPath)", errno)
            }
            written += put
        }
        // Start writing the pages copied since the last advice to disk now, 8 MiB at a time; the fsync at the
        // chunk end waits for what is left. Advice only: its result does not matter.
        let end = offset + Int64(read)
        if end - advisedUpTo >= DirectoryIO.writebackBytes || end < advisedUpTo {
            let from = min(advisedUpTo, offset)
            _ = posix_fadvise(part, off_t(from), off_t(end - from), POSIX_FADV_DONTNEED)
            advisedUpTo = end
        }
        hashing.async { [self, read] in
            hash.update(UnsafeRawBufferPointer(rebasing: buffers[index][0..<read]))
            bufferFree[index].signal()
        }
        handedOn = true
        nextBuffer = 1 - index
        return read
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
        var info = stat()
        guard fstat(source, &info) == 0 else { throw DirectoryIO.sourceError(sourcePath, errno) }
        let open = DirectoryIO.identity(info)
        guard open == expected else { throw Self.changed(sourcePath, expected: expected, now: open) }
        switch DirectoryIO.status(sourcePath) {
        case .failure(let error): throw DirectoryIO.sourceError(sourcePath, error.code)
        case .success(let (now, _)):
            guard now == expected else { throw Self.changed(sourcePath, expected: expected, now: now) }
        }
    }

    /// Makes the finished `.part` file `finalPath` (replacing any file there) and syncs `directory` so the rename
    /// is durable.
    func commit(to finalPath: BytePath, directory: String) throws(JobError) {
        try sync()
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
