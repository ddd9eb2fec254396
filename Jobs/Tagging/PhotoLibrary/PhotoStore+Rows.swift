import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// Rows: the columns, their values, records with their tags, and SQLite errors as the store reports them.
extension PhotoStore {
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
