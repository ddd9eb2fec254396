import TrailbookLoop
import TrailbookPaths

#if canImport(Glibc)
import Glibc
#endif

/// A walk of a directory tree that yields its image files in a stable order: the names `isPhotoName` accepts
/// (JPEG, HEIC/HEIF, AVIF, and other image formats so that they are reported, not skipped). The names only pick
/// the candidates; what a file is, is decided from its content when it is read (`PhotoFormat`).
///
/// Order: depth first, entries of each directory sorted by their bytes (so the same tree always gives the same
/// sequence, which lets an import checkpoint "done up to here"). Symbolic links are followed, but a directory
/// already visited (same device and inode) is skipped, so a link loop ends. Entries whose names start with `.`
/// are skipped (hidden files, macOS `._` resource forks). Directories that cannot be read are reported through
/// `unreadable` and skipped. Lazy: memory is the depth of the tree times the width of a directory.
///
/// Nothing is passed over in silence: every entry the walk does not yield is reported to `passedOver` with a
/// reason (`Skip.Reason`), so an import can count and list it.
public struct PhotoScan: Sequence {
    /// An image file found by the scan.
    public struct File: Hashable, Sendable {
        /// The path: the root joined with the names walked, byte for byte (names need not be UTF-8).
        public var path: BytePath
        /// Its stamp (from `stat`, links followed).
        public var stamp: FileStamp
    }

    /// The directory to walk.
    public let root: BytePath
    /// Called with a directory's path and `errno` when it cannot be opened.
    public let unreadable: (BytePath, Int32) -> Void
    /// Called for each entry the walk passes over, with why.
    public let passedOver: (Skip) -> Void

    /// An entry the walk did not yield.
    public struct Skip: Sendable, Equatable {
        /// Why an entry was passed over.
        public enum Reason: String, Sendable {
            /// Not named like an image file (`photoExtensions`: `*.jpg`, `*.heic`, `*.png`, …).
            case notPhotoName = "not_photo_name"
            /// Its name starts with `.` (hidden; for a directory, nothing under it is looked at).
            case hidden
            /// A FIFO, socket or device.
            case notRegular = "not_regular"
            /// `stat` failed: a dangling symbolic link, an entry removed during the walk, no permission.
            case unreadable
            /// A directory that cannot be listed.
            case unreadableDirectory = "unreadable_directory"
            /// A directory reached again through a symbolic link (a link loop, or a second way in).
            case alreadyVisited = "already_visited"
        }

        /// The entry's path, as bytes (its name need not be UTF-8).
        public var path: [UInt8]
        public var reason: Reason
        /// What happened, for people (an `strerror` text for `unreadable…`, else empty).
        public var detail: String
    }

    /// A scan of `root` (a trailing `/` is dropped).
    public init(
        root: BytePath, unreadable: @escaping (BytePath, Int32) -> Void = { _, _ in },
        passedOver: @escaping (Skip) -> Void = { _ in }
    ) {
        self.root = root.bytes.count > 1 && root.bytes.last == UInt8(ascii: "/") ? BytePath(bytes: root.bytes.dropLast()) : root
        self.unreadable = unreadable
        self.passedOver = passedOver
    }

    /// Whether `name` ends in `.jpg` or `.jpeg`, ignoring case.
    public static func isJPEGName(_ name: String) -> Bool {
        let lower = name.lowercased()
        return lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg")
    }

    /// File name extensions (lower case) of the files an import reads: JPEG, the HEIF family, and image formats
    /// the library does not read, which an import lists as `unsupported_format` rather than skip in silence.
    public static let photoExtensions: Set<String> = [
        "jpg", "jpeg", "jpe", "jfif", "heic", "heif", "hif", "heics", "heifs", "avif", "png", "gif", "webp", "tif",
        "tiff", "bmp", "jxl", "dng",
    ]

    /// Whether `name`'s extension is in `photoExtensions`, ignoring case.
    public static func isPhotoName(_ name: String) -> Bool { isPhotoName(BytePath(name)) }

    /// Whether the bytes after `name`'s last `.` spell an extension in `photoExtensions`, ignoring case (the rest
    /// of the name need not be UTF-8).
    public static func isPhotoName(_ name: BytePath) -> Bool {
        guard let dot = name.bytes.lastIndex(of: UInt8(ascii: ".")),
            let ext = String(validating: name.bytes[(dot + 1)...], as: UTF8.self)
        else { return false }
        return photoExtensions.contains(ext.lowercased())
    }

    /// A scan of `root` (text); see `init(root:unreadable:passedOver:)`.
    public init(
        root: String, unreadable: @escaping (BytePath, Int32) -> Void = { _, _ in },
        passedOver: @escaping (Skip) -> Void = { _ in }
    ) {
        self.init(root: BytePath(root), unreadable: unreadable, passedOver: passedOver)
    }

    public func makeIterator() -> Iterator { Iterator(scan: self) }

    /// The scan's iterator.
    public struct Iterator: IteratorProtocol {
        private let scan: PhotoScan
        /// Directories still to list, and the sorted entries left in the ones being listed.
        private var stack: [(directory: BytePath, names: [BytePath])] = []
        private var visited = Set<[UInt64]>()
        private var started = false

        init(scan: PhotoScan) { self.scan = scan }

        public mutating func next() -> File? {
            if !started {
                started = true
                enter(scan.root)
            }
            while !stack.isEmpty {
                guard let name = stack[stack.count - 1].names.popLast() else {
                    stack.removeLast()
                    continue
                }
                let path = BytePath.join(stack[stack.count - 1].directory, name)
                var st = stat()
                guard path.withCString({ stat($0, &st) }) == 0 else {  // dangling link, raced deletion
                    skip(path, .unreadable, String(cString: strerror(errno)))
                    continue
                }
                if (st.st_mode & S_IFMT) == S_IFDIR {
                    enter(path)
                } else if (st.st_mode & S_IFMT) == S_IFREG {
                    if PhotoScan.isPhotoName(name) { return File(path: path, stamp: FileStamp(st)) }
                    skip(path, .notPhotoName)
                } else {
                    skip(path, .notRegular)
                }
            }
            return nil
        }

        private func skip(_ path: BytePath, _ reason: Skip.Reason, _ detail: String = "") {
            scan.passedOver(Skip(path: path.bytes, reason: reason, detail: detail))
        }

        private mutating func enter(_ directory: BytePath) {
            var st = stat()
            guard directory.withCString({ stat($0, &st) }) == 0 else {
                scan.unreadable(directory, errno)
                skip(directory, .unreadableDirectory, String(cString: strerror(errno)))
                return
            }
            guard visited.insert([UInt64(st.st_dev), UInt64(st.st_ino)]).inserted else {
                skip(directory, .alreadyVisited)
                return
            }
            guard let dir = directory.withCString({ opendir($0) }) else {
                scan.unreadable(directory, errno)
                skip(directory, .unreadableDirectory, String(cString: strerror(errno)))
                return
            }
            defer { closedir(dir) }
            // Names as bytes, never as `String`: a name that is not UTF-8 (`caf\xe9.jpg`) keeps its bytes, and
            // `café` in NFC and in NFD stay two names (String equality would make them one).
            var names: [BytePath] = []
            while let entry = readdir(dir) {
                let bytes = DirectoryEntry.name(entry)
                if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }  // . and ..
                if bytes.first == 0x2E {
                    skip(BytePath.join(directory, BytePath(bytes: bytes)), .hidden)
                    continue
                }
                names.append(BytePath(bytes: bytes))
            }
            // Reversed, so popLast() yields them in ascending byte order.
            names.sort { $0.bytes.lexicographicallyPrecedes($1.bytes) }
            stack.append((directory, names.reversed()))
        }
    }
}
