import TrailbookEngine

#if canImport(Glibc)
    import Glibc
#endif

/// The directory operations of a folder upload to `file://`: the destination made if missing, and the folders
/// of each file's relative path made under it. Blocking: on the thread pool, or off the loop at submit.
extension DirectoryIO {
    /// Checks that `directory` is a writable directory or, if missing, that its nearest existing ancestor is (so
    /// `makeDirectories` can create it, as `rclone copy` does).
    /// - Throws: `JobError` `destination_not_directory`, `destination_not_writable`.
    static func checkCreatable(_ directory: BytePath) throws(JobError) {
        var path = directory
        while true {
            switch status(path) {
            case .success(let (_, mode)):
                guard isDirectory(mode) else {
                    throw JobError(
                        code: "destination_not_directory",
                        message:
                            "\(path) is not a directory, so \(directory) cannot be one; give a directory to upload into"
                    )
                }
                guard path.withCString({ access($0, W_OK | X_OK) }) == 0 else {
                    throw JobError(
                        code: "destination_not_writable",
                        message:
                            "cannot write into \(path): \(errorText(errno)); fix its permissions or choose another "
                            + "directory")
                }
                return
            case .failure(let error) where error.code == ENOENT:
                guard let parent = parent(of: path) else { return }
                path = parent
            case .failure(let error):
                throw JobError(
                    code: "destination_not_writable", message: "cannot examine \(path): \(errorText(error.code))")
            }
        }
    }

    /// `mkdir -p directory` (mode 0777 less the umask).
    /// - Throws: `JobError` `destination_not_directory` (a file in the way), `destination_not_writable`,
    ///   `write_failed` (retryable for a full disk or an I/O error).
    static func makeDirectories(_ directory: BytePath) throws(JobError) {
        if case .success(let (_, mode)) = status(directory), isDirectory(mode) { return }
        if let parent = parent(of: directory) { try makeDirectories(parent) }
        guard directory.withCString({ mkdir($0, 0o777) }) != 0 else { return }
        let code = errno
        switch (code, status(directory)) {
        case (EEXIST, .success(let (_, mode))) where isDirectory(mode): return
        case (EEXIST, _), (ENOTDIR, _):
            throw JobError(
                code: "destination_not_directory",
                message:
                    "cannot create directory \(directory): a file is in the way; move it or choose another destination")
        case (EACCES, _), (EPERM, _), (EROFS, _):
            throw JobError(
                code: "destination_not_writable",
                message: "cannot create directory \(directory): \(errorText(code)); fix the permissions or choose "
                    + "another destination")
        default:
            throw writeFailed("cannot create directory \(directory)", code)
        }
    }

    /// Makes the folders of `name` (a relative path) under `root`, each inside the one before. A folder there
    /// that is a symbolic link is used only if it leads inside `root`.
    /// - Throws: `JobError` `bad_name` (a file where a folder goes, a link that leads outside), or as
    ///   `makeDirectories`.
    static func makeParents(of name: BytePath, in root: BytePath) throws(JobError) {
        let components = name.bytes.split(separator: UInt8(ascii: "/"))
        guard components.count > 1 else { return }
        var path = root
        for component in components.dropLast() {
            path = BytePath.join(path, BytePath(bytes: component))
            if let mode = linkMode(path) {
                if isDirectory(mode) { continue }
                if isLink(mode), let target = resolved(path), let base = resolved(root),
                    target.bytes.starts(with: BytePath.join(base, "").bytes),
                    case .success(let (_, targetMode)) = status(path), isDirectory(targetMode)
                {
                    continue
                }
                throw JobError(
                    code: "bad_name",
                    message:
                        "\(path) is \(isLink(mode) ? "a symbolic link that leads outside the destination" : "not a folder"), "
                        + "so \(name) cannot be written under it; move it away or choose another destination")
            }
            guard path.withCString({ mkdir($0, 0o777) }) == 0 || errno == EEXIST else {
                let code = errno
                if code == EACCES || code == EPERM || code == EROFS {
                    throw JobError(
                        code: "destination_not_writable", message: "cannot create folder \(path): \(errorText(code))")
                }
                throw writeFailed("cannot create folder \(path)", code)
            }
        }
    }

    /// The folders under `root` that hold the files named `names` (relative paths), `root` included.
    static func folders(of names: [BytePath], in root: BytePath) -> Set<BytePath> {
        var folders: Set<BytePath> = [root]
        for name in names {
            guard let slash = name.bytes.lastIndex(of: UInt8(ascii: "/")) else { continue }
            folders.insert(BytePath.join(root, BytePath(bytes: name.bytes[..<slash])))
        }
        return folders
    }

    /// `path` without its last component, or `nil` for `/` or a single component.
    static func parent(of path: BytePath) -> BytePath? {
        var bytes = path.bytes[...]
        while bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes = bytes.dropLast() }
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        if slash == bytes.startIndex { return bytes.count > 1 ? BytePath("/") : nil }
        return BytePath(bytes: bytes[..<slash])
    }
}
