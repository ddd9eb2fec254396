import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// A source file being sent to a tus server: read in chunks, hashed in file order as it is read.
///
/// Every method blocks (`pread`, SHA-256) and runs on the thread pool, one call at a time (the upload awaits each
/// before the next), which is what makes the unchecked `Sendable` safe.
///
/// The hash covers each byte once, in order: `hashedThrough` only moves forward, so a chunk read again (a resend
/// after 460, a resume from a lower server offset) is not hashed twice, and bytes the server already had when
/// this run started are hashed from the source by `hash(through:)` before anything after them.
final class TusSource: @unchecked Sendable {
    /// The source's path.
    let path: BytePath
    /// The identity it had when the job first ran.
    let expected: SourceIdentity
    /// SHA-256 of bytes `0 ..< hashedThrough`.
    let hash = SHA256()
    /// Bytes hashed so far, from the start.
    private(set) var hashedThrough: Int64 = 0
    private let fd: Int32

    private init(path: BytePath, expected: SourceIdentity, fd: Int32) {
        self.path = path
        self.expected = expected
        self.fd = fd
    }

    deinit { close(fd) }

    /// Opens `path` and checks it still is `expected`.
    /// - Throws: `source_missing`, `source_unreadable`, `source_changed`.
    static func open(_ path: BytePath, expected: SourceIdentity) throws(JobError) -> TusSource {
        let fd = path.withCString { Glibc.open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { throw DirectoryIO.sourceError(path, errno) }
        let source = TusSource(path: path, expected: expected, fd: fd)
        try source.checkUnchanged()
        return source
    }

    /// Reads bytes `offset ..< offset + count` and hashes the part of them past `hashedThrough` (which must be at
    /// least `offset`: call `hash(through:)` first).
    /// - Throws: `source_changed` if the file ends early, `source_unreadable` on a read error.
    func read(at offset: Int64, count: Int) throws(JobError) -> [UInt8] {
        precondition(offset <= hashedThrough, "bytes before a chunk must be hashed before it")
        var failure: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var done = 0
            while done < count {
                let got = pread(fd, buffer.baseAddress! + done, count - done, off_t(offset + Int64(done)))
                if got < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    break
                }
                if got == 0 { break }
                done += got
            }
            initialized = done
        }
        if failure != 0 { throw DirectoryIO.sourceError(path, failure) }
        guard bytes.count == count else {
            throw changedNow(detail: "it ended at byte \(offset + Int64(bytes.count)), before its recorded size of "
                + "\(expected.size) bytes" + DirectoryIO.specialFileHint)
        }
        let fresh = offset + Int64(count) - hashedThrough
        if fresh > 0 {
            bytes.withUnsafeBytes { raw in
                hash.update(UnsafeRawBufferPointer(rebasing: raw[(count - Int(fresh))...]))
            }
            hashedThrough += fresh
        }
        return bytes
    }

    /// Hashes the source from `hashedThrough` towards `end`, at most `step` bytes in this call.
    /// - Returns: the new `hashedThrough`.
    func hash(through end: Int64, step: Int64 = 8 << 20) throws(JobError) -> Int64 {
        guard end > hashedThrough else { return hashedThrough }
        let count = Int(min(step, end - hashedThrough))
        _ = try read(at: hashedThrough, count: count)
        return hashedThrough
    }

    /// Checks the source is still `expected`, through the descriptor (changed in place) and the path (replaced).
    /// - Throws: `source_changed`, `source_missing`, `source_unreadable`.
    func checkUnchanged() throws(JobError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw DirectoryIO.sourceError(path, errno) }
        let open = DirectoryIO.identity(info)
        guard open == expected else { throw PartFile.changed(path, expected: expected, now: open) }
        switch DirectoryIO.status(path) {
        case .failure(let error): throw DirectoryIO.sourceError(path, error.code)
        case .success(let (now, _)):
            guard now == expected else { throw PartFile.changed(path, expected: expected, now: now) }
        }
    }

    private func changedNow(detail: String) -> JobError {
        var info = stat()
        let now = fstat(fd, &info) == 0 ? DirectoryIO.identity(info) : expected
        return PartFile.changed(path, expected: expected, now: now, detail: detail)
    }
}

extension TusSource {
    /// Hashes the source through `end` on the thread pool, `hash(through:step:)` by step, each step reported as
    /// the job's phase (`UploadResumePhase`): the bytes a server had before this run read anything, which may be
    /// many GiB and take longer to read than a stall timeout. Ends the phase when done.
    /// - Throws: `source_unreadable` and the like from the reads; `JobStopped` when stopped between steps.
    @LoopActor
    func hash(through end: Int64, in job: JobContext) async throws {
        while hashedThrough < end {
            try job.checkCancellation()
            let through = try await job.runOnPool { try self.hash(through: end) }
            UploadResumePhase.rehashed(bytes: through, in: job)
        }
        job.endPhase()
    }
}
