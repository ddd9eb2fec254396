import TrailbookEngine
import TrailbookLoop

/// A file small enough to land in a batch (`DirectoryLandingBatch.admits`), copied in one thread-pool call: its
/// folders made under the destination, its `.part` opened (bytes an earlier attempt left in it dropped), the whole
/// file copied and hashed, and the copy checked (`PartFile.checkCopied`). A folder of small files then costs one
/// trip from the loop to the pool per file, not four (folders, open, copy, check). One file a call: copying
/// several small files per call was measured (2 000 × 100 KiB to a folder, release, loaded, one sample each: 16 a
/// call 84 MiB peak RSS, 4 a call 74 MiB and 4.6 s, 1 a call 47 MiB and 3.0 s); the open `.part` files and their
/// buffers cost more than the hops they saved. Several files are copied at once instead, each in its own call on
/// its own pool thread (`SmallFileCopyAhead`).
struct SmallFileCopy: Sendable {
    /// The copied `.part` file, hashed and checked, ready to land.
    let file: PartFile
    /// Bytes an earlier attempt had left in the `.part` file (dropped before the copy).
    let leftover: Int64

    /// Copies `sourcePath` (recorded as `expected`) whole to `partPath`, the `.part` of destination name `name`
    /// under `directory`. Blocking: call it on the thread pool.
    /// - Throws: `source_changed`, `source_missing`, `source_unreadable`, `source_not_regular` (the file fails alone
    ///   in a folder upload); `write_failed` (retryable for a full disk) and what `DirectoryIO.makeParents` throws.
    static func copy(
        sourcePath: BytePath, partPath: BytePath, name: BytePath, directory: BytePath, expected: SourceIdentity
    ) throws(JobError) -> SmallFileCopy {
        if name.bytes.contains(UInt8(ascii: "/")) { try DirectoryIO.makeParents(of: name, in: directory) }
        let (file, partLength) = try PartFile.open(sourcePath: sourcePath, partPath: partPath, expected: expected)
        do throws(JobError) {
            if partLength > 0 { try file.truncate(to: 0) }
            var offset: Int64 = 0
            while offset < expected.size {
                let copied = try file.copy(
                    at: offset, count: expected.size - offset, stop: CopyStop(), timeLimit: .infinity)
                if copied.sourceEnded {
                    // The source ended early: it was truncated or replaced since it was examined.
                    let at = offset + copied.bytes
                    try file.checkSource(is: expected)
                    throw PartFile.changed(
                        sourcePath, expected: expected, now: try file.sourceIdentity(),
                        detail: "it ended at byte \(at), before its recorded size of \(expected.size) bytes"
                            + DirectoryIO.specialFileHint)
                }
                offset += copied.bytes
            }
            try file.checkCopied(source: expected, length: expected.size)
        } catch {
            // Pieces copied may still wait to be hashed, each holding the file: wait, so its descriptors close.
            file.drainHashing()
            throw error
        }
        return SmallFileCopy(file: file, leftover: partLength)
    }
}

