import TrailbookEngine

#if canImport(Glibc)
    import Glibc
#endif

/// The submit-time checks of a directory upload that need the file system (and the source checks every upload
/// makes). Blocking: off the loop thread at submit, on the thread pool when a job runs.
extension DirectoryIO {
    /// The checks of a directory upload that need the file system, for the sources at `indices`.
    ///
    /// Sources: exist (`source_missing`), are regular files (`source_not_regular`), are readable
    /// (`source_unreadable`). Destination: exists (`destination_missing`), is a directory
    /// (`destination_not_directory`), is writable (`destination_not_writable`). Names: `DIR/NAME` must not be a
    /// link that resolves outside `DIR` or a directory (`bad_name`). (The job's `.part` file, named per job, is
    /// opened with `O_NOFOLLOW`, so a link put there fails the write instead of being followed.)
    /// - Returns: the identities of the checked sources, in `indices` order.
    static func preflight(files: [BytePath], names: [BytePath], directory: BytePath, indices: Range<Int>)
        throws(JobError) -> [SourceIdentity]
    {
        let identities = try sourceIdentities(files: files, indices: indices)
        try checkDestination(names: names, directory: directory, indices: indices, files: files)
        return identities
    }

    /// The source checks of `preflight` alone (for uploads that go to a server): each source at `indices` exists
    /// (`source_missing`), is a regular file (`source_not_regular`) and is readable (`source_unreadable`).
    /// - Returns: their identities, in `indices` order.
    static func sourceIdentities(files: [BytePath], indices: Range<Int>) throws(JobError) -> [SourceIdentity] {
        var identities: [SourceIdentity] = []
        for index in indices {
            let path = files[index]
            switch status(path) {
            case .failure(let error): throw sourceError(path, error.code)
            case .success(let (identity, mode)):
                guard isRegular(mode) else {
                    throw JobError(
                        code: "source_not_regular",
                        message: "source \(path) is not a regular file (a directory, device or pipe); "
                            + "upload the files themselves")
                }
                guard path.withCString({ access($0, R_OK) }) == 0 else { throw sourceError(path, errno) }
                try checkLength(of: path, size: identity.size)
                identities.append(identity)
            }
        }
        return identities
    }

    /// Refuses a source that holds more than its `stat` size (`source_not_regular`): a `/proc` file says 0 bytes
    /// and would be uploaded empty (a `/sys` file that says more than it holds fails at its end instead).
    private static func checkLength(of path: BytePath, size: Int64) throws(JobError) {
        let fd = path.withCString { open($0, O_RDONLY | O_NONBLOCK | O_CLOEXEC) }
        guard fd >= 0 else { throw sourceError(path, errno) }
        defer { close(fd) }
        switch hasBytes(fd, past: size) {
        case .failure(let error): throw sourceError(path, error.code)
        case .success(false): return
        case .success(true):
            throw JobError(
                code: "source_not_regular",
                message: "source \(path) holds more than the \(size) bytes its size says: a special file (as in /proc or "
                    + "/sys) or one being written right now; copy it to a regular file and upload that")
        }
    }

    private static func checkDestination(names: [BytePath], directory: BytePath, indices: Range<Int>, files: [BytePath])
        throws(JobError)
    {
        switch status(directory) {
        case .failure(let error):
            let code = error.code
            if code == ENOENT || code == ENOTDIR {
                throw JobError(
                    code: "destination_missing",
                    message: "destination directory \(directory) does not exist; create it first (mkdir -p)")
            }
            throw JobError(
                code: "destination_not_writable",
                message: "cannot examine destination directory \(directory): \(errorText(code))")
        case .success(let (_, mode)):
            guard isDirectory(mode) else {
                throw JobError(
                    code: "destination_not_directory",
                    message: "destination \(directory) is not a directory; give the directory to upload into")
            }
        }
        guard directory.withCString({ access($0, W_OK | X_OK) }) == 0 else {
            throw JobError(
                code: "destination_not_writable",
                message: "cannot write into destination directory \(directory): \(errorText(errno)); "
                    + "fix its permissions or choose another directory")
        }
        guard let root = resolved(directory) else {
            throw JobError(
                code: "destination_missing", message: "cannot resolve destination directory \(directory)")
        }
        for index in indices {
            let name = names[index]
            let final = BytePath.join(root, name)
            if let mode = linkMode(final) {
                if isLink(mode) {
                    let inside = resolved(final).map { $0.bytes.starts(with: BytePath.join(root, "").bytes) } ?? false
                    guard inside else {
                        throw JobError(
                            code: "bad_name",
                            message: "\(final) is a symbolic link that leads outside the destination directory; "
                                + "remove it or choose another destination")
                    }
                } else if isDirectory(mode) {
                    throw JobError(
                        code: "bad_name",
                        message: "\(final) is a directory and cannot be replaced by the upload of \(files[index]); "
                            + "move it away or choose another destination")
                }
            }
        }
    }
}
