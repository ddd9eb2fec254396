#if canImport(Glibc)
    import Glibc
#endif

/// The directory where SQLite writes its temporary files (a `VACUUM`'s copy of the database, sorts and indexes too
/// large for memory), found as SQLite's Unix VFS finds it: `SQLITE_TMPDIR`, `TMPDIR`, `/var/tmp`, `/usr/tmp`,
/// `/tmp`, then `.`, the first that is a directory this process may write and search.
///
/// So that a "database or disk is full" that came from that directory names it, not the store's file system
/// (`SQLiteError.cause`).
public enum SQLiteTemporaryDirectory {
    /// The directory SQLite would use now.
    public static var path: String {
        let candidates = [getenv("SQLITE_TMPDIR"), getenv("TMPDIR")].compactMap { $0.map { String(cString: $0) } }
            + ["/var/tmp", "/usr/tmp", "/tmp"]
        for candidate in candidates where !candidate.isEmpty {
            var info = stat()
            if stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, access(candidate, W_OK | X_OK) == 0 {
                return candidate
            }
        }
        return "."
    }

    /// The temporary directory, when it rather than the file system of the database at `databasePath` is the
    /// one a `SQLITE_FULL` most likely came from; `nil` when that is the database's.
    ///
    /// SQLite does not say which file a full disk refused, and its temporary files are gone once the statement
    /// failed, so this compares the two file systems as they are now: the same file system is the database's;
    /// the database's with less than 1 MiB free is the full one; else the one with less room is (the copy a
    /// `VACUUM` makes is as large as the database, and did not fit). An in-memory database has only the
    /// temporary directory.
    public static func blamedForFullDisk(databasePath: String) -> String? {
        let temporary = path
        guard !databasePath.isEmpty, databasePath != ":memory:" else { return temporary }
        let directory = databasePath.lastIndex(of: "/").map { String(databasePath[..<$0]) } ?? "."
        var databaseInfo = stat()
        var temporaryInfo = stat()
        guard stat(directory.isEmpty ? "/" : directory, &databaseInfo) == 0, stat(temporary, &temporaryInfo) == 0,
            databaseInfo.st_dev != temporaryInfo.st_dev
        else { return nil }
        guard let databaseFree = freeBytes(directory.isEmpty ? "/" : directory), let temporaryFree = freeBytes(temporary)
        else { return nil }
        if databaseFree < 1 << 20 { return nil }
        return temporaryFree < databaseFree ? temporary : nil
    }

    /// Bytes an unprivileged process may still write on the file system of `path`, or `nil` if unknown.
    private static func freeBytes(_ path: String) -> Int64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }
}
