import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// Lists the files of a folder upload: walks one folder given, depth first, in byte order of the names in each
/// directory, and hands over each regular file (with its path relative to that folder) or entry passed over (with
/// its reason) one at a time as it is met (`next`), keeping only the directories it is inside and their names, so
/// a tree of 100 000 files is listed a page at a time and never held whole. Blocking (`opendir`, `readdir`,
/// `lstat`): runs on the thread pool, or off the loop at submit.
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

    /// What the walk met next.
    enum Met {
        /// A regular file to upload.
        case file(File)
        /// An entry passed over.
        case skip(Skip)
    }

    /// A directory the walk is inside: its names, and how far through them it is.
    private struct Level {
        /// Its absolute path.
        var directory: BytePath
        /// Its path relative to the folder given; `nil` for the folder itself.
        var relative: BytePath?
        /// Its entries but `.` and `..`, in byte order.
        var names: [BytePath]
        /// The index in `names` of the next entry to look at.
        var next: Int
        /// Its device and inode, to catch a link back into it.
        var node: FileNode
    }

    let filter: UploadFilter
    let followLinks: Bool
    /// The directories the walk is inside, the folder given first.
    private var levels: [Level]

    /// A walk of the folder `root` (already known to be a directory, of `node`).
    /// - Throws: `JobError` `source_unreadable` when `root` itself cannot be read.
    init(root: BytePath, node: FileNode, filter: UploadFilter, followLinks: Bool) throws(JobError) {
        guard let names = Self.entries(of: root) else {
            throw JobError(
                code: "source_unreadable",
                message: "cannot read folder \(root): \(DirectoryIO.errorText(errno)); fix its permissions")
        }
        self.filter = filter
        self.followLinks = followLinks
        levels = [Level(directory: root, relative: nil, names: names, next: 0, node: node)]
    }

    /// The next regular file or entry passed over, in the walk's order; `nil` once the whole folder is walked.
    mutating func next() -> Met? {
        while let level = levels.last {
            guard level.next < level.names.count else {
                levels.removeLast()
                continue
            }
            levels[levels.count - 1].next += 1
            let name = level.names[level.next]
            let path = BytePath.join(level.directory, name)
            let inner = level.relative.map { BytePath.join($0, name) } ?? name
            var info = stat()
            guard path.withCString({ lstat($0, &info) }) == 0 else {
                return skip(path, "vanished", "it was removed while the folder was listed")
            }
            var mode = UInt32(info.st_mode)
            if DirectoryIO.isLink(mode) {
                guard followLinks else {
                    return skip(path, "symlink", "a symbolic link; links are not followed without --follow-links")
                }
                guard path.withCString({ stat($0, &info) }) == 0 else {
                    let code = errno
                    if code == ELOOP { return skip(path, "symlink_loop", "a symbolic link that leads back to itself") }
                    return skip(path, "broken_symlink", "a symbolic link to nothing: \(DirectoryIO.errorText(code))")
                }
                mode = UInt32(info.st_mode)
            }
            if DirectoryIO.isDirectory(mode) {
                let node = FileNode(inode: UInt64(info.st_ino), device: UInt64(info.st_dev))
                guard !levels.contains(where: { $0.node == node }) else {
                    return skip(path, "symlink_loop", "a symbolic link to a folder that contains it; not walked again")
                }
                guard let children = Self.entries(of: path) else {
                    return skip(
                        path, "unreadable_directory",
                        "cannot read this folder: \(DirectoryIO.errorText(errno)); its files are not uploaded")
                }
                levels.append(Level(directory: path, relative: inner, names: children, next: 0, node: node))
                continue
            }
            if DirectoryIO.isRegular(mode) {
                if case .excluded(let rule) = filter.verdict(inner) {
                    return skip(path, "excluded", "left out by \(rule)")
                }
                return .file(File(path: path, relative: inner, identity: DirectoryIO.identity(info)))
            }
            return skip(path, "not_regular", "a \(Self.kind(mode)), not a regular file")
        }
        return nil
    }

    private func skip(_ path: BytePath, _ reason: String, _ message: String) -> Met {
        .skip(Skip(path: path, reason: reason, message: message))
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
