import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// Reading photos: by local ID, stable ID, ID prefix, in pages.
extension PhotoStore {
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
}
