import CMalloc

/// How the daemon's process allocates large buffers: each of at least `threshold` bytes gets a mapping of its own,
/// given back to the system when freed.
///
/// An upload holds a few large, short-lived buffers at a time (an S3 part is 8 MiB, read on a pool thread and freed
/// on the loop thread once sent). glibc's default raises its mmap threshold to the size of the first such buffer
/// freed, after which they come from the heaps of the threads' arenas and stay there: one 256 MiB S3 upload
/// peaked at 106–114 MiB RSS, of which about 40 MiB were parts. With a fixed threshold the peak is the buffers in
/// use plus the rest of the daemon (82–87 MiB in the same run; bench/s3_upload.py).
enum LargeBufferAllocation {
    /// Bytes from which an allocation is mapped on its own: 4 MiB, below an S3 part (8 MiB) and above the buffers
    /// that come and go many times a second (request and reply text, 64 KiB tus and file chunks).
    static let threshold: Int32 = 4 << 20

    /// Sets glibc's mmap threshold (`M_MMAP_THRESHOLD`, which also turns off its dynamic raising) to `threshold`,
    /// unless the environment's `GLIBC_TUNABLES` already sets `glibc.malloc.mmap_threshold`; once, at the start of
    /// the daemon's process. Returns whether it was set.
    @discardableResult
    static func apply(environment: [String: String]) -> Bool {
        if environment["GLIBC_TUNABLES"]?.contains("glibc.malloc.mmap_threshold") == true { return false }
        return mallopt(M_MMAP_THRESHOLD, threshold) == 1
    }
}
