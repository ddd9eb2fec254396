import Dispatch
import Synchronization
import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

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

    /// Makes the finished `.part` file `finalPath` (replacing any file there) and syncs the directory that holds
    /// `finalPath` so the rename is durable.
    /// The hash is complete once this returns (the `fsync` runs while its last pieces are hashed); a `.part`
    /// file that could not be read back, or that something else changed (`checkPart(length:)`), is not renamed.
    func commit(to finalPath: BytePath, length: Int64) throws(JobError) {
        try sync()
        try finishHashing()
        try checkPart(length: length)
        guard partPath.withCString({ part in finalPath.withCString { rename(part, $0) } }) == 0 else {
            throw DirectoryIO.writeFailed("cannot rename \(partPath) to \(finalPath)", errno)
        }
        try DirectoryIO.syncDirectory(DirectoryIO.parent(of: finalPath) ?? finalPath)
    }

    /// Readies a `.part` file copied whole for a batched landing (`DirectoryLandingBatch`): every check `commit`
    /// makes (the source still is `expected` and ends at `length`; the hash is complete; nothing else changed the
    /// `.part` file), without its `fsync` and rename, which the batch does for many files at once. Starts the
    /// `.part` file's writeback, so the disk writes it while the next files are copied.
    /// - Throws: `source_changed`, `source_missing`, `source_unreadable` (this file fails alone in a folder
    ///   upload); `write_failed` (retryable) as `checkPart` and `finishHashing`.
    func checkCopied(source expected: SourceIdentity, length: Int64) throws(JobError) {
        try checkSource(is: expected)
        try checkSourceEnds(at: length)
        try finishHashing()
        try checkPart(length: length)
        // Advice only (writeback starts, clean pages are dropped): its result does not matter.
        _ = posix_fadvise(part, 0, 0, POSIX_FADV_DONTNEED)
    }
}
