import CUV

/// What `stat(2)` says of a file, in the units libuv reports.
public struct FileStatus: Sendable, Equatable, Codable {
    /// Size in bytes.
    public var size: Int64
    /// Last modification time, in nanoseconds since the Unix epoch.
    public var modifiedNanoseconds: Int64
    /// Inode number.
    public var inode: UInt64
    /// Device number.
    public var device: UInt64
    /// `st_mode`: file type and permission bits.
    public var mode: UInt32

    public init(size: Int64, modifiedNanoseconds: Int64, inode: UInt64, device: UInt64, mode: UInt32) {
        self.size = size
        self.modifiedNanoseconds = modifiedNanoseconds
        self.inode = inode
        self.device = device
        self.mode = mode
    }

    /// Whether this is a regular file.
    public var isRegularFile: Bool { mode & 0o170000 == 0o100000 }
    /// Whether this is a directory.
    public var isDirectory: Bool { mode & 0o170000 == 0o040000 }
}

private final class FSBox {
    let completion: (UnsafeMutablePointer<uv_fs_t>) -> Void
    init(_ completion: @escaping (UnsafeMutablePointer<uv_fs_t>) -> Void) { self.completion = completion }
}

/// File-system operations as libuv fs requests (https://docs.libuv.org/en/v1.x/fs.html): they run on the
/// thread pool and complete on the loop thread, so the loop never blocks on a slow disk.
///
/// Call them on the loop thread, from an actor that runs on the loop (`LoopActor`): each takes the caller's isolation
/// (`#isolation`) and hands it to the continuation, so the libuv request starts on the loop thread; a plain
/// `nonisolated async` method would run on the global executor instead.
public struct FileSystem {
    let loop: EventLoop

    /// The file-system operations of `loop`.
    public init(loop: EventLoop) { self.loop = loop }

    /// `stat(2)` of `path`, following symbolic links.
    /// - Throws: `UVError` (for example `ENOENT`, `EACCES`).
    public func status(of path: String, isolation: isolated (any Actor)? = #isolation) async throws(UVError)
        -> FileStatus
    {
        let (rc, status) = await request(isolation: isolation) { req, cb in uv_fs_stat(loop.raw, req, path, cb) }
        try UVError.check(rc, "stat \(path)")
        return status!
    }

    /// `rename(2)`: atomically replaces `destination` with `source` (same file system).
    /// - Throws: `UVError`.
    public func rename(_ source: String, to destination: String, isolation: isolated (any Actor)? = #isolation)
        async throws(UVError)
    {
        let (rc, _) = await request(isolation: isolation) { req, cb in uv_fs_rename(loop.raw, req, source, destination, cb) }
        try UVError.check(rc, "rename \(source) to \(destination)")
    }

    /// `unlink(2)`. A file that is already gone is not an error.
    /// - Throws: `UVError` for any other failure.
    public func removeFile(_ path: String, isolation: isolated (any Actor)? = #isolation) async throws(UVError) {
        let (rc, _) = await request(isolation: isolation) { req, cb in uv_fs_unlink(loop.raw, req, path, cb) }
        if rc == UV_ENOENT.rawValue { return }
        try UVError.check(rc, "unlink \(path)")
    }

    /// `access(2)` with `mode` (for example `W_OK | X_OK`): whether this process may use `path` so.
    public func isAccessible(_ path: String, mode: Int32, isolation: isolated (any Actor)? = #isolation) async -> Bool {
        let (rc, _) = await request(isolation: isolation) { req, cb in uv_fs_access(loop.raw, req, path, mode, cb) }
        return rc == 0
    }

    private func request(
        isolation: isolated (any Actor)?,
        _ start: (UnsafeMutablePointer<uv_fs_t>, @convention(c) (UnsafeMutablePointer<uv_fs_t>?) -> Void) -> Int32
    ) async -> (Int32, FileStatus?) {
        loop.assertInLoopThread()
        return await withCheckedContinuation(isolation: isolation) {
            (continuation: CheckedContinuation<(Int32, FileStatus?), Never>) in
            let req = UnsafeMutablePointer<uv_fs_t>.allocate(capacity: 1)
            let box = FSBox { req in
                let rc = Int32(truncatingIfNeeded: req.pointee.result)
                var status: FileStatus?
                if rc >= 0 && (req.pointee.fs_type == UV_FS_STAT) {
                    let s = req.pointee.statbuf
                    status = FileStatus(
                        size: Int64(s.st_size),
                        modifiedNanoseconds: Int64(s.st_mtim.tv_sec) * 1_000_000_000 + Int64(s.st_mtim.tv_nsec),
                        inode: s.st_ino, device: s.st_dev, mode: UInt32(truncatingIfNeeded: s.st_mode))
                }
                continuation.resume(returning: (rc, status))
            }
            req.pointee.data = Unmanaged.passRetained(box).toOpaque()
            let rc = start(req) { req in
                let box = Unmanaged<FSBox>.fromOpaque(req!.pointee.data).takeRetainedValue()
                box.completion(req!)
                uv_fs_req_cleanup(req)
                req!.deallocate()
            }
            if rc < 0 {
                Unmanaged<FSBox>.fromOpaque(req.pointee.data).release()
                uv_fs_req_cleanup(req)
                req.deallocate()
                continuation.resume(returning: (rc, nil))
            }
        }
    }
}
