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
    private var hashIndex: PerceptualHashIndex?

    /// The schema migrations, in order (index `i` moves version `i` to `i + 1`).
    public static let migrations: [Migration] = [
        """
        CREATE TABLE photos (
            id INTEGER PRIMARY KEY,
            stable_id TEXT NOT NULL UNIQUE,
            path TEXT NOT NULL UNIQUE,
            bytes INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            inode INTEGER NOT NULL,
            width INTEGER, height INTEGER, orientation INTEGER,
            taken_at TEXT, camera_make TEXT, camera_model TEXT,
            gps_lat REAL, gps_lon REAL,
            phash INTEGER
        );
        CREATE TABLE tags (
            photo_id INTEGER NOT NULL REFERENCES photos(id) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY (photo_id, tag)
        ) WITHOUT ROWID;
        CREATE INDEX tags_by_tag ON tags(tag, photo_id);
        """,
        // 2: no query looks photos up by tag (`photos list --tag` filters pages it reads anyway), and the index
        // cost every tag insert a second B-tree write: the bulk tag job's main cost after SQLite's own.
        "DROP INDEX IF EXISTS tags_by_tag;",
        // 3: the foreign key on tags.photo_id cost every tag insert a probe of `photos` that repeats what the
        // insert just established: every statement that writes a tag row takes its photo ID from `photos` in the
        // same transaction (`changeTag`, `addTag`, `replaceTags` all select it). A trigger keeps what the key
        // gave besides: deleting a photo deletes its tags. SQLite cannot drop a constraint, so the table is
        // rebuilt (https://www.sqlite.org/lang_altertable.html#otheralter).
        """
        CREATE TABLE tags_v3 (
            photo_id INTEGER NOT NULL,
            tag TEXT NOT NULL,
            PRIMARY KEY (photo_id, tag)
        ) WITHOUT ROWID;
        INSERT INTO tags_v3 (photo_id, tag) SELECT photo_id, tag FROM tags;
        DROP TABLE tags;
        ALTER TABLE tags_v3 RENAME TO tags;
        CREATE TRIGGER photos_delete_tags AFTER DELETE ON photos BEGIN
            DELETE FROM tags WHERE photo_id = old.id;
        END;
        """,
        // 4: tags as a bitmap index (see the type's documentation). Each old row sets one bit; rows of one word
        // and tag are distinct powers of two, so their sum is their bitwise OR (and cannot overflow: bit 63 is
        // the one negative term).
        """
        CREATE TABLE tag_names (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE
        );
        CREATE TABLE tag_words (
            word INTEGER NOT NULL,
            tag_id INTEGER NOT NULL,
            bits INTEGER NOT NULL CHECK (bits <> 0),
            PRIMARY KEY (word, tag_id)
        ) WITHOUT ROWID;
        INSERT INTO tag_names (name) SELECT DISTINCT tag FROM tags ORDER BY tag;
        INSERT INTO tag_words (word, tag_id, bits)
            SELECT t.photo_id >> 6, n.id, sum(1 << (t.photo_id & 63))
            FROM tags AS t JOIN tag_names AS n ON n.name = t.tag
            GROUP BY t.photo_id >> 6, n.id;
        DROP TRIGGER photos_delete_tags;
        DROP TABLE tags;
        CREATE VIEW tags (photo_id, tag) AS
            SELECT p.id, n.name
            FROM tag_words AS w
            JOIN tag_names AS n ON n.id = w.tag_id
            JOIN photos AS p ON p.id BETWEEN w.word * 64 AND w.word * 64 + 63 AND (w.bits >> (p.id & 63)) & 1;
        CREATE TRIGGER photos_delete_tags AFTER DELETE ON photos BEGIN
            DELETE FROM tag_words WHERE word = old.id >> 6 AND bits = 1 << (old.id & 63);
            UPDATE tag_words SET bits = bits & ~(1 << (old.id & 63))
                WHERE word = old.id >> 6 AND (bits >> (old.id & 63)) & 1;
        END;
        """,
        // 5: the view also names each photo by its stable ID, the ID every command takes.
        """
        DROP VIEW tags;
        CREATE VIEW tags (photo_id, stable_id, tag) AS
            SELECT p.id, p.stable_id, n.name
            FROM tag_words AS w
            JOIN tag_names AS n ON n.id = w.tag_id
            JOIN photos AS p ON p.id BETWEEN w.word * 64 AND w.word * 64 + 63 AND (w.bits >> (p.id & 63)) & 1;
        """,
        // 6: what reading a photo noticed (a GPS position without its reference, corrupt data decoded anyway).
        "ALTER TABLE photos ADD COLUMN warnings TEXT;",
        // 7: tag names in NFC; names that normalize alike are merged (SQLite compares text byte by byte, so it
        // cannot do this itself).
        .code(mergeTagTwins),
        // 8: where each photo was uploaded (`PhotoStore+Uploads.swift`): one row per photo and destination,
        // written when the upload job finished that photo's file. The destination is the upload job's normalised
        // identity, never a credential.
        """
        CREATE TABLE photo_uploads (
            stable_id TEXT NOT NULL,
            destination TEXT NOT NULL,
            job TEXT NOT NULL,
            uploaded_at_ms INTEGER NOT NULL,
            location BLOB NOT NULL,
            bytes INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            PRIMARY KEY (stable_id, destination)
        ) WITHOUT ROWID;
        """,
    ]

    /// Renames every tag to its NFC spelling (`TagName.nfc`); tags whose names become equal are merged into the
    /// one with the lowest number, their bitmap words ORed together, so a photo that had any twin has the tag
    /// once. Runs inside migration 7's transaction.
    /// - Throws: `SQLiteError`.
    static func mergeTagTwins(_ database: Database) throws {
        var groups: [String: [(id: Int64, name: String)]] = [:]
        for row in try database.query("SELECT id, name FROM tag_names ORDER BY id") {
            guard let id = row.int(0), let name = row.text(1) else { continue }
            groups[TagName.nfc(name), default: []].append((id, name))
        }
        for (normal, twins) in groups where twins.count > 1 || !twins[0].name.utf8.elementsEqual(normal.utf8) {
            let keep = twins[0].id
            for twin in twins.dropFirst() {
                try database.query(
                    """
                    INSERT INTO tag_words (word, tag_id, bits) SELECT word, ?1, bits FROM tag_words WHERE tag_id = ?2
                        ON CONFLICT (word, tag_id) DO UPDATE SET bits = bits | excluded.bits
                    """, [.integer(keep), .integer(twin.id)])
                try database.query("DELETE FROM tag_words WHERE tag_id = ?", [.integer(twin.id)])
                try database.query("DELETE FROM tag_names WHERE id = ?", [.integer(twin.id)])
            }
            try database.query("UPDATE tag_names SET name = ?1 WHERE id = ?2", [.text(normal), .integer(keep)])
        }
    }

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

    // MARK: Lookup

    /// How many photos the store holds.
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func count() throws(PhotoLibraryError) -> Int {
        try store { Int(try database.query("SELECT count(*) FROM photos").first?.int(0) ?? 0) }
    }

    /// The photo with local ID `localID`, with its tags; `nil` if there is none.
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func photo(localID: PhotoLocalID) throws(PhotoLibraryError) -> PhotoRecord? {
        try store {
            let rows = try database.query("SELECT \(PhotoStore.columns) FROM photos WHERE id = ?", [.integer(localID)])
            return try withTags(rows.map(PhotoStore.record)).first
        }
    }

    /// The paths of the photos in `localIDs` that exist, in local-ID order (for their XMP sidecars). One query.
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func paths(of localIDs: [PhotoLocalID]) throws(PhotoLibraryError) -> [BytePath] {
        try store {
            try database.query(
                "SELECT path FROM photos WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
                [.text(PhotoStoreTransaction.jsonText(localIDs))]
            ).map { PhotoStore.path($0, 0) }
        }
    }

    /// The photo with stable ID `stableID`, with its tags; `nil` if there is none. One indexed query for the row
    /// and one for its tags.
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func photo(stableID: StableID) throws(PhotoLibraryError) -> PhotoRecord? {
        try store {
            let rows = try database.query(
                "SELECT \(PhotoStore.columns) FROM photos WHERE stable_id = ?", [.text(stableID.text)])
            return try withTags(rows.map(PhotoStore.record)).first
        }
    }

    /// The photo whose stable ID is `idOrPrefix` or starts with it (case-insensitive, as `photos show ID` takes).
    ///
    /// One range query on the unique `stable_id` index, reading at most two rows.
    /// - Throws: `PhotoLibraryError.invalidID` if it is not a (prefix of a) UUID in 8-4-4-4-12 hex form,
    ///   `.notFound` if no photo matches, `.ambiguous` if more than one does.
    public func photo(matching idOrPrefix: String) throws(PhotoLibraryError) -> PhotoRecord {
        let prefix = idOrPrefix.lowercased()
        guard StableID.isPrefix(prefix) else {
            throw PhotoLibraryError(.invalidID, "\"\(idOrPrefix)\" is not a stable ID or a prefix of one")
        }
        let rows = try store {
            // Every character of a stable ID sorts below "g", so [prefix, prefix + "g") is exactly the prefix range.
            try database.query(
                "SELECT \(PhotoStore.columns) FROM photos WHERE stable_id >= ?1 AND stable_id < ?1 || 'g' LIMIT 2",
                [.text(prefix)])
        }
        guard rows.count == 1 else {
            if rows.isEmpty { throw PhotoLibraryError(.notFound, "no photo with ID \(idOrPrefix)") }
            throw PhotoLibraryError(.ambiguous, "ID prefix \(idOrPrefix) matches more than one photo; give more of it")
        }
        return try store { try withTags([PhotoStore.record(rows[0])])[0] }
    }

    /// A page of photos in local-ID order, with tags: those with local ID greater than `after`, at most `limit`.
    ///
    /// Keyset pagination: pass the last `localID` of one page as `after` to get the next; an empty page is the end.
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func list(after: PhotoLocalID = 0, limit: Int = 100) throws(PhotoLibraryError) -> [PhotoRecord] {
        try store {
            let rows = try database.query(
                "SELECT \(PhotoStore.columns) FROM photos WHERE id > ? ORDER BY id LIMIT ?",
                [.integer(after), .integer(Int64(max(0, limit)))])
            return try withTags(rows.map(PhotoStore.record))
        }
    }

    // MARK: Bulk tagging by identifier

    /// Resolves entries `range` of `ids` to local IDs with one statement, reading nothing but the unique
    /// `stable_id` index.
    ///
    /// - Returns: the local IDs found (in input order, each once) and the entries that name no photo or are not
    ///   stable IDs (as text, in input order).
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func resolve(_ ids: StableIDList, in range: Range<Int>) throws(PhotoLibraryError) -> ResolvedPhotos {
        let found = try store { try PhotoStore.lookUp(ids, in: range, database) }
        var seen = Set<PhotoLocalID>(minimumCapacity: found.photos.count)
        let inInputOrder = found.photos.sorted { $0.position < $1.position }
        return ResolvedPhotos(
            localIDs: inInputOrder.compactMap { seen.insert($0.localID).inserted ? $0.localID : nil },
            unknown: found.unknown.map { ids.text(at: $0) })
    }

    /// Looks up entries `range` of `ids` with one statement whose rows come from `json_each` over the IDs (in ID
    /// order) joined with the unique `stable_id` index: one probe per ID, read without building a `Row` per
    /// photo.
    ///
    /// - Returns: each entry found with its local ID (in ID order; a repeated entry appears each time), and the
    ///   positions of entries that name no photo or are not stable IDs, in order, each text once.
    static func lookUp(_ ids: StableIDList, in range: Range<Int>, _ database: Database) throws(SQLiteError) -> (
        photos: [(position: Int, localID: PhotoLocalID)], unknown: [Int]
    ) {
        let (json, positions) = ids.jsonArray(in: range)
        var photos: [(position: Int, localID: PhotoLocalID)] = []
        photos.reserveCapacity(positions.count)
        var unknown = range.filter { !ids.isValid(at: $0) }
        if !positions.isEmpty {
            let lookup = try database.prepare(
                "SELECT j.key, p.id FROM json_each(?1) AS j LEFT JOIN photos AS p ON p.stable_id = j.value")
            try lookup.withBinding(utf8: json, at: 1) { () throws(SQLiteError) in
                defer { lookup.rewind() }
                while try lookup.next() {
                    guard let key = lookup.int64(at: 0) else { continue }
                    if let local = lookup.int64(at: 1) {
                        photos.append((positions[Int(key)], local))
                    } else {
                        unknown.append(positions[Int(key)])
                    }
                }
            }
        }
        unknown.sort()
        // Unknown IDs are rare; their texts are compared only to report a repeated one once.
        var seenUnknown = Set<String>()
        unknown.removeAll { !seenUnknown.insert(ids.text(at: $0)).inserted }
        return (photos, unknown)
    }

    /// Runs `body` in one `BEGIN IMMEDIATE … COMMIT` transaction; everything it does through the
    /// `PhotoStoreTransaction` (tags, and the caller's own statements on `database`) commits together or not at all.
    ///
    /// This is how the bulk tag job keeps "each batch's tags and the job's checkpoint in the same SQLite
    /// transaction": `try store.transaction { tx in let n = try tx.addTag(t, to: ids); try tx.database.query(
    /// "UPDATE checkpoint …") }`.
    /// - Throws: what `body` throws (after rolling back), or `SQLiteError` if the transaction cannot begin or commit.
    public func transaction<R>(_ body: (PhotoStoreTransaction) throws -> R) throws -> R {
        do {
            return try database.transaction { try body(PhotoStoreTransaction(store: self)) }
        } catch {
            hashIndex = nil  // it may hold hashes set inside the transaction that rolled back
            throw error
        }
    }

    /// Runs `body`; if it throws, drops the in-memory hash index, which may now differ from the store.
    private func forgettingHashesOnFailure<R>(_ body: () throws(PhotoLibraryError) -> R) throws(PhotoLibraryError) -> R {
        do {
            return try body()
        } catch {
            hashIndex = nil
            throw error
        }
    }

    /// Adds `tag` to every photo in `localIDs`, in its own transaction. See `PhotoStoreTransaction.addTag`.
    public func addTag(_ tag: String, to localIDs: [PhotoLocalID]) throws(PhotoLibraryError) -> TagCounts {
        try store { try transaction { tx in try tx.addTag(tag, to: localIDs) } }
    }

    /// Removes `tag` from every photo in `localIDs`, in its own transaction. See `PhotoStoreTransaction.removeTag`.
    public func removeTag(_ tag: String, from localIDs: [PhotoLocalID]) throws(PhotoLibraryError) -> TagCounts {
        try store { try transaction { tx in try tx.removeTag(tag, from: localIDs) } }
    }

    // MARK: Perceptual hashes

    /// Stores the perceptual hash of a photo (for near-duplicate search), or forgets it (`nil`: a hash with too
    /// little detail to be evidence, which must not be found as anyone's twin).
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func setPerceptualHash(_ hash: PerceptualHash?, for localID: PhotoLocalID) throws(PhotoLibraryError) {
        try forgettingHashesOnFailure { () throws(PhotoLibraryError) in
            _ = try store {
                try database.query(
                    "UPDATE photos SET phash = ? WHERE id = ?",
                    [hash.map { .integer(Int64(bitPattern: $0.value)) } ?? .null, .integer(localID)])
            }
            guard database.changes > 0 else { return }
            if let hash { hashIndex?.set(hash, for: localID) } else { hashIndex?.remove(localID) }
        }
    }

    /// Replaces what the last read of a photo noticed (`PhotoRecord.warnings`); an empty list clears it.
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func setWarnings(_ warnings: [String], for localID: PhotoLocalID) throws(PhotoLibraryError) {
        _ = try store {
            try database.query(
                "UPDATE photos SET warnings = ? WHERE id = ?", [PhotoStore.warningsValue(warnings), .integer(localID)])
        }
    }

    /// The photo imported before `localID` (lower local ID) whose stored hash is nearest to `hash` within
    /// `maxDistance` bits, with the distance; ties go to the lower local ID. Only earlier photos count, so a
    /// photo's `duplicate-of:` answer does not depend on which later photos have been hashed yet (a re-run gives
    /// the same tags). A pass over the in-memory `PerceptualHashIndex` (the first call reads the `phash` column
    /// once), plus one indexed query for the twin's stable ID.
    ///
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func nearestDuplicate(
        of hash: PerceptualHash, maxDistance: Int = PerceptualHash.nearDuplicateDistance,
        importedBefore localID: PhotoLocalID
    ) throws(PhotoLibraryError) -> (localID: PhotoLocalID, stableID: StableID, distance: Int)? {
        let index = try loadedHashIndex()
        guard let best = index.nearest(to: hash, maxDistance: maxDistance, before: localID),
            let twin = try photo(localID: best.localID)
        else { return nil }
        return (best.localID, twin.stableID, best.distance)
    }

    /// The hash index, read from the `phash` column if it is not in memory yet.
    private func loadedHashIndex() throws(PhotoLibraryError) -> PerceptualHashIndex {
        if let hashIndex { return hashIndex }
        var entries: [(PhotoLocalID, UInt64)] = []
        try store {
            let scan = try database.prepare("SELECT id, phash FROM photos WHERE phash IS NOT NULL ORDER BY id")
            defer { scan.reset() }
            while try scan.next() {
                guard let id = scan.int64(at: 0), let bits = scan.int64(at: 1) else { continue }
                entries.append((id, UInt64(bitPattern: bits)))
            }
        }
        let index = PerceptualHashIndex(ascending: entries)
        hashIndex = index
        return index
    }

    // MARK: Internals

    static let columns = """
        id, stable_id, path, bytes, mtime_ns, inode, width, height, orientation, taken_at, camera_make,
        camera_model, gps_lat, gps_lon, phash, warnings
        """

    /// A path as the `path` column holds it: TEXT when its bytes are valid UTF-8 (as every path was before byte
    /// paths, so old rows still match), else a BLOB of the exact bytes.
    static func pathValue(_ path: BytePath) -> SQLiteValue {
        if let text = path.text { return .text(text) }
        return .blob(path.bytes)
    }

    /// The path in column `index` of `row`, TEXT or BLOB (`pathValue`).
    static func path(_ row: Row, _ index: Int) -> BytePath {
        if let bytes = row.blob(index) { return BytePath(bytes: bytes) }
        return BytePath(row.text(index) ?? "")
    }

    /// `warnings` as the column holds them: a JSON array, or NULL when there are none.
    static func warningsValue(_ warnings: [String]) -> SQLiteValue {
        guard !warnings.isEmpty, let json = try? JSONEncoder().encode(warnings) else { return .null }
        return .text(String(decoding: json, as: UTF8.self))
    }

    static func record(_ row: Row) -> PhotoRecord {
        let gps: GPSCoordinate? =
            if let lat = row.double(12), let lon = row.double(13) {
                GPSCoordinate(latitude: lat, longitude: lon)
            } else {
                nil
            }
        return PhotoRecord(
            localID: row.int(0) ?? 0, stableID: StableID(row.text(1) ?? "") ?? StableID(sha256Hex: ""),
            path: PhotoStore.path(row, 2),
            stamp: FileStamp(
                bytes: row.int(3) ?? 0, modifiedNanoseconds: row.int(4) ?? 0,
                inode: UInt64(bitPattern: row.int(5) ?? 0)),
            width: row.int(6).map(Int.init), height: row.int(7).map(Int.init), orientation: row.int(8).map(Int.init),
            takenAt: row.text(9), cameraMake: row.text(10), cameraModel: row.text(11), gps: gps,
            perceptualHash: row.int(14).map { PerceptualHash(value: UInt64(bitPattern: $0)) },
            warnings: row.text(15).flatMap { try? JSONDecoder().decode([String].self, from: Data($0.utf8)) } ?? [],
            tags: [])
    }

    /// Fills in tags for `records` (sorted by name) with one query over their bitmap words.
    func withTags(_ records: [PhotoRecord]) throws(SQLiteError) -> [PhotoRecord] {
        guard !records.isEmpty else { return records }
        let tags = try tagNames(of: records.map(\.localID))
        return records.map { record in
            var record = record
            record.tags = tags[record.localID] ?? []
            return record
        }
    }

    /// The tags of each photo in `localIDs` (sorted by name; photos without tags are absent), with one query
    /// reading the rows of their words only.
    func tagNames(of localIDs: [PhotoLocalID]) throws(SQLiteError) -> [PhotoLocalID: [String]] {
        var wantedByWord: [Int64: [PhotoLocalID]] = [:]
        for id in Set(localIDs) { wantedByWord[TagBitmap.word(of: id), default: []].append(id) }
        guard !wantedByWord.isEmpty else { return [:] }
        var tags: [PhotoLocalID: [String]] = [:]
        let rows = try database.query(
            """
            SELECT w.word, w.bits, n.name FROM tag_words AS w JOIN tag_names AS n ON n.id = w.tag_id
            WHERE w.word IN (SELECT value FROM json_each(?))
            """, [.text(PhotoStoreTransaction.jsonText(wantedByWord.keys.sorted()))])
        for row in rows {
            guard let word = row.int(0), let bits = row.int(1), let name = row.text(2) else { continue }
            for id in wantedByWord[word] ?? [] where UInt64(bitPattern: bits) & TagBitmap.bit(of: id) != 0 {
                tags[id, default: []].append(name)
            }
        }
        for id in tags.keys { tags[id]?.sort() }
        return tags
    }

    /// Runs `body`, turning any error that is not already a `PhotoLibraryError` into `.store`.
    func store<R>(_ body: () throws -> R) throws(PhotoLibraryError) -> R {
        do {
            return try body()
        } catch let error as PhotoLibraryError {
            throw error
        } catch let error as SQLiteError {
            throw PhotoLibraryError(.store, error.description)
        } catch {
            throw PhotoLibraryError(.store, "\(error)")
        }
    }
}

/// Access to the store inside one `PhotoStore.transaction`: tag writes plus the raw `database` for the caller's
/// own statements. Valid only inside the closure.
public struct PhotoStoreTransaction {
    let store: PhotoStore

    /// The store's connection, inside the open transaction.
    public var database: Database { store.database }

    /// Adds `tag` to every photo in `localIDs`: one query keeps those that name a photo, then one bitmap-word
    /// read and write per 64 local IDs (see `changeTag(_:_:of:)`).
    ///
    /// - Returns: `changed` = photos that got the tag now (added), `unchanged` = photos that already had it,
    ///   `missing` = local IDs with no photo. Repeated IDs count once.
    /// - Throws: `PhotoLibraryError.invalidTag` for an empty tag or one with control characters,
    ///   `.store` on a SQLite error.
    public func addTag(_ tag: String, to localIDs: [PhotoLocalID]) throws(PhotoLibraryError) -> TagCounts {
        try changeTag(tag, .add, of: localIDs)
    }

    /// Adds `tag` to (or with `.remove`, takes it off) the photos named by entries `range` of `ids`: one statement
    /// resolves the IDs (`json_each` joined with the unique `stable_id` index, in ID order), then the bits of the
    /// local IDs found are set (or cleared), one point read and one write per word of 64 local IDs the batch
    /// touches. No other column of a photo is read, and nothing is allocated per photo beyond its place in a few
    /// arrays. A batch whose IDs are in local-ID order (an ID file from `photos list`) touches about one word per
    /// 64 photos; IDs in random order touch up to one word per photo.
    ///
    /// Resolving inside the transaction means a photo cannot vanish between lookup and write.
    /// - Returns: `changed` (tag added, or removed), `unchanged` (already had it, or did not have it), and the
    ///   positions in `ids` of entries that name no photo or are not stable IDs. An ID repeated within `range`
    ///   counts once, known or not.
    /// - Throws: `PhotoLibraryError.invalidTag`, `.store`.
    public func changeTag(_ tag: String, _ change: TagChange, of ids: StableIDList, in range: Range<Int>)
        throws(PhotoLibraryError) -> TagBatchOutcome
    {
        let tag = try TagName.validated(tag)
        return try store.store {
            let found = try PhotoStore.lookUp(ids, in: range, database)
            var outcome = TagBatchOutcome()
            outcome.unknown = found.unknown
            // Distinct, in local-ID order: IDs of one word become one write, and the writes walk `tag_words`
            // forwards.
            let localIDs = Set(found.photos.map(\.localID)).sorted()
            guard !localIDs.isEmpty else { return outcome }
            outcome.changed = try write(tag, change, to: localIDs)
            outcome.unchanged = localIDs.count - outcome.changed
            return outcome
        }
    }

    /// Adds `tag` to (or with `.remove`, takes it off) every photo in `localIDs`: one query keeps the IDs that
    /// name a photo, then their bits are set (or cleared) one word of 64 local IDs at a time. Repeated IDs count
    /// once.
    ///
    /// - Returns: `changed` (added, or removed), `unchanged` (already had it, or did not have it), `missing` =
    ///   local IDs with no photo.
    /// - Throws: `PhotoLibraryError.invalidTag`, `.store`.
    public func changeTag(_ tag: String, _ change: TagChange, of localIDs: [PhotoLocalID]) throws(PhotoLibraryError)
        -> TagCounts
    {
        let tag = try TagName.validated(tag)
        let unique = Set(localIDs).sorted()
        guard !unique.isEmpty else { return TagCounts(changed: 0, unchanged: 0, missing: 0) }
        return try store.store {
            // Nothing ties a bit to `photos` but this: only IDs of photos that exist are written.
            var present: [PhotoLocalID] = []
            present.reserveCapacity(unique.count)
            let exists = try database.prepare("SELECT id FROM photos WHERE id IN (SELECT value FROM json_each(?1))")
            try exists.withBinding(utf8: PhotoStoreTransaction.jsonIntegers(unique), at: 1) { () throws(SQLiteError) in
                defer { exists.rewind() }
                while try exists.next() { if let id = exists.int64(at: 0) { present.append(id) } }
            }
            let changed = try write(tag, change, to: present.sorted())
            return TagCounts(changed: changed, unchanged: present.count - changed, missing: unique.count - present.count)
        }
    }

    /// Sets (or with `.remove`, clears) the bit of each of `localIDs` (distinct, in order, all naming photos) in
    /// `tag`'s bitmap: per word of 64 local IDs, one point read and one write (or delete, when no bit is left).
    ///
    /// - Returns: how many bits it changed: photos that got the tag, or lost it.
    private func write(_ tag: String, _ change: TagChange, to localIDs: [PhotoLocalID]) throws(SQLiteError) -> Int {
        guard !localIDs.isEmpty, let tagID = try tagID(tag, creating: change == .add) else { return 0 }
        let read = try database.prepare("SELECT bits FROM tag_words WHERE word = ?1 AND tag_id = ?2")
        let replace = try database.prepare("INSERT OR REPLACE INTO tag_words (word, tag_id, bits) VALUES (?1, ?2, ?3)")
        let delete = try database.prepare("DELETE FROM tag_words WHERE word = ?1 AND tag_id = ?2")
        defer {
            read.reset()
            replace.reset()
            delete.reset()
        }
        try read.bind(tagID, at: 2)
        var changed = 0
        for (word, bits) in TagBitmap.words(of: localIDs) {
            try read.bind(word, at: 1)
            let old = try read.next() ? UInt64(bitPattern: read.int64(at: 0) ?? 0) : 0
            read.rewind()
            let new = change == .add ? old | bits : old & ~bits
            guard new != old else { continue }
            changed += (new ^ old).nonzeroBitCount
            let statement = new == 0 ? delete : replace
            try statement.bind(word, at: 1)
            try statement.bind(tagID, at: 2)
            if new != 0 { try statement.bind(Int64(bitPattern: new), at: 3) }
            _ = try statement.next()
            statement.rewind()
        }
        return changed
    }

    /// The number of tag `name` in `tag_names`; with `creating`, a new name is numbered first, else `nil` for a
    /// name no photo has ever had.
    private func tagID(_ name: String, creating: Bool) throws(SQLiteError) -> Int64? {
        let find = try database.prepare("SELECT id FROM tag_names WHERE name = ?1")
        defer { find.reset() }
        try find.bind(name, at: 1)
        if try find.next(), let id = find.int64(at: 0) { return id }
        guard creating else { return nil }
        try database.query("INSERT INTO tag_names (name) VALUES (?)", [.text(name)])
        return database.lastInsertRowID
    }

    /// `ids` as a JSON array of integers, in UTF-8.
    static func jsonIntegers(_ ids: [Int64]) -> [UInt8] {
        var json: [UInt8] = [UInt8(ascii: "[")]
        json.reserveCapacity(ids.count * 8 + 2)
        for (n, id) in ids.enumerated() {
            if n > 0 { json.append(UInt8(ascii: ",")) }
            json.append(contentsOf: String(id).utf8)
        }
        json.append(UInt8(ascii: "]"))
        return json
    }

    /// `ids` as a JSON array of integers.
    static func jsonText(_ ids: [Int64]) -> String {
        String(decoding: jsonIntegers(ids), as: UTF8.self)
    }

    /// Removes `tag` from every photo in `localIDs`.
    ///
    /// - Returns: `changed` = photos it was removed from, `unchanged` = photos that did not have it,
    ///   `missing` = local IDs with no photo.
    /// - Throws: `PhotoLibraryError.invalidTag`, `.store`.
    public func removeTag(_ tag: String, from localIDs: [PhotoLocalID]) throws(PhotoLibraryError) -> TagCounts {
        try changeTag(tag, .remove, of: localIDs)
    }

    /// Makes `tags` the photo's tags among those `isManaged` selects (for example every `year:`, `place:`,
    /// `color:` tag and `night`), leaving the others (a person's own keywords) alone.
    ///
    /// - Returns: how many tags were added and removed.
    /// - Throws: `PhotoLibraryError.invalidTag`, `.store`.
    @discardableResult
    public func replaceTags(
        of localID: PhotoLocalID, with tags: [String], where isManaged: (String) -> Bool
    ) throws(PhotoLibraryError) -> (added: Int, removed: Int) {
        var wanted = Set<String>()
        for tag in tags { wanted.insert(try TagName.validated(tag)) }
        return try store.store {
            guard try !database.query("SELECT 1 FROM photos WHERE id = ?", [.integer(localID)]).isEmpty else {
                return (0, 0)
            }
            let current = Set(try store.tagNames(of: [localID])[localID] ?? [])
            var removed = 0, added = 0
            for tag in current where isManaged(tag) && !wanted.contains(tag) {
                removed += try write(tag, .remove, to: [localID])
            }
            for tag in wanted.sorted() where !current.contains(tag) {
                added += try write(tag, .add, to: [localID])
            }
            return (added, removed)
        }
    }

}

/// One file's import: what the importer read, for `PhotoStore.upsert`.
public struct PhotoImport: Hashable, Sendable, Codable {
    /// Absolute path, its exact bytes.
    public var path: BytePath
    /// Its stamp when read.
    public var stamp: FileStamp
    /// Its content ID.
    public var stableID: StableID
    /// Its metadata.
    public var metadata: PhotoMetadata

    public init(path: BytePath, stamp: FileStamp, stableID: StableID, metadata: PhotoMetadata) {
        self.path = path
        self.stamp = stamp
        self.stableID = stableID
        self.metadata = metadata
    }
}

/// What `PhotoStore.upsert` did.
public enum ImportOutcome: Hashable, Sendable {
    /// A new photo with this local ID.
    case inserted(PhotoLocalID)
    /// The row at this path was refreshed (the file changed).
    case updated(PhotoLocalID)
    /// The file's stamp matched; nothing was written.
    case unchanged(PhotoLocalID)
    /// The same bytes are already in the library at another path; nothing was written.
    case sameContent(as: PhotoLocalID, path: BytePath)
}

/// Stable IDs resolved to local IDs (`PhotoStore.resolve`).
public struct ResolvedPhotos: Hashable, Sendable {
    /// Local IDs of the photos found, in input order, each once.
    public var localIDs: [PhotoLocalID]
    /// Inputs that are not in the library or not stable IDs, in input order.
    public var unknown: [String]
}

/// Whether a bulk tag job adds its tag or takes it off.
public enum TagChange: String, Sendable, Codable {
    /// Add the tag (`submit tag`).
    case add
    /// Take it off (`submit tag --remove`).
    case remove
}

/// What `PhotoStoreTransaction.changeTag(_:_:of:in:)` did to one batch of stable IDs.
public struct TagBatchOutcome: Hashable, Sendable {
    /// Photos whose tags changed (tag added, or removed).
    public var changed = 0
    /// Photos that already were as asked.
    public var unchanged = 0
    /// Positions (in the `StableIDList`) of entries that name no photo or are not stable IDs, in order.
    public var unknown: [Int] = []

    /// Nothing done yet: all counts zero.
    public init() {}
}

/// Counts from one tag batch.
public struct TagCounts: Hashable, Sendable, Codable {
    /// Photos whose tags changed (tag added, or removed).
    public var changed: Int
    /// Photos that already were as asked (already had the tag, or did not have it).
    public var unchanged: Int
    /// Local IDs with no photo (deleted since they were resolved).
    public var missing: Int

    /// For adds: photos that got the tag.
    public var added: Int { changed }
    /// For adds: photos that already had it.
    public var alreadyHad: Int { unchanged }

    public init(changed: Int, unchanged: Int, missing: Int) {
        self.changed = changed
        self.unchanged = unchanged
        self.missing = missing
    }

    /// Sums two batches.
    public static func + (a: TagCounts, b: TagCounts) -> TagCounts {
        TagCounts(changed: a.changed + b.changed, unchanged: a.unchanged + b.unchanged, missing: a.missing + b.missing)
    }
}

/// Tag spelling rules.
public enum TagName {
    /// Longest tag, in UTF-8 bytes (of its NFC form).
    public static let maxBytes = 200

    /// `tag` trimmed of surrounding spaces and in NFC (`nfc`), as the store keeps it.
    ///
    /// - Throws: `PhotoLibraryError.invalidTag` when empty, longer than `maxBytes`, or holding control characters.
    public static func validated(_ tag: String) throws(PhotoLibraryError) -> String {
        guard let clean = trimmed(tag).map(nfc) else { throw PhotoLibraryError(.invalidTag, "empty tag") }
        guard clean.utf8.count <= maxBytes else {
            throw PhotoLibraryError(.invalidTag, "tag longer than \(maxBytes) bytes")
        }
        guard !clean.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw PhotoLibraryError(.invalidTag, "tag holds control characters")
        }
        return clean
    }

    /// `text` in Unicode Normalization Form C (https://unicode.org/reports/tr15/): `Cão` typed with the
    /// precomposed U+00E3 or as `a` + U+0303 gives the same bytes, so it is one tag.
    ///
    /// Why the standard library's `_nfcCodeUnits` and not Foundation's `precomposedStringWithCanonicalMapping`:
    /// on Linux that one is only in the full `Foundation` (CoreFoundation), not in `FoundationEssentials`, which
    /// is all this project links; linking it would cost every daemon and worker process about 7 MiB of RSS
    /// (measured: 11.1 vs 18.6 MiB for a program that only normalizes one string). `_nfcCodeUnits` is the
    /// normalizer `String`'s own `==` and hashing use, so two tags are one exactly when Swift says their strings
    /// are equal. `TagNameTests` checks it against Foundation's.
    public static func nfc(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return text }  // ASCII is NFC
        return String(decoding: text._nfcCodeUnits, as: UTF8.self)
    }
}

extension Optional where Wrapped == Int {
    var sqlite: SQLiteValue { map { .integer(Int64($0)) } ?? .null }
}

extension Optional where Wrapped == String {
    var sqlite: SQLiteValue { map { .text($0) } ?? .null }
}
