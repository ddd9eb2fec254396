import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// Lists the files of a folder upload: walks each folder given, depth first, in byte order of the names in each
/// directory, and hands over every regular file with its path relative to that folder as it is found (nothing
/// kept here, so a tree of 100 000 files is not held twice), and keeps every entry passed over with its reason. Blocking (`opendir`, `readdir`, `lstat`): runs on the thread pool, or off the loop at submit.
///
/// What is in the tree:
/// - regular files (hidden ones too), unless the filter leaves them out (`excluded`);
/// - symbolic links are not followed (`symlink`) unless `followLinks`; then a link to a file is that file, a link
///   to a directory is walked as a directory, unless it leads to a directory the walk is already inside
///   (`symlink_loop`, also for a link that leads to itself), and a link that leads nowhere is `broken_symlink`;
/// - FIFOs, sockets and devices are `not_regular`; a directory that cannot be read is `unreadable_directory`; an
///   entry gone between `readdir` and `lstat` is `vanished`;
/// - empty directories are not recreated.
struct UploadTreeWalk {
    /// A regular file found.
    struct File {
        /// Its absolute path (through the folder given).
        var path: BytePath
        /// Its path relative to the folder given, `/`-separated.
        var relative: BytePath
        /// Its `stat` identity when found.
        var identity: SourceIdentity
    }

    /// An entry passed over.
    struct Skip {
        /// Its absolute path.
        var path: BytePath
        /// `symlink`, `symlink_loop`, `broken_symlink`, `not_regular`, `excluded`, `unreadable_directory` or
        /// `vanished`.
        var reason: String
        /// Why, in words, with what to do when something can be done.
        var message: String
    }

    let filter: UploadFilter
    let followLinks: Bool

    private(set) var skips: [Skip] = []

    init(filter: UploadFilter, followLinks: Bool) {
        self.filter = filter
        self.followLinks = followLinks
    }

    /// Walks the folder `root` (already known to be a directory, of `node`), calling `found` with each regular
    /// file in the walk's order.
    /// - Throws: `JobError` `source_unreadable` when `root` itself cannot be read.
    mutating func walk(root: BytePath, node: FileNode, found: (File) -> Void) throws(JobError) {
        guard let names = Self.entries(of: root) else {
            throw JobError(
                code: "source_unreadable",
                message: "cannot read folder \(root): \(DirectoryIO.errorText(errno)); fix its permissions")
        }
        walk(directory: root, relative: nil, names: names, ancestors: [node], found: found)
    }

    private mutating func walk(
        directory: BytePath, relative: BytePath?, names: [BytePath], ancestors: [FileNode], found: (File) -> Void
    ) {
        for name in names {
            let path = BytePath.join(directory, name)
            let inner = relative.map { BytePath.join($0, name) } ?? name
            var info = stat()
            guard path.withCString({ lstat($0, &info) }) == 0 else {
                skip(path, "vanished", "it was removed while the folder was listed")
                continue
            }
            var mode = UInt32(info.st_mode)
            if DirectoryIO.isLink(mode) {
                guard followLinks else {
                    skip(path, "symlink", "a symbolic link; links are not followed without --follow-links")
                    continue
                }
                guard path.withCString({ stat($0, &info) }) == 0 else {
                    let code = errno
                    if code == ELOOP {
                        skip(path, "symlink_loop", "a symbolic link that leads back to itself")
                    } else {
                        skip(path, "broken_symlink", "a symbolic link to nothing: \(DirectoryIO.errorText(code))")
                    }
                    continue
                }
                mode = UInt32(info.st_mode)
            }
            if DirectoryIO.isDirectory(mode) {
                let node = FileNode(inode: UInt64(info.st_ino), device: UInt64(info.st_dev))
                guard !ancestors.contains(node) else {
                    skip(path, "symlink_loop", "a symbolic link to a folder that contains it; not walked again")
                    continue
                }
                guard let children = Self.entries(of: path) else {
                    skip(
                        path, "unreadable_directory",
                        "cannot read this folder: \(DirectoryIO.errorText(errno)); its files are not uploaded")
                    continue
                }
                walk(directory: path, relative: inner, names: children, ancestors: ancestors + [node], found: found)
            } else if DirectoryIO.isRegular(mode) {
                if case .excluded(let rule) = filter.verdict(inner) {
                    skip(path, "excluded", "left out by \(rule)")
                    continue
                }
                found(File(path: path, relative: inner, identity: DirectoryIO.identity(info)))
            } else {
                skip(path, "not_regular", "a \(Self.kind(mode)), not a regular file")
            }
        }
    }

    private mutating func skip(_ path: BytePath, _ reason: String, _ message: String) {
        skips.append(Skip(path: path, reason: reason, message: message))
    }

    /// The names in `directory` but `.` and `..`, in byte order; `nil` (with `errno` set) if it cannot be read.
    static func entries(of directory: BytePath) -> [BytePath]? {
        guard let stream = directory.withCString({ opendir($0) }) else { return nil }
        defer { closedir(stream) }
        var names: [BytePath] = []
        while let entry = readdir(stream) {
            let name = DirectoryEntry.name(entry)
            if name == [UInt8(ascii: ".")] || name == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            names.append(BytePath(bytes: name))
        }
        return names.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
    }

    /// "FIFO", "socket", "character device", "block device" or "special file".
    static func kind(_ mode: UInt32) -> String {
        switch mode & UInt32(S_IFMT) {
        case UInt32(S_IFIFO): "FIFO (named pipe)"
        case UInt32(S_IFSOCK): "socket"
        case UInt32(S_IFCHR): "character device"
        case UInt32(S_IFBLK): "block device"
        default: "special file"
        }
    }
}
