import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// The SHA-256 of a whole file read on the thread pool in steps of `step` bytes, one pool call each, with each
/// step reported as the job's phase ("hashing to compare: 1.2 GiB", `UploadListingPhase.hashed`): a file of many
/// GiB takes longer to read than a stall timeout, and a stop ends the reading between steps. The file stays open
/// from the first step to the last, so every step reads the same file even if its path is replaced meanwhile.
@LoopActor
enum SteppedSHA256 {
    /// Bytes read per pool call: about a second of reading from a fast disk.
    nonisolated static let step: Int64 = 64 << 20

    /// The SHA-256 (hex) of the file at `path`, opened with `flags` added to `O_RDONLY`.
    /// - Returns: `nil` when the file cannot be opened or read (the caller treats that as "not the same").
    /// - Throws: `JobStopped` when the job is stopped between steps.
    static func hexDigest(
        of path: BytePath, flags: Int32, step: Int64 = step, in job: JobContext
    ) async throws -> String? {
        guard let file = try await job.runOnPool({ OpenFile(path, flags: flags) }) else { return nil }
        var hashed: Int64 = 0
        while true {
            try job.checkCancellation()
            let from = hashed
            guard let got = try await job.runOnPool({ file.hash(from: from, count: step) }) else { return nil }
            if got == 0 { return file.hash.hexDigest }
            hashed += got
            UploadListingPhase.hashed(bytes: hashed, in: job)
        }
    }

    /// A file open for reading, with the hash of what was read so far; closed when released. Used by one task at
    /// a time (each pool call is awaited before the next starts), hence `@unchecked Sendable`.
    final class OpenFile: @unchecked Sendable {
        let fd: Int32
        let path: BytePath
        let hash = SHA256()
        private let buffer: UnsafeMutableRawBufferPointer

        /// Opens `path`; `nil` if it cannot be opened. Blocking.
        init?(_ path: BytePath, flags: Int32) {
            let fd = path.withCString { open($0, O_RDONLY | O_CLOEXEC | flags) }
            guard fd >= 0 else { return nil }
            self.fd = fd
            self.path = path
            buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: DirectoryIO.maxPieceBytes, alignment: 4096)
        }

        deinit {
            close(fd)
            buffer.deallocate()
        }

        /// Hashes up to `count` bytes from `offset`. Blocking.
        /// - Returns: the bytes hashed (0 at the end of the file), or `nil` if a read failed.
        func hash(from offset: Int64, count: Int64) -> Int64? {
            try? DirectoryIO.hashRange(of: fd, path: path, from: offset, count: count, into: hash, buffer: buffer)
        }
    }
}
