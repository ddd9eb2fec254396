import CUV

#if canImport(Glibc)
    import Glibc
#endif

/// Flushes a whole file system to disk with `syncfs(2)`: one flush for a batch of files written on it, where an
/// `fsync(2)` per file costs a journal commit and a disk cache flush each.
public enum FileSystemSync {
    /// Flushes the file system that holds the open file `fd` (every dirty page and inode on it, not only `fd`'s),
    /// retrying on `EINTR`.
    /// - Returns: `nil` once the data is durable, or the `errno` of the failure (`EIO`, `ENOSPC`, … a writeback
    ///   error of any file on that file system since `fd` was opened).
    public static func sync(containing fd: Int32) -> Int32? {
        while true {
            if tb_syncfs(fd) == 0 { return nil }
            if errno != EINTR { return errno }
        }
    }
}
