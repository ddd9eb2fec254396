import CSQLite

#if canImport(Glibc)
    import Glibc
#endif

/// An error reported by SQLite: its result code and message.
///
/// `code` is SQLite's extended result code (https://www.sqlite.org/rescode.html).
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// SQLite's extended result code, for example `SQLITE_CORRUPT` (11) or `SQLITE_BUSY` (5).
    public let code: Int32
    /// SQLite's message, with the statement or path it concerns where known.
    public let message: String

    /// For `SQLITE_FULL`: SQLite's temporary directory, when it (not the database's file system) is the one that
    /// is full (`SQLiteTemporaryDirectory.blamedForFullDisk`); `nil` otherwise.
    public let fullTemporaryDirectory: String?

    public init(code: Int32, message: String, fullTemporaryDirectory: String? = nil) {
        self.code = code
        self.message = message
        self.fullTemporaryDirectory = fullTemporaryDirectory
    }

    public var description: String {
        let place = fullTemporaryDirectory.map { " (in SQLite's temporary directory \($0))" } ?? ""
        return "SQLite error \(code): \(message)\(place)"
    }

    /// Whether another connection's lock refused the statement (`SQLITE_BUSY` or `SQLITE_LOCKED`, any extended
    /// code): trying again later can succeed without anything else changing.
    public var isLocked: Bool {
        let primary = code & 0xff
        return primary == SQLITE_BUSY || primary == SQLITE_LOCKED
    }

    /// The kind of failure in a few words, for messages that must name the real cause: a full file system, a lock
    /// held by another process, a read-only file or directory, an I/O error.
    public var cause: String {
        switch code & 0xff {
        case SQLITE_FULL:
            guard let directory = fullTemporaryDirectory else { return "its file system is full" }
            return "SQLite's temporary directory \(directory) is full (not the store's file system); free space "
                + "there or set SQLITE_TMPDIR to a directory with room"
        case SQLITE_BUSY, SQLITE_LOCKED: return "another process holds a lock on it"
        case SQLITE_READONLY: return "it is read-only"
        case SQLITE_IOERR: return "an I/O error"
        case SQLITE_CANTOPEN: return "it cannot be opened"
        case SQLITE_CORRUPT, SQLITE_NOTADB: return "it is damaged or not a database"
        default: return "SQLite error \(code)"
        }
    }
}

/// A value bound to or read from a statement column.
public enum SQLiteValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// One SQLite connection, used from one thread at a time.
///
/// Not `Sendable`: the owner (the daemon's loop, or a test) confines it to its thread, which is how SQLite's
/// "multi-thread" mode expects a connection to be used (https://www.sqlite.org/threadsafe.html).
public final class Database {
    /// The raw `sqlite3*` handle.
    let handle: OpaquePointer
    private var cache: [String: Statement] = [:]

    /// Opens (creating if needed) the database at `path`; with `readOnly`, opens an existing one that this
    /// connection cannot write (`SQLITE_OPEN_READONLY`; a WAL database's `-shm` file may still be created).
    ///
    /// - Parameters:
    ///   - path: file path, or `":memory:"`.
    ///   - readOnly: open for reading only, never creating the file.
    ///   - busyTimeout: how long a statement waits for another connection's lock, in milliseconds.
    /// - Throws: `SQLiteError` if the file cannot be opened (or, read-only, does not exist) or is not a database.
    public convenience init(path: String, readOnly: Bool = false, busyTimeout: Int32 = 5_000) throws(SQLiteError) {
        try self.init(name: path, uri: false, readOnly: readOnly, busyTimeout: busyTimeout)
    }

    /// Opens `name`, a path or (with `uri`) a `file:` URI (https://www.sqlite.org/uri.html).
    private init(name path: String, uri: Bool, readOnly: Bool, busyTimeout: Int32) throws(SQLiteError) {
        var db: OpaquePointer?
        let flags =
            (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
            | (uri ? SQLITE_OPEN_URI : 0)
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw SQLiteError(code: rc, message: "cannot open \(path): \(message)")
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, busyTimeout)
    }

    /// Opens an existing database for reading only, also where this process cannot create the WAL's `-shm` file
    /// beside it (a read-only directory or file system, another user's directory).
    ///
    /// SQLite reads a WAL database through its `-shm` index, which a read-only connection still creates; when it
    /// cannot, and the write-ahead log (`-wal`) is absent or empty, every committed change is in the database file
    /// and it is opened `immutable=1` (no locks, no WAL). When the log holds changes SQLite can read it without a
    /// writable directory as long as the `-wal` file exists (it builds the index in memory). This is for a
    /// database no other process writes meanwhile: an immutable reader does not see a writer's changes.
    /// - Throws: `SQLiteError` if the file does not exist, is not a database, or cannot be read; the message says
    ///   why (for example the directory is read-only and the log must be folded in first).
    public static func openForReading(path: String) throws(SQLiteError) -> Database {
        let probe = "SELECT count(*) FROM sqlite_schema"
        let refusal: SQLiteError
        do {
            let database = try Database(path: path, readOnly: true)
            try database.query(probe)
            return database
        } catch {
            refusal = error
        }
        let primary = refusal.code & 0xff
        guard primary == SQLITE_CANTOPEN || primary == SQLITE_READONLY else { throw refusal }
        guard access(path, R_OK) == 0 else {
            throw SQLiteError(code: refusal.code, message: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        var log = stat()
        let logHasChanges = stat(path + "-wal", &log) == 0 && log.st_size > 0
        let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        let directoryProblem =
            access(directory.isEmpty ? "/" : directory, W_OK) == 0 ? nil : String(cString: strerror(errno))
        guard !logHasChanges || directoryProblem == nil else {
            throw SQLiteError(
                code: refusal.code,
                message: "cannot read \(path): its write-ahead log (\(path)-wal) holds changes not yet in the database "
                    + "file, and reading them needs \(path)-shm, which cannot be created in \(directory) "
                    + "(\(directoryProblem ?? "")); let the daemon start once to fold the log in, or read as a user who may write "
                    + "\(directory) (\(refusal))")
        }
        guard !logHasChanges else { throw refusal }
        let database = try Database(name: uriForReading(path), uri: true, readOnly: true, busyTimeout: 0)
        try database.query(probe)
        return database
    }

    /// `file:PATH?immutable=1`, the path percent-encoded where a URI needs it.
    private static func uriForReading(_ path: String) -> String {
        var encoded = ""
        for byte in path.utf8 {
            let keep = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || "/-._~".utf8.contains(byte)
            encoded += keep ? String(UnicodeScalar(byte)) : "%" + String(byte, radix: 16, uppercase: true).leftPadded()
        }
        return "file:\(encoded)?immutable=1"
    }

    /// Sets how long a statement waits for another connection's lock before failing with `SQLITE_BUSY`, in
    /// milliseconds; 0 fails at once (for a connection on an event loop, which must never wait).
    public func setBusyTimeout(milliseconds: Int32) {
        sqlite3_busy_timeout(handle, milliseconds)
    }

    deinit {
        for statement in cache.values { statement.finalize() }
        sqlite3_close_v2(handle)
    }

    /// Runs one or more statements that take no parameters and return no rows (DDL, pragmas).
    ///
    /// - Throws: `SQLiteError` from the first statement that fails.
    public func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? errorMessage
            sqlite3_free(message)
            throw failure(rc, text)
        }
    }

    /// A prepared statement for `sql`, cached by its text and reset before it is returned.
    ///
    /// - Throws: `SQLiteError` if `sql` does not compile.
    public func prepare(_ sql: String) throws(SQLiteError) -> Statement {
        if let statement = cache[sql] {
            statement.reset()
            return statement
        }
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil)
        guard rc == SQLITE_OK, let raw else {
            throw SQLiteError(code: rc, message: "\(errorMessage) in: \(sql)")
        }
        let statement = Statement(raw: raw, database: self)
        cache[sql] = statement
        return statement
    }

    /// Runs `sql` with `bindings` and returns the rows it yields.
    ///
    /// - Throws: `SQLiteError` if the statement fails.
    @discardableResult
    public func query(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) -> [Row] {
        let statement = try prepare(sql)
        try statement.bind(bindings)
        var rows: [Row] = []
        while let row = try statement.step() { rows.append(row) }
        statement.reset()
        return rows
    }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT`; rolls back if `body` throws.
    ///
    /// `IMMEDIATE` takes the write lock up front, so a writer never fails half way with `SQLITE_BUSY`.
    /// - Throws: what `body` throws, or `SQLiteError` if the transaction cannot begin or commit.
    public func transaction<R>(_ body: () throws -> R) throws -> R {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// The rowid of the last row inserted on this connection.
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// How many rows the last INSERT, UPDATE or DELETE changed.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    var errorMessage: String { String(cString: sqlite3_errmsg(handle)) }

    /// The error for result code `rc`; for `SQLITE_FULL`, with SQLite's temporary directory when that is the full
    /// one (`SQLiteTemporaryDirectory.blamedForFullDisk`).
    func failure(_ rc: Int32, _ message: String) -> SQLiteError {
        guard rc & 0xff == SQLITE_FULL else { return SQLiteError(code: rc, message: message) }
        let path = sqlite3_db_filename(handle, "main").map { String(cString: $0) } ?? ""
        return SQLiteError(
            code: rc, message: message, fullTemporaryDirectory: SQLiteTemporaryDirectory.blamedForFullDisk(databasePath: path))
    }
}

/// A prepared statement owned by its `Database`'s cache.
public final class Statement {
    let raw: OpaquePointer
    unowned let database: Database

    init(raw: OpaquePointer, database: Database) {
        self.raw = raw
        self.database = database
    }

    func finalize() { sqlite3_finalize(raw) }

    /// Resets the statement and clears its bindings, ready to run again.
    public func reset() {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    /// Binds `values` to parameters 1…n.
    ///
    /// - Throws: `SQLiteError` if a value cannot be bound (for example, too many values).
    public func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(raw, index)
            case .integer(let v): rc = sqlite3_bind_int64(raw, index, v)
            case .real(let v): rc = sqlite3_bind_double(raw, index, v)
            case .text(let v):
                rc = v.utf8CString.withUnsafeBufferPointer { tb_sqlite3_bind_text(raw, index, $0.baseAddress, -1) }
            case .blob(let v):
                rc = v.withUnsafeBytes { tb_sqlite3_bind_blob(raw, index, $0.baseAddress, Int32($0.count)) }
            }
            guard rc == SQLITE_OK else {
                throw SQLiteError(code: rc, message: database.errorMessage)
            }
        }
    }

    /// Steps once: the next row, or `nil` when the statement is done.
    ///
    /// - Throws: `SQLiteError` if the step fails (constraint, I/O error, corruption).
    public func step() throws(SQLiteError) -> Row? {
        let rc = sqlite3_step(raw)
        switch rc {
        case SQLITE_ROW:
            return row()
        case SQLITE_DONE:
            return nil
        default:
            let message = database.errorMessage
            sqlite3_reset(raw)
            throw database.failure(rc, message)
        }
    }

    /// Binds `values`, runs the statement to completion and resets it.
    ///
    /// - Throws: `SQLiteError` if binding or any step fails.
    public func run(_ values: [SQLiteValue]) throws(SQLiteError) {
        reset()
        try bind(values)
        while try step() != nil {}
        sqlite3_reset(raw)
    }

    // MARK: Row-at-a-time use, without building `Row`s
    //
    // For hot loops (one lookup per photo ID): bind one parameter, step, read a column, rewind. Nothing is
    // allocated per row, unlike `step()`, which copies every column into a `Row`.

    /// Binds the integer `value` to parameter `index` (1-based).
    ///
    /// - Throws: `SQLiteError` if `index` is out of range.
    public func bind(_ value: Int64, at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_int64(raw, index, value))
    }

    /// Binds `text` to parameter `index` (1-based). SQLite copies the bytes.
    ///
    /// - Throws: `SQLiteError` if `index` is out of range.
    public func bind(_ text: String, at index: Int32) throws(SQLiteError) {
        try check(text.utf8CString.withUnsafeBufferPointer { tb_sqlite3_bind_text(raw, index, $0.baseAddress, -1) })
    }

    /// Runs `body` with parameter `index` (1-based) bound to the UTF-8 bytes `utf8` as text, in place: SQLite
    /// reads the caller's buffer instead of copying it (`SQLITE_STATIC`), so `body` must step the statement
    /// itself. The parameter is bound to NULL again before this returns, so SQLite never keeps the pointer.
    ///
    /// - Throws: `SQLiteError` if `index` is out of range, or what `body` throws.
    public func withBinding<R>(
        utf8: UnsafeRawBufferPointer, at index: Int32, _ body: () throws(SQLiteError) -> R
    ) throws(SQLiteError) -> R {
        if let base = utf8.baseAddress?.assumingMemoryBound(to: CChar.self) {
            try check(sqlite3_bind_text(raw, index, base, Int32(utf8.count), nil))
        } else {
            try check(tb_sqlite3_bind_text(raw, index, "", 0))
        }
        defer { sqlite3_bind_null(raw, index) }
        return try body()
    }

    /// `withBinding(utf8:at:_:)` for bytes held in an array.
    public func withBinding<R>(
        utf8: [UInt8], at index: Int32, _ body: () throws(SQLiteError) -> R
    ) throws(SQLiteError) -> R {
        // `withUnsafeBytes` cannot carry a typed throw, so the outcome comes out through a Result.
        let outcome: Result<R, SQLiteError> = utf8.withUnsafeBytes { bytes in
            Result { () throws(SQLiteError) -> R in try withBinding(utf8: bytes, at: index, body) }
        }
        return try outcome.get()
    }

    /// Steps once and says whether a row is ready (read it with `int64(at:)`); `false` when the statement is
    /// done. Call `rewind()` before running it again.
    ///
    /// - Throws: `SQLiteError` if the step fails (constraint, I/O error, corruption); the statement is rewound.
    public func next() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(raw)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        let message = database.errorMessage
        sqlite3_reset(raw)
        throw database.failure(rc, message)
    }

    /// Column `column` (0-based) of the row `next()` made ready, as an integer; `nil` when it is NULL.
    public func int64(at column: Int32) -> Int64? {
        sqlite3_column_type(raw, column) == SQLITE_NULL ? nil : sqlite3_column_int64(raw, column)
    }

    /// Column `column` (0-based) of the row `next()` made ready, as a floating-point number; `nil` when it is NULL.
    public func double(at column: Int32) -> Double? {
        sqlite3_column_type(raw, column) == SQLITE_NULL ? nil : sqlite3_column_double(raw, column)
    }

    /// Column `column` (0-based) of the row `next()` made ready, as text; `nil` when it is NULL.
    public func text(at column: Int32) -> String? {
        guard sqlite3_column_type(raw, column) != SQLITE_NULL, let text = sqlite3_column_text(raw, column) else { return nil }
        return String(cString: text)
    }

    /// Every column of the row `next()` made ready, as `step()` would have returned it: for a loop that reads a
    /// column or two of each row first and copies only the rows it keeps.
    public func row() -> Row {
        let count = sqlite3_column_count(raw)
        var values: [SQLiteValue] = []
        values.reserveCapacity(Int(count))
        for column in 0..<count { values.append(value(at: column)) }
        return Row(values: values)
    }

    /// Rewinds the statement to run again, keeping its bindings (unlike `reset()`).
    public func rewind() {
        sqlite3_reset(raw)
    }

    private func check(_ rc: Int32) throws(SQLiteError) {
        guard rc == SQLITE_OK else { throw database.failure(rc, database.errorMessage) }
    }

    private func value(at column: Int32) -> SQLiteValue {
        switch sqlite3_column_type(raw, column) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(raw, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(raw, column))
        case SQLITE_TEXT: return .text(String(cString: sqlite3_column_text(raw, column)))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(raw, column))
            guard count > 0, let bytes = sqlite3_column_blob(raw, column) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default: return .null
        }
    }
}

/// One result row: its column values in select order.
public struct Row: Sendable {
    /// The column values, in the order of the SELECT list.
    public let values: [SQLiteValue]

    /// Column `index` as an integer, or `nil` when it is NULL or not an integer.
    public func int(_ index: Int) -> Int64? {
        if case .integer(let v) = values[index] { return v }
        return nil
    }

    /// Column `index` as a double (integers are widened), or `nil` when NULL.
    public func double(_ index: Int) -> Double? {
        switch values[index] {
        case .real(let v): return v
        case .integer(let v): return Double(v)
        default: return nil
        }
    }

    /// Column `index` as text, or `nil` when it is NULL or not text.
    public func text(_ index: Int) -> String? {
        if case .text(let v) = values[index] { return v }
        return nil
    }

    /// Column `index` as bytes, or `nil` when it is NULL or not a blob.
    public func blob(_ index: Int) -> [UInt8]? {
        if case .blob(let v) = values[index] { return v }
        return nil
    }
}

extension String {
    /// Two hex digits: a leading zero for a one-digit value.
    fileprivate func leftPadded() -> String { count == 1 ? "0" + self : self }
}
