import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// Tagging: stable IDs resolved in bulk, transactions, tag writes in their own transaction.
extension PhotoStore {
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
    func forgettingHashesOnFailure<R>(_ body: () throws(PhotoLibraryError) -> R) throws(PhotoLibraryError) -> R {
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
}
