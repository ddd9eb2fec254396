import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The photo library's SQLite store: one row per photo plus its tags, in WAL mode.
///
/// Single writer: the process that owns the store (the daemon) is the only one that writes it; workers send it
/// results. Not `Sendable` (it owns a `Database`, used from one thread).
///
/// Schema (version 8, applied by `Database.migrate`):
/// - `photos(id INTEGER PRIMARY KEY, stable_id TEXT UNIQUE, path TEXT UNIQUE, bytes, mtime_ns, inode, width,
///   height, orientation, taken_at, camera_make, camera_model, gps_lat, gps_lon, phash, warnings)`; `id` is the
///   local ID; `warnings` is a JSON array of strings (what the last read of the file noticed) or NULL. `path`
///   holds the file's exact bytes: TEXT when they are valid UTF-8 (every path of a store older than byte paths),
///   a BLOB otherwise (`caf\xe9.jpg`); a column of TEXT affinity keeps a BLOB as it is, and SQLite compares both
///   byte by byte, so `UNIQUE` and `path = ?` need no schema change (see `pathValue`).
/// - Tags are a bitmap index: `tag_names(id INTEGER PRIMARY KEY, name TEXT UNIQUE)` numbers each tag (its name in
///   Unicode NFC, see `TagName`), and
///   `tag_words(word, tag_id, bits)` (primary key `(word, tag_id)`, `WITHOUT ROWID`) holds, for each run of 64
///   local IDs (`word` = local ID >> 6) and each tag some photo of that run has, a 64-bit integer whose bit
///   (local ID & 63) says whether that photo has the tag. A word with no bit set has no row. So a photo holds a
///   tag at most once by construction; tagging a run of photos rewrites one row per 64 of them, whatever other
///   tags they have; a photo's tags are the rows of its word (tags its 63 neighbours have, not every tag).
///   (See `TagBitmap` for the bit arithmetic.)
/// - View `tags(photo_id, stable_id, tag)`: one row per photo and tag, for reading the store with the `sqlite3`
///   shell.
/// - `photo_uploads(stable_id, destination, job, uploaded_at_ms, location, bytes, sha256)`, primary key
///   `(stable_id, destination)`, `WITHOUT ROWID`: where each photo went (see `PhotoUpload`). Keyed by stable ID, not
///   local ID: a photo whose bytes change gets a new stable ID, and is a new photo to upload.
/// - Trigger `photos_delete_tags` clears a deleted photo's bits. Every statement that sets a bit takes the photo
///   ID from `photos` in the same transaction, so no bit names a missing photo.
///
/// History: versions 1–3 kept one row per photo and tag, `tags(photo_id, tag)` keyed by photo; adding one tag to
/// every photo then rewrote every page of that table, so a bulk tag cost grew with the tags photos already had
/// (bench/README.md, "Tagging"). Version 1 also had an unused index `tags_by_tag`, dropped in 2; versions 1 and 2
/// had a foreign key to `photos`, replaced in 3 by the trigger. Up to version 6 tag names were stored as typed, so
/// `Cão` precomposed and decomposed were two tags; 7 merges such twins.
public final class PhotoStore {
    /// The connection, for callers that keep their own tables in this file (a job's checkpoint committed in the
    /// same transaction as its tags). Use it only inside `transaction` when writing.
    public let database: Database

    /// The `phash` column in memory for `nearestDuplicate`, loaded on its first call and kept in step by this
    /// store's writes (`setPerceptualHash`, `upsert`); dropped when a transaction fails, to be read again.
    var hashIndex: PerceptualHashIndex?


    /// Opens (creating if needed) the store at `path`, switches it to WAL and brings the schema up to date.
    ///
    /// - Throws: `PhotoLibraryError.store` if SQLite cannot open or migrate the file.
    public convenience init(path: String) throws(PhotoLibraryError) {
        let database: Database
        do {
            database = try Database(path: path)
            // NORMAL, like the job store: a commit survives kill -9; a power loss may roll back the last few, and
            // since a bulk job's tags and its checkpoint commit together, the job then redoes those batches: still
            // exactly once.
            if path != ":memory:" { try database.enableWriteAheadLog(synchronous: .normal) }
        } catch {
            throw PhotoLibraryError(.store, "\(error)")
        }
        try self.init(database: database)
    }

    /// Opens the store at `path` for reading only, as the CLI's `photos list` and `photos show` do: it never
    /// migrates (the daemon, the store's only writer, does that when it starts), so an older daemon still running
    /// keeps a store it can write. It works in a read-only directory too (`Database.openForReading`).
    ///
    /// - Throws: `PhotoLibraryError.store` if SQLite cannot open the file, or its schema is older than this
    ///   program's (start this version's daemon to upgrade it) or newer (upgrade trailbook-jobs).
    public static func openForReading(path: String) throws(PhotoLibraryError) -> PhotoStore {
        let database: Database
        let version: Int
        do {
            database = try Database.openForReading(path: path)
            version = Int(try database.query("PRAGMA user_version").first?.int(0) ?? 0)
        } catch {
            throw PhotoLibraryError(.store, "\(error)")
        }
        let current = migrations.count
        guard version == current else {
            throw PhotoLibraryError(
                .store,
                version < current
                    ? "the photo store is at schema version \(version), older than this program's \(current); start "
                        + "the daemon (trailbook-jobs daemon) once to upgrade it, then try again"
                    : "the photo store is at schema version \(version), newer than this program's \(current); "
                        + "upgrade trailbook-jobs")
        }
        return PhotoStore(readOnly: database)
    }

    private init(readOnly database: Database) {
        self.database = database
    }

    /// Uses an open connection and brings its schema up to date.
    ///
    /// - Throws: `PhotoLibraryError.store` if a migration fails.
    public init(database: Database) throws(PhotoLibraryError) {
        self.database = database
        // 64 MiB of page cache (SQLite's default is 2 MiB): a bulk tag batch's IDs (content hashes, sorted per
        // batch) are spread over the whole `stable_id` index, about 4.5 MB at 100 000 photos and 45 MB at
        // 1 000 000, so a cache smaller than the index re-reads much of it from the OS each batch. Measured on
        // 1 000 000 IDs (bench/results/2026-11-29_to_2026-12-06-log.md): 2.43 s with 32 MiB, 2.06 s with 64, 1.95 s with 96. The cache fills
        // only as pages are used, so a small library costs no more.
        try store {
            try database.execute("PRAGMA foreign_keys = ON; PRAGMA cache_size = -65536")
            try database.migrate(PhotoStore.migrations)
        }
    }

    // MARK: Import

    /// The local ID of the photo at `path` if its stored stamp equals `stamp` (size, mtime and inode), else `nil`.
    /// An import calls this before reading a file, so unchanged files cost one `stat` and one indexed query.
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func unchangedPhoto(path: BytePath, stamp: FileStamp) throws(PhotoLibraryError) -> PhotoLocalID? {
        try store {
            let rows = try database.query(
                "SELECT id, bytes, mtime_ns, inode FROM photos WHERE path = ?", [PhotoStore.pathValue(path)])
            guard let row = rows.first, row.int(1) == stamp.bytes, row.int(2) == stamp.modifiedNanoseconds,
                row.int(3) == Int64(bitPattern: stamp.inode)
            else { return nil }
            return row.int(0)
        }
    }

    /// Adds or refreshes one imported photo, in one transaction.
    ///
    /// - A row with this path and the same stamp: nothing is written (`.unchanged`).
    /// - Another row already has this stable ID (the same bytes at another path): nothing is written
    ///   (`.sameContent`); a copy is one photo, and the caller reports it.
    /// - A row with this path but another stamp: its metadata and stable ID are replaced, its local ID and tags
    ///   kept (`.updated`).
    /// - Otherwise a new row (`.inserted`).
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    @discardableResult
    public func upsert(_ item: PhotoImport) throws(PhotoLibraryError) -> ImportOutcome {
        let outcome = try forgettingHashesOnFailure { () throws(PhotoLibraryError) in try upsertRow(item) }
        // An updated row's hash was cleared (its file changed): forget it here too.
        if case .updated(let id) = outcome { hashIndex?.remove(id) }
        return outcome
    }

    private func upsertRow(_ item: PhotoImport) throws(PhotoLibraryError) -> ImportOutcome {
        try store {
            try database.transaction { () throws -> ImportOutcome in
                let existing = try database.query(
                    "SELECT id, bytes, mtime_ns, inode FROM photos WHERE path = ?", [PhotoStore.pathValue(item.path)]
                ).first
                if let existing, let id = existing.int(0), existing.int(1) == item.stamp.bytes,
                    existing.int(2) == item.stamp.modifiedNanoseconds,
                    existing.int(3) == Int64(bitPattern: item.stamp.inode)
                {
                    return .unchanged(id)
                }
                if let twin = try database.query(
                    "SELECT id, path FROM photos WHERE stable_id = ? AND path <> ?",
                    [.text(item.stableID.text), PhotoStore.pathValue(item.path)]
                ).first, let id = twin.int(0) {
                    return .sameContent(as: id, path: PhotoStore.path(twin, 1))
                }
                let m = item.metadata
                var values: [SQLiteValue] = [
                    .text(item.stableID.text), PhotoStore.pathValue(item.path), .integer(item.stamp.bytes),
                    .integer(item.stamp.modifiedNanoseconds), .integer(Int64(bitPattern: item.stamp.inode)),
                    m.width.sqlite, m.height.sqlite, m.orientation.sqlite, m.takenAt.sqlite, m.cameraMake.sqlite,
                    m.cameraModel.sqlite, m.gps.map { .real($0.latitude) } ?? .null,
                    m.gps.map { .real($0.longitude) } ?? .null, PhotoStore.warningsValue(m.warnings),
                ]
                if let existing, let id = existing.int(0) {
                    values.append(.integer(id))
                    try database.query(
                        """
                        UPDATE photos SET stable_id = ?, path = ?, bytes = ?, mtime_ns = ?, inode = ?, width = ?,
                            height = ?, orientation = ?, taken_at = ?, camera_make = ?, camera_model = ?, gps_lat = ?,
                            gps_lon = ?, warnings = ?, phash = NULL
                        WHERE id = ?
                        """, values)
                    return .updated(id)
                }
                try database.query(
                    """
                    INSERT INTO photos (stable_id, path, bytes, mtime_ns, inode, width, height, orientation, taken_at,
                        camera_make, camera_model, gps_lat, gps_lon, warnings)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, values)
                return .inserted(database.lastInsertRowID)
            }
        }
    }
}
