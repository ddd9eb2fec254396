#if canImport(Glibc)
import Glibc
#endif

/// A walk of a directory tree that yields its JPEG files (`*.jpg`, `*.jpeg`, any case) in a stable order.
///
/// Order: depth first, entries of each directory sorted by their bytes (so the same tree always gives the same
/// sequence, which lets an import checkpoint "done up to here"). Symbolic links are followed, but a directory
/// already visited (same device and inode) is skipped, so a link loop ends. Entries whose names start with `.`
/// are skipped (hidden files, macOS `._` resource forks). Directories that cannot be read are reported through
/// `unreadable` and skipped. Lazy: memory is the depth of the tree times the width of a directory.
public struct PhotoScan: Sequence {
    /// A JPEG found by the scan.
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

    public init(root: String, unreadable: @escaping (String, Int32) -> Void = { _, _ in }) {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        self.unreadable = unreadable
    }

    /// Whether `name` ends in `.jpg` or `.jpeg`, ignoring case.
    public static func isJPEGName(_ name: String) -> Bool {
        let lower = name.lowercased()
        return lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg")
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
                guard stat(path, &st) == 0 else { continue }  // dangling link, raced deletion
                if (st.st_mode & S_IFMT) == S_IFDIR {
                    enter(path)
                } else if (st.st_mode & S_IFMT) == S_IFREG, PhotoScan.isJPEGName(name) {
                    return File(path: path, stamp: FileStamp(st))
                }
            }
            return nil
        }

        private mutating func enter(_ directory: String) {
            var st = stat()
            guard stat(directory, &st) == 0 else {
                scan.unreadable(directory, errno)
                return
            }
            guard visited.insert([UInt64(st.st_dev), UInt64(st.st_ino)]).inserted else { return }
            guard let dir = opendir(directory) else {
                scan.unreadable(directory, errno)
                return
            }
            defer { closedir(dir) }
            var names: [String] = []
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name.hasPrefix(".") { continue }
                names.append(name)
            }
            // Reversed, so popLast() yields them in ascending byte order.
            names.sort { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            stack.append((directory, names.reversed()))
        }
    }
}
