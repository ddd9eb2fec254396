import TrailbookLoop
import TrailbookPaths

#if canImport(Glibc)
import Glibc
#endif

/// What `stat(2)` says about a file, enough to tell an unchanged file from a changed one without reading it.
///
/// An import skips a file whose path, size, modification time and inode all match the stored row.
public struct FileStamp: Hashable, Sendable, Codable {
    /// Size in bytes.
    public var bytes: Int64
    /// Modification time, nanoseconds since the Unix epoch (`st_mtim`).
    public var modifiedNanoseconds: Int64
    /// Inode number (`st_ino`); changes when a file is replaced by rename.
    public var inode: UInt64

    public init(bytes: Int64, modifiedNanoseconds: Int64, inode: UInt64) {
        self.bytes = bytes
        self.modifiedNanoseconds = modifiedNanoseconds
        self.inode = inode
    }

    /// Stats `path`, following symbolic links.
    ///
    /// - Throws: `PhotoLibraryError.io` if `stat` fails.
    public init(path: BytePath) throws(PhotoLibraryError) {
        var st = stat()
        guard path.withCString({ stat($0, &st) }) == 0 else {
            throw PhotoLibraryError(.io, "cannot stat \(path): \(String(cString: strerror(errno)))")
        }
        self.init(st)
    }

    init(_ st: stat) {
        bytes = Int64(st.st_size)
        modifiedNanoseconds = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
        inode = UInt64(st.st_ino)
    }
}

/// Reading whole photo files into memory, with a size cap.
public enum PhotoFile {
    /// The default cap on a photo file's size: 256 MiB. Bigger files are refused, not read.
    public static let defaultMaxBytes: Int64 = 256 << 20

    /// How long `read` waits for another process to release a lease on the file, in seconds.
    public static let leaseWaitSeconds = 20.0

    /// Reads the file at `path` into memory.
    ///
    /// - Parameter maxBytes: refuse files larger than this many bytes.
    /// - Returns: the bytes and the file's stamp, taken from the open descriptor (so they describe the same file).
    /// - Throws: `PhotoLibraryError.io` on a file system error or when `path` is not a regular file (a FIFO, a
    ///   device, a directory), `.tooLarge` past `maxBytes`.
    public static func read(path: String, maxBytes: Int64 = defaultMaxBytes) throws(PhotoLibraryError) -> (
        bytes: [UInt8], stamp: FileStamp
    ) {
        try read(path: BytePath(path), maxBytes: maxBytes)
    }

    /// Reads the file at `path` (its exact bytes: the name need not be UTF-8) into memory; see `read(path:maxBytes:)`.
    public static func read(path: BytePath, maxBytes: Int64 = defaultMaxBytes) throws(PhotoLibraryError) -> (
        bytes: [UInt8], stamp: FileStamp
    ) {
        // O_NONBLOCK: opening a FIFO put where a photo was would otherwise block until some writer came (holding a
        // worker until its time limit). A regular file under another process's lease (F_SETLEASE: Samba, an NFS
        // server) refuses a non-blocking open with EAGAIN and tells the holder to let go; the open is tried again
        // every 20 ms for up to `leaseWaitSeconds` (below a worker's 30 s limit), never blocking, so a file swapped
        // for a FIFO meanwhile is still refused.
        var fd = path.withCString { open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
        var waited = 0.0
        while fd < 0, errno == EAGAIN, waited < leaseWaitSeconds {
            usleep(20_000)
            waited += 0.02
            fd = path.withCString { open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
        }
        guard fd >= 0 else { throw PhotoLibraryError(.io, "cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            throw PhotoLibraryError(.io, "cannot stat \(path): \(String(cString: strerror(errno)))")
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw PhotoLibraryError(.io, "\(path) is not a regular file")
        }
        // Reads block as usual (a FUSE file system may honour the flag and answer EAGAIN).
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        let stamp = FileStamp(st)
        guard stamp.bytes <= maxBytes else {
            throw PhotoLibraryError(.tooLarge, "\(path) is \(stamp.bytes) bytes, over the limit of \(maxBytes)")
        }
        var bytes = [UInt8](repeating: 0, count: Int(stamp.bytes))
        var filled = 0
        var failure: Int32 = 0
        bytes.withUnsafeMutableBytes { buffer in
            while filled < buffer.count {
                let n = Glibc.read(fd, buffer.baseAddress! + filled, buffer.count - filled)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                if n == 0 { break }
                filled += n
            }
        }
        if failure != 0 { throw PhotoLibraryError(.io, "cannot read \(path): \(String(cString: strerror(failure)))") }
        if filled < bytes.count { bytes.removeSubrange(filled...) }
        return (bytes, stamp)
    }
}
