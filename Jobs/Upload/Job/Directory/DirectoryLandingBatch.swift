import TrailbookEngine

/// Small files of a `file://` upload copied whole into their `.part` files and waiting to land together: one
/// `syncfs(2)` makes all their bytes durable, then each is renamed into place, then a second `syncfs` makes the
/// renames durable (`DirectoryIO.land`). Two flushes a batch instead of two `fsync`s a file (the `.part` and
/// its directory): at 100 KiB a file, the flushes were most of a folder upload's time.
///
/// The rule that keeps the checkpoint honest: a file counts as landed (in the checkpoint the job saves, and in the
/// job's file list) only after both flushes returned, so no saved checkpoint ever names a file whose bytes or
/// name a power loss could take back. A `.part` is renamed only after its bytes are durable, so a file already at
/// `DIR/NAME` is never replaced by one that could come back empty. A crash before the landing loses only the
/// batch's `.part` files, which the next attempt copies again (their bytes count in `bytes_resent`).
///
/// Holds no open file: each member is checked (source unchanged, hash complete, `.part` untouched) when its copy
/// ends, and only its path, inode and SHA-256 wait here.
struct DirectoryLandingBatch {
    /// A file copied whole and checked, waiting to land.
    struct Member: Sendable {
        /// Its index in the job's files.
        var index: Int
        /// The `.part` file that holds its bytes, and the inode and device it had when checked.
        var partPath: BytePath
        var node: FileNode
        /// Where it lands.
        var finalPath: BytePath
        /// Its result row once landed (name, path, size in bytes, SHA-256, bytes resent).
        var record: UploadedFile
    }

    /// The waiting files, in index order (consecutive: the job copies its files in order).
    private(set) var members: [Member] = []
    /// Their bytes.
    private(set) var bytes: Int64 = 0

    /// Files a batch holds at most before it lands.
    static let maxFiles = 256

    /// The largest file a batch takes under `--max-rate`, in bytes: a larger one is copied as before, checkpointed
    /// as its copy goes (every second, or every `--chunk-size`), so a kill or a cancel mid-file loses about a
    /// second of it, not the whole file.
    static let smallFileBytes: Int64 = 1 << 20

    /// The largest file a batch takes without `--max-rate` (16 MiB: a photo), which copies in a fraction of a
    /// second. A batch holds at most a chunk of bytes (64 MiB without `--chunk-size`), which is what a kill before
    /// its landing makes the next attempt copy again.
    static let unpacedFileBytes: Int64 = 16 << 20

    /// Whether a file of `size` bytes is copied into a batch: a small file (at most `smallFileBytes`, or
    /// `unpacedFileBytes` when not `paced` by `--max-rate`, and smaller than `syncBytes`, the bytes between two
    /// syncs of a large file), copied whole without a sync.
    static func admits(size: Int64, syncBytes: Int64, paced: Bool) -> Bool {
        size <= (paced ? smallFileBytes : unpacedFileBytes) && size < syncBytes
    }

    /// Whether no file waits.
    var isEmpty: Bool { members.isEmpty }

    /// The index of the file after the last one waiting, or `nil` when none waits.
    var nextIndex: Int? { members.last.map { $0.index + 1 } }

    /// Whether the batch should land now: `maxFiles` files, or `syncBytes` bytes (what a large file copies between
    /// two syncs, so a crash copies again at most that much).
    func isFull(syncBytes: Int64) -> Bool { members.count >= Self.maxFiles || bytes >= syncBytes }

    /// Adds a file copied whole and checked.
    mutating func add(_ member: Member) {
        precondition(nextIndex.map { $0 == member.index } ?? true, "batch members must be consecutive")
        members.append(member)
        bytes += member.record.bytes
    }

    /// Empties the batch.
    /// - Returns: the files that were waiting, in order.
    mutating func take() -> [Member] {
        defer { (members, bytes) = ([], 0) }
        return members
    }
}
