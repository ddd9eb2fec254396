import TrailbookSQLite

/// The photo library's SQLite store: one row per photo plus its tags, in WAL mode.
///
/// Single writer: the process that owns the store (the daemon) is the only one that writes it; workers send it
/// results. Not `Sendable` (it owns a `Database`, used from one thread).
///
/// Schema (version 2, applied by `Database.migrate`):
/// - `photos(id INTEGER PRIMARY KEY, stable_id TEXT UNIQUE, path TEXT UNIQUE, bytes, mtime_ns, inode, width,
///   height, orientation, taken_at, camera_make, camera_model, gps_lat, gps_lon, phash)`; `id` is the local ID.
/// - `tags(photo_id → photos.id ON DELETE CASCADE, tag)`, primary key `(photo_id, tag)` (`WITHOUT ROWID`), so a
///   photo never holds a tag twice. (Version 1 also had an index `tags_by_tag(tag, photo_id)`; no query used it,
///   and version 2 drops it to halve the cost of a tag insert.)
public final class PhotoStore {
    /// The connection, for callers that keep their own tables in this file (a job's checkpoint committed in the
    /// same transaction as its tags). Use it only inside `transaction` when writing.
    public let database: Database

    /// The schema migrations, in order (index `i` moves version `i` to `i + 1`).
    public static let migrations: [String] = [
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
    ]

    /// Opens (creating if needed) the store at `path`, switches it to WAL and brings the schema up to date.
    ///
    /// - Throws: `PhotoLibraryError.store` if SQLite cannot open or migrate the file.
    public convenience init(path: String) throws(PhotoLibraryError) {
        let database: Database
        do {
            database = try Database(path: path)
            if path != ":memory:" { try database.enableWriteAheadLog() }
        } catch {
            throw PhotoLibraryError(.store, "\(error)")
        }
        try self.init(database: database)
    }

    /// Uses an open connection and brings its schema up to date.
    ///
    /// - Throws: `PhotoLibraryError.store` if a migration fails.
    public init(database: Database) throws(PhotoLibraryError) {
        self.database = database
        try store { try database.execute("PRAGMA foreign_keys = ON"); try database.migrate(PhotoStore.migrations) }
    }

    // MARK: Import

    /// The local ID of the photo at `path` if its stored stamp equals `stamp` (size, mtime and inode), else `nil`.
    /// An import calls this before reading a file, so unchanged files cost one `stat` and one indexed query.
    public func unchangedPhoto(path: String, stamp: FileStamp) throws(PhotoLibraryError) -> PhotoLocalID? {
        try store {
            let rows = try database.query(
                "SELECT id, bytes, mtime_ns, inode FROM photos WHERE path = ?", [.text(path)])
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
        try store {
            try database.transaction { () throws -> ImportOutcome in
                let existing = try database.query(
                    "SELECT id, bytes, mtime_ns, inode FROM photos WHERE path = ?", [.text(item.path)]
                ).first
                if let existing, let id = existing.int(0), existing.int(1) == item.stamp.bytes,
                    existing.int(2) == item.stamp.modifiedNanoseconds,
                    existing.int(3) == Int64(bitPattern: item.stamp.inode)
                {
                    return .unchanged(id)
                }
                if let twin = try database.query(
                    "SELECT id, path FROM photos WHERE stable_id = ? AND path <> ?",
                    [.text(item.stableID.text), .text(item.path)]
                ).first, let id = twin.int(0) {
                    return .sameContent(as: id, path: twin.text(1) ?? "")
                }
                let m = item.metadata
                var values: [SQLiteValue] = [
                    .text(item.stableID.text), .text(item.path), .integer(item.stamp.bytes),
                    .integer(item.stamp.modifiedNanoseconds), .integer(Int64(bitPattern: item.stamp.inode)),
                    m.width.sqlite, m.height.sqlite, m.orientation.sqlite, m.takenAt.sqlite, m.cameraMake.sqlite,
                    m.cameraModel.sqlite, m.gps.map { .real($0.latitude) } ?? .null,
                    m.gps.map { .real($0.longitude) } ?? .null,
                ]
                if let existing, let id = existing.int(0) {
                    values.append(.integer(id))
                    try database.query(
                        """
                        UPDATE photos SET stable_id = ?, path = ?, bytes = ?, mtime_ns = ?, inode = ?, width = ?,
                            height = ?, orientation = ?, taken_at = ?, camera_make = ?, camera_model = ?, gps_lat = ?,
                            gps_lon = ?, phash = NULL
                        WHERE id = ?
                        """, values)
                    return .updated(id)
                }
                try database.query(
                    """
                    INSERT INTO photos (stable_id, path, bytes, mtime_ns, inode, width, height, orientation, taken_at,
                        camera_make, camera_model, gps_lat, gps_lon)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, values)
                return .inserted(database.lastInsertRowID)
            }
        }
    }

    // MARK: Lookup

    /// How many photos the store holds.
    public func count() throws(PhotoLibraryError) -> Int {
        try store { Int(try database.query("SELECT count(*) FROM photos").first?.int(0) ?? 0) }
    }

    /// The photo with local ID `localID`, with its tags; `nil` if there is none.
    public func photo(localID: PhotoLocalID) throws(PhotoLibraryError) -> PhotoRecord? {
        try store {
            let rows = try database.query("SELECT \(PhotoStore.columns) FROM photos WHERE id = ?", [.integer(localID)])
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
    public func list(after: PhotoLocalID = 0, limit: Int = 100) throws(PhotoLibraryError) -> [PhotoRecord] {
        try store {
            let rows = try database.query(
                "SELECT \(PhotoStore.columns) FROM photos WHERE id > ? ORDER BY id LIMIT ?",
                [.integer(after), .integer(Int64(max(0, limit)))])
            return try withTags(rows.map(PhotoStore.record))
        }
    }

    // MARK: Bulk tagging by identifier

    /// Resolves stable IDs to local IDs in one indexed query, without reading any other column.
    ///
    /// The IDs go in as one JSON array bound to a single cached statement
    /// (`json_each(?) JOIN photos ON stable_id`), so a batch of any size is one statement and one index probe
    /// per ID. Input is case-insensitive; repeats are resolved once.
    /// - Returns: the local IDs found (in input order) and the inputs that are unknown or not stable IDs at all.
    public func resolve(_ stableIDs: [String]) throws(PhotoLibraryError) -> ResolvedPhotos {
        var texts: [String] = []
        texts.reserveCapacity(stableIDs.count)
        var unknown: [String] = []
        for text in stableIDs {
            if let id = StableID(text) { texts.append(id.text) } else { unknown.append(text) }
        }
        guard !texts.isEmpty else { return ResolvedPhotos(localIDs: [], unknown: unknown) }
        var array = "["
        array.reserveCapacity(texts.count * 39 + 2)
        for (index, text) in texts.enumerated() {
            if index > 0 { array += "," }
            array += "\"" + text + "\""
        }
        array += "]"
        // One row per input, in input order (json_each drives the join); `p.id` is NULL for an unknown ID. Only
        // integers come back, so no string is built per photo.
        let rows = try store {
            try database.query(
                "SELECT j.key, p.id FROM json_each(?) AS j LEFT JOIN photos AS p ON p.stable_id = j.value",
                [.text(array)])
        }
        var localIDs: [PhotoLocalID] = []
        localIDs.reserveCapacity(rows.count)
        var seen = Set<PhotoLocalID>(minimumCapacity: rows.count)
        var seenUnknown = Set<Int>()
        for row in rows {
            guard let key = row.int(0).map(Int.init) else { continue }
            if let local = row.int(1) {
                if seen.insert(local).inserted { localIDs.append(local) }
            } else if seenUnknown.insert(key).inserted, !unknown.contains(texts[key]) {
                unknown.append(texts[key])
            }
        }
        return ResolvedPhotos(localIDs: localIDs, unknown: unknown)
    }

    /// Runs `body` in one `BEGIN IMMEDIATE … COMMIT` transaction; everything it does through the
    /// `PhotoStoreTransaction` (tags, and the caller's own statements on `database`) commits together or not at all.
    ///
    /// This is how the bulk tag job keeps "each batch's tags and the job's checkpoint in the same SQLite
    /// transaction": `try store.transaction { tx in let n = try tx.addTag(t, to: ids); try tx.database.query(
    /// "UPDATE checkpoint …") }`.
    /// - Throws: what `body` throws (after rolling back), or `SQLiteError` if the transaction cannot begin or commit.
    public func transaction<R>(_ body: (PhotoStoreTransaction) throws -> R) throws -> R {
        try database.transaction { try body(PhotoStoreTransaction(store: self)) }
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

    /// Stores the perceptual hash of a photo (for near-duplicate search).
    public func setPerceptualHash(_ hash: PerceptualHash, for localID: PhotoLocalID) throws(PhotoLibraryError) {
        _ = try store {
            try database.query(
                "UPDATE photos SET phash = ? WHERE id = ?",
                [.integer(Int64(bitPattern: hash.value)), .integer(localID)])
        }
    }

    /// The stored photo whose hash is nearest to `hash` within `maxDistance` bits, other than `excluding`, with
    /// the distance; ties go to the lower local ID (the earlier import). A linear scan of the `phash` column
    /// (about 1 ms per 100 000 photos in release builds).
    public func nearestDuplicate(
        of hash: PerceptualHash, maxDistance: Int = PerceptualHash.nearDuplicateDistance,
        excluding: PhotoLocalID? = nil
    ) throws(PhotoLibraryError) -> (localID: PhotoLocalID, stableID: StableID, distance: Int)? {
        let statement = try store { try database.prepare("SELECT id, stable_id, phash FROM photos WHERE phash IS NOT NULL ORDER BY id") }
        var best: (PhotoLocalID, String, Int)?
        try store {
            while let row = try statement.step() {
                guard let id = row.int(0), id != excluding, let bits = row.int(2) else { continue }
                let d = (UInt64(bitPattern: bits) ^ hash.value).nonzeroBitCount
                if d <= maxDistance, d < (best?.2 ?? Int.max) { best = (id, row.text(1) ?? "", d) }
            }
            statement.reset()
        }
        guard let best, let stable = StableID(best.1) else { return nil }
        return (best.0, stable, best.2)
    }

    // MARK: Internals

    static let columns = """
        id, stable_id, path, bytes, mtime_ns, inode, width, height, orientation, taken_at, camera_make,
        camera_model, gps_lat, gps_lon, phash
        """

    static func record(_ row: Row) -> PhotoRecord {
        let gps: GPSCoordinate? =
            if let lat = row.double(12), let lon = row.double(13) {
                GPSCoordinate(latitude: lat, longitude: lon)
            } else {
                nil
            }
        return PhotoRecord(
            localID: row.int(0) ?? 0, stableID: StableID(row.text(1) ?? "") ?? StableID(sha256Hex: ""),
            path: row.text(2) ?? "",
            stamp: FileStamp(
                bytes: row.int(3) ?? 0, modifiedNanoseconds: row.int(4) ?? 0,
                inode: UInt64(bitPattern: row.int(5) ?? 0)),
            width: row.int(6).map(Int.init), height: row.int(7).map(Int.init), orientation: row.int(8).map(Int.init),
            takenAt: row.text(9), cameraMake: row.text(10), cameraModel: row.text(11), gps: gps,
            perceptualHash: row.int(14).map { PerceptualHash(value: UInt64(bitPattern: $0)) }, tags: [])
    }

    /// Fills in tags for `records` with one query.
    func withTags(_ records: [PhotoRecord]) throws -> [PhotoRecord] {
        guard !records.isEmpty else { return records }
        let array = "[" + records.map { String($0.localID) }.joined(separator: ",") + "]"
        let rows = try database.query(
            "SELECT photo_id, tag FROM tags WHERE photo_id IN (SELECT value FROM json_each(?)) ORDER BY photo_id, tag",
            [.text(array)])
        var tags: [PhotoLocalID: [String]] = [:]
        for row in rows { if let id = row.int(0), let tag = row.text(1) { tags[id, default: []].append(tag) } }
        return records.map { record in
            var record = record
            record.tags = tags[record.localID] ?? []
            return record
        }
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

    /// Adds `tag` to every photo in `localIDs` with two statements, whatever the batch size.
    ///
    /// - Returns: `changed` = photos that got the tag now (added), `unchanged` = photos that already had it,
    ///   `missing` = local IDs with no photo. Repeated IDs count once.
    /// - Throws: `PhotoLibraryError.invalidTag` for an empty tag or one with control characters,
    ///   `.store` on a SQLite error.
    public func addTag(_ tag: String, to localIDs: [PhotoLocalID]) throws(PhotoLibraryError) -> TagCounts {
        try changeTag(
            tag, of: localIDs,
            "INSERT OR IGNORE INTO tags (photo_id, tag) SELECT id, ?2 FROM photos WHERE id IN (SELECT value FROM json_each(?1))")
    }

    /// Removes `tag` from every photo in `localIDs`.
    ///
    /// - Returns: `changed` = photos it was removed from, `unchanged` = photos that did not have it,
    ///   `missing` = local IDs with no photo.
    /// - Throws: `PhotoLibraryError.invalidTag`, `.store`.
    public func removeTag(_ tag: String, from localIDs: [PhotoLocalID]) throws(PhotoLibraryError) -> TagCounts {
        try changeTag(tag, of: localIDs, "DELETE FROM tags WHERE tag = ?2 AND photo_id IN (SELECT value FROM json_each(?1))")
    }

    /// Runs `statement` (binding ?1 = the IDs as a JSON array, ?2 = the tag) and counts: rows it changed, photos
    /// present that it did not change, IDs with no photo.
    private func changeTag(_ tag: String, of localIDs: [PhotoLocalID], _ statement: String) throws(PhotoLibraryError)
        -> TagCounts
    {
        let tag = try TagName.validated(tag)
        let (array, unique) = PhotoStoreTransaction.jsonArray(localIDs)
        guard unique > 0 else { return TagCounts(changed: 0, unchanged: 0, missing: 0) }
        return try store.store {
            let present = Int(
                try database.query(
                    "SELECT count(*) FROM photos WHERE id IN (SELECT value FROM json_each(?))", [.text(array)]
                ).first?.int(0) ?? 0)
            try database.query(statement, [.text(array), .text(tag)])
            let changed = database.changes
            return TagCounts(changed: changed, unchanged: present - changed, missing: unique - present)
        }
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
            let current = Set(
                try database.query("SELECT tag FROM tags WHERE photo_id = ?", [.integer(localID)]).compactMap {
                    $0.text(0)
                })
            var removed = 0, added = 0
            for tag in current where isManaged(tag) && !wanted.contains(tag) {
                try database.query("DELETE FROM tags WHERE photo_id = ? AND tag = ?", [.integer(localID), .text(tag)])
                removed += 1
            }
            for tag in wanted.sorted() where !current.contains(tag) {
                try database.query(
                    "INSERT OR IGNORE INTO tags (photo_id, tag) SELECT id, ?2 FROM photos WHERE id = ?1",
                    [.integer(localID), .text(tag)])
                added += database.changes
            }
            return (added, removed)
        }
    }

    static func jsonArray(_ ids: [PhotoLocalID]) -> (String, Int) {
        let unique = Array(Set(ids))
        return ("[" + unique.map(String.init).joined(separator: ",") + "]", unique.count)
    }
}

/// One file's import: what the importer read, for `PhotoStore.upsert`.
public struct PhotoImport: Hashable, Sendable, Codable {
    /// Absolute path.
    public var path: String
    /// Its stamp when read.
    public var stamp: FileStamp
    /// Its content ID.
    public var stableID: StableID
    /// Its metadata.
    public var metadata: PhotoMetadata

    public init(path: String, stamp: FileStamp, stableID: StableID, metadata: PhotoMetadata) {
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
    case sameContent(as: PhotoLocalID, path: String)
}

/// Stable IDs resolved to local IDs (`PhotoStore.resolve`).
public struct ResolvedPhotos: Hashable, Sendable {
    /// Local IDs of the photos found, in input order, each once.
    public var localIDs: [PhotoLocalID]
    /// Inputs that are not in the library or not stable IDs, in input order.
    public var unknown: [String]
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
    /// Longest tag, in UTF-8 bytes.
    public static let maxBytes = 200

    /// `tag` trimmed of surrounding spaces.
    ///
    /// - Throws: `PhotoLibraryError.invalidTag` when empty, longer than `maxBytes`, or holding control characters.
    public static func validated(_ tag: String) throws(PhotoLibraryError) -> String {
        guard let clean = trimmed(tag) else { throw PhotoLibraryError(.invalidTag, "empty tag") }
        guard clean.utf8.count <= maxBytes else {
            throw PhotoLibraryError(.invalidTag, "tag longer than \(maxBytes) bytes")
        }
        guard !clean.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw PhotoLibraryError(.invalidTag, "tag holds control characters")
        }
        return clean
    }
}

extension Optional where Wrapped == Int {
    var sqlite: SQLiteValue { map { .integer(Int64($0)) } ?? .null }
}

extension Optional where Wrapped == String {
    var sqlite: SQLiteValue { map { .text($0) } ?? .null }
}
