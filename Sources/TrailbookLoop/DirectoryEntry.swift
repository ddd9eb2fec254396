#if canImport(Glibc)
    import Glibc
#endif

/// The name of a `readdir(3)` entry, read without going past the end of the entry.
///
/// A `struct dirent` returned by `readdir` is only `d_reclen` bytes long: the kernel packs entries end to end
/// (getdents64(2)), so `d_name` holds the name, its NUL and a little padding, not the 256 bytes its C type
/// declares. Swift's `entry.pointee.d_name` loads the whole 256-byte tuple, which reads past an entry that lies at
/// the end of glibc's directory buffer; when that buffer ends at an unmapped page (a thread arena's top, as on the
/// thread pool) the read is a SIGSEGV that takes the daemon down. Here the name is measured with `strlen` in place.
public enum DirectoryEntry {
    /// The bytes of `entry`'s name (no NUL; need not be UTF-8), as `readdir` returned it.
    public static func name(_ entry: UnsafePointer<dirent>) -> [UInt8] {
        let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        let start = (UnsafeRawPointer(entry) + offset).assumingMemoryBound(to: CChar.self)
        return Array(UnsafeRawBufferPointer(start: start, count: strlen(start)))
    }
}
