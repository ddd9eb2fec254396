import CSQLite

extension Database {
    /// Brings the schema up to date: runs each migration whose index is at or past `PRAGMA user_version`.
    ///
    /// `migrations[i]` moves the schema from version `i` to `i + 1`; each runs in its own transaction together
    /// with the version bump, so a crash never leaves a half-migrated store. The version lives in the file's
    /// header (https://www.sqlite.org/pragma.html#pragma_user_version).
    /// - Returns: the schema version now in force (`migrations.count`).
    /// - Throws: `SQLiteError` if a migration fails, or if the file is newer than this program (its version is
    ///   past `migrations.count`), so an old binary never writes to a store it does not understand.
    @discardableResult
    public func migrate(_ migrations: [String]) throws -> Int {
        try migrate(migrations.map(Migration.sql))
    }

    /// Brings the schema up to date with steps that may be code as well as SQL; as `migrate(_:)` otherwise.
    /// - Throws: `SQLiteError`, or whatever a `.code` step throws (its transaction is rolled back).
    @discardableResult
    public func migrate(_ migrations: [Migration]) throws -> Int {
        let current = Int(try query("PRAGMA user_version").first?.int(0) ?? 0)
        guard current <= migrations.count else {
            throw SQLiteError(
                code: SQLITE_ERROR,
                message: "store schema version \(current) is newer than this program's \(migrations.count); upgrade trailbook-jobs"
            )
        }
        for version in current..<migrations.count {
            try transaction {
                switch migrations[version] {
                case .sql(let sql): try execute(sql)
                case .code(let step): try step(self)
                }
                try execute("PRAGMA user_version = \(version + 1)")
            }
        }
        return migrations.count
    }

    /// How hard a commit waits for the disk (https://www.sqlite.org/pragma.html#pragma_synchronous).
    public enum Synchronous: String, Sendable {
        /// Every commit is fsynced: it survives power loss.
        case full = "FULL"
        /// In WAL mode, commits are atomic and survive a process crash (`kill -9`); a power loss may roll back the
        /// last commits, never corrupt the file. The WAL is fsynced at checkpoints only.
        case normal = "NORMAL"
    }

    /// Puts the connection in WAL mode with foreign keys on and the given `synchronous` level
    /// (https://www.sqlite.org/wal.html).
    ///
    /// - Throws: `SQLiteError` if the journal mode cannot be changed (for example, on a read-only file).
    public func enableWriteAheadLog(synchronous: Synchronous = .full) throws {
        try execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = \(synchronous.rawValue); PRAGMA foreign_keys = ON;")
    }
}

/// One step of a schema migration: SQL, or code for what SQL cannot do (Unicode normalization, say), run with the
/// database inside the step's transaction. A string literal is a `.sql` step.
public enum Migration: ExpressibleByStringLiteral, Sendable {
    /// Statements run with `Database.execute`.
    case sql(String)
    /// A function of the open database, run inside the migration's transaction.
    case code(@Sendable (Database) throws -> Void)

    public init(stringLiteral sql: String) { self = .sql(sql) }
}
