import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// Perceptual hashes: stored per photo, searched in memory for near duplicates.
extension PhotoStore {
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
}
