/// The local file a remembered upload was made from, as `stat` saw it when its SHA-256 was known to be its bytes
/// (`RememberedFile.source`): the stat cache of "send only what changed". A later upload that finds the same path
/// with the same device, inode, size, mtime and ctime takes the remembered SHA-256 as the file's without reading
/// it; any difference (a `touch`, an edit, a copy over it) reads and hashes it again.
///
/// Why the ctime: the mtime can be set back (`touch -d`, `touch -r`, `rsync -t`), so an edit in place that keeps
/// the size and restores the mtime would look unchanged; the ctime cannot be set by a user and moves with any
/// write, `chmod` or rename of the file.
public struct RememberedSource: Sendable, Equatable {
    /// The file's absolute path, byte for byte.
    public var path: [UInt8]
    /// `st_dev`.
    public var device: UInt64
    /// `st_ino`.
    public var inode: UInt64
    /// Size in bytes.
    public var size: Int64
    /// `st_mtim`, in nanoseconds since the Unix epoch.
    public var modifiedNanoseconds: Int64
    /// `st_ctim`, in nanoseconds since the Unix epoch.
    public var changedNanoseconds: Int64

    /// A source as `stat` saw it; see the properties.
    public init(
        path: [UInt8], device: UInt64, inode: UInt64, size: Int64, modifiedNanoseconds: Int64,
        changedNanoseconds: Int64
    ) {
        self.path = path
        self.device = device
        self.inode = inode
        self.size = size
        self.modifiedNanoseconds = modifiedNanoseconds
        self.changedNanoseconds = changedNanoseconds
    }
}

extension RememberedFile {
    /// The columns both stores read a row from, in the order `JobStore.rememberedUpload` takes them.
    static let columns = """
        destination, name, size, sha256, location, job_id, uploaded_at, source_path, source_device, source_inode,
        source_mtime_ns, source_ctime_ns
        """

    /// One stat-cache column's value, for either store's own value type.
    enum SourceColumn {
        case none
        case text(String)
        case integer(Int64)
    }

    /// `source` as the five stat-cache columns (path as hex of its bytes, device, inode, mtime, ctime; 64-bit
    /// numbers by their bit pattern), all `.none` without one.
    static func sourceColumns(_ source: RememberedSource?) -> [SourceColumn] {
        guard let source else { return Array(repeating: .none, count: 5) }
        return [
            .text(key(source.path)), .integer(Int64(bitPattern: source.device)),
            .integer(Int64(bitPattern: source.inode)), .integer(source.modifiedNanoseconds),
            .integer(source.changedNanoseconds),
        ]
    }
}
