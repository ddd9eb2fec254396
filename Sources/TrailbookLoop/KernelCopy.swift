import CUV

#if canImport(Glibc)
    import Glibc
#endif

/// Copies between two open files inside the kernel, with `copy_file_range(2)`: the bytes go from the source's page
/// cache to the destination's (or share extents, on file systems that reflink) without a trip through user space.
///
/// Linux man-pages, copy_file_range(2): the call may copy fewer bytes than asked, returns 0 at the source's end,
/// and fails with `EXDEV`, `EINVAL`, `EOPNOTSUPP` or `ENOSYS` where the kernel or a file system cannot do it for
/// these two files; callers then copy with `pread`/`pwrite` (`isUnsupported`).
public enum KernelCopy {
    /// Copies up to `count` bytes from `source` at byte `sourceOffset` to `destination` at byte
    /// `destinationOffset` (neither descriptor's file position is used or moved).
    /// - Returns: the bytes copied (0 at the source's end), or the `errno` of the failure.
    public static func copy(from source: Int32, at sourceOffset: Int64, to destination: Int32, at destinationOffset: Int64, count: Int)
        -> Result<Int, CopyError>
    {
        var sourceAt = sourceOffset
        var destinationAt = destinationOffset
        while true {
            let copied = tb_copy_file_range(source, &sourceAt, destination, &destinationAt, UInt(count))
            if copied >= 0 { return .success(Int(copied)) }
            if errno == EINTR { continue }
            return .failure(CopyError(code: errno))
        }
    }

    /// A failed `copy_file_range(2)`.
    public struct CopyError: Error, Sendable {
        /// The `errno` value.
        public var code: Int32
        /// Whether the kernel or the file systems cannot copy between these files this way (cross-device on an
        /// older kernel, a file system without support, a special file): copy through user space instead. Any
        /// other code (`EIO`, `ENOSPC`, `EBADF`, …) is a real failure of the read or the write.
        public var isUnsupported: Bool {
            code == EXDEV || code == EINVAL || code == EOPNOTSUPP || code == ENOSYS
        }
    }
}
