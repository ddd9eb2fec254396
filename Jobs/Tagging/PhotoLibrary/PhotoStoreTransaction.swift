import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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
