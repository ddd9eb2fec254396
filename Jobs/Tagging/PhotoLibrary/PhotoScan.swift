import TrailbookLoop

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
        /// The path: the root joined with the names walked.
        public var path: String
        /// Its stamp (from `stat`, links followed).
        public var stamp: FileStamp
    }

    /// The directory to walk.
    public let root: String
    /// Called with a directory's path and `errno` when it cannot be opened.
    public let unreadable: (String, Int32) -> Void
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
            /// A name that is not UTF-8: the photo library keeps paths as text (its `path` column, the photo
            /// JSON), so it cannot be stored; rename the file to import it.
            case nameNotUTF8 = "name_not_utf8"
        }

        /// The entry's path, as bytes (its name need not be UTF-8).
        public var path: [UInt8]
        public var reason: Reason
        /// What happened, for people (an `strerror` text for `unreadable…`, else empty).
        public var detail: String
    }

    public init(
        root: String, unreadable: @escaping (String, Int32) -> Void = { _, _ in },
        passedOver: @escaping (Skip) -> Void = { _ in }
    ) {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
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
    public static func isPhotoName(_ name: String) -> Bool {
        guard let dot = name.lastIndex(of: ".") else { return false }
        return photoExtensions.contains(name[name.index(after: dot)...].lowercased())
    }

    public func makeIterator() -> Iterator { Iterator(scan: self) }

    /// The scan's iterator.
    public struct Iterator: IteratorProtocol {
        private let scan: PhotoScan
        /// Directories still to list, and the sorted entries left in the ones being listed.
        private var stack: [(directory: String, names: [String])] = []
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
                let path = stack[stack.count - 1].directory + "/" + name
                var st = stat()
                guard stat(path, &st) == 0 else {  // dangling link, raced deletion
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

        private func skip(_ path: String, _ reason: Skip.Reason, _ detail: String = "") {
            scan.passedOver(Skip(path: Array(path.utf8), reason: reason, detail: detail))
        }

        private mutating func enter(_ directory: String) {
            var st = stat()
            guard stat(directory, &st) == 0 else {
                scan.unreadable(directory, errno)
                skip(directory, .unreadableDirectory, String(cString: strerror(errno)))
                return
            }
            guard visited.insert([UInt64(st.st_dev), UInt64(st.st_ino)]).inserted else {
                skip(directory, .alreadyVisited)
                return
            }
            guard let dir = opendir(directory) else {
                scan.unreadable(directory, errno)
                skip(directory, .unreadableDirectory, String(cString: strerror(errno)))
                return
            }
            defer { closedir(dir) }
            var names: [String] = []
            while let entry = readdir(dir) {
                let bytes = DirectoryEntry.name(entry)
                if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }  // . and ..
                guard let name = String(validating: bytes, as: UTF8.self) else {
                    scan.passedOver(Skip(path: Array(directory.utf8) + [0x2F] + bytes, reason: .nameNotUTF8, detail: ""))
                    continue
                }
                if name.hasPrefix(".") {
                    skip(directory + "/" + name, .hidden)
                    continue
                }
                names.append(name)
            }
            // Reversed, so popLast() yields them in ascending byte order.
            names.sort { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            stack.append((directory, names.reversed()))
        }
    }
}
