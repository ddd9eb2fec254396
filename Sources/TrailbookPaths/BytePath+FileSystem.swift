#if canImport(Glibc)
    import Glibc
#endif

extension BytePath {
    /// Where the absolute path leads in the file system, for telling two spellings of one file or directory apart
    /// (`..`, `.`, repeated slashes, symbolic links anywhere in it, a final link included).
    ///
    /// The longest leading part that exists is replaced by what `realpath(3)` makes of it; the rest (what does not
    /// exist yet, such as a destination directory an upload will create) is appended with `.` dropped and `..`
    /// taking away the component before it, as the kernel would once the rest exists as plain directories
    /// (POSIX.1-2017, 4.13 Pathname Resolution). A relative path is returned lexically normalised, unresolved.
    /// Reads the file system (one `realpath` per missing trailing component, at most); never fails.
    public var resolvedByFileSystem: BytePath {
        guard isAbsolute else { return lexicallyNormalized }
        let slash = UInt8(ascii: "/")
        let components = bytes.split(separator: slash, omittingEmptySubsequences: true).map(Array.init)
        // Try the whole path, then ever shorter prefixes, until one exists.
        for existing in stride(from: components.count, through: 0, by: -1) {
            let prefix = BytePath(bytes: [slash] + components[..<existing].joined(separator: [slash]))
            guard let resolved = prefix.realPath() else { continue }
            var out = resolved.bytes.split(separator: slash, omittingEmptySubsequences: true).map(Array.init)
            for component in components[existing...] {
                if component == [UInt8(ascii: ".")] { continue }
                if component == [UInt8(ascii: "."), UInt8(ascii: ".")] {
                    _ = out.popLast()
                } else {
                    out.append(component)
                }
            }
            return BytePath(bytes: [slash] + out.joined(separator: [slash]))
        }
        return lexicallyNormalized
    }

    /// `realpath(3)` of the path, or `nil` when some component does not exist or cannot be searched.
    private func realPath() -> BytePath? {
        guard let pointer = withCString({ realpath($0, nil) }) else { return nil }
        defer { free(pointer) }
        return BytePath(bytes: UnsafeBufferPointer(start: pointer, count: strlen(pointer)).map { UInt8(bitPattern: $0) })
    }
}
