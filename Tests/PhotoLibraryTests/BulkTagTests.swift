import Testing
import TrailbookSQLite

@testable import PhotoLibrary

struct StableIDListTests {
    static let a = "0d7e6c5e-1f2a-5b3c-8d4e-5f6a7b8c9d0e"
    static let b = "ffffffff-0000-5000-8000-000000000001"

    @Test func parsesAnIDFileLikeAUserWritesIt() {
        let file = "# trip photos\r\n  \(Self.a)\t\r\n\n\(Self.b.uppercased())\nnot-an-id\n\(Self.a)x\n\(Self.b)"
        let list = StableIDList(fileContents: Array(file.utf8))
        #expect(list.count == 5, "comments and blank lines skipped, everything else kept in place")
        #expect(list.text(at: 0) == Self.a, "spaces, tabs and CR trimmed")
        #expect(list.text(at: 1) == Self.b, "upper case folded")
        #expect(!list.isValid(at: 2) && list.text(at: 2) == "not-an-id")
        #expect(!list.isValid(at: 3) && list.text(at: 3) == Self.a + "x", "37 characters is not an ID")
        #expect(list.isValid(at: 4) && list.stableID(at: 4)?.text == Self.b, "last line without a newline")
        #expect(list.invalidCount == 2)
        #expect(list == StableIDList([Self.a, Self.b.uppercased(), "not-an-id", Self.a + "x", Self.b]))
    }

    @Test func keepsTheTextOfOnlyTheFirstInvalidEntries() {
        let texts = (0..<30).map { "bad-\($0)" } + [Self.a]
        let list = StableIDList(texts)
        #expect(list.invalidCount == 30 && list.count == 31)
        #expect(list.text(at: 19) == "bad-19")
        #expect(list.text(at: 20) == "(entry 21: not a stable ID)")
        #expect(list.text(at: 30) == Self.a)
    }

    @Test func invalidTextsShowNoControlCharacters() {
        let list = StableIDList(fileContents: Array("\u{1B}[2Jbad\u{0}\u{7F}id\n".utf8))
        #expect(list.text(at: 0) == "\u{FFFD}[2Jbad\u{FFFD}\u{FFFD}id")
    }

    @Test func rejectsMisplacedDashesAndNonHex() {
        let wrong = [
            "0d7e6c5e11f2a-5b3c-8d4e-5f6a7b8c9d0e", "0d7e6c5e-1f2a-5b3c-8d4e-5f6a7b8c9d0g", "", "-",
            "0d7e6c5e-1f2a-5b3c-8d4e-5f6a7b8c9d0", "0d7e6c5e-1f2a-5b3c-8d4e-5f6a7b8c9d0é",
        ]
        let list = StableIDList(wrong)
        #expect((0..<list.count).allSatisfy { !list.isValid(at: $0) })
    }

    @Test func jsonArrayIsInIDOrderWithPositions() throws {
        let list = StableIDList([Self.b, "junk", Self.a, Self.b])
        let (json, positions) = list.jsonArray(in: 0..<4)
        #expect(String(decoding: json, as: UTF8.self) == "[\"\(Self.a)\",\"\(Self.b)\",\"\(Self.b)\"]")
        #expect(positions.map { list.text(at: $0) } == [Self.a, Self.b, Self.b])
        #expect(Set(positions) == [0, 2, 3])
        #expect(String(decoding: list.jsonArray(in: 1..<2).json, as: UTF8.self) == "[]")
        #expect(String(decoding: StableIDList().jsonArray(in: 0..<0).json, as: UTF8.self) == "[]")
    }
}

struct BulkTagTests {
    static func library(_ count: Int) throws -> (PhotoStore, [String]) {
        let store = try PhotoStore(path: ":memory:")
        for n in 0..<count { try store.upsert(PhotoStoreTests.item(n)) }
        return (store, (0..<count).map { PhotoStoreTests.item($0).stableID.text })
    }

    @Test func changeTagCountsAddedAlreadyHadAndUnknown() throws {
        let (store, ids) = try Self.library(6)
        let stranger = StableID(contentsOf: [1, 2, 3]).text
        _ = try store.addTag("trip", to: [2])
        let list = StableIDList([ids[0], ids[1].uppercased(), ids[1], stranger, "junk", ids[2], stranger, ids[5]])
        let outcome = try store.transaction { tx in try tx.changeTag("trip", .add, of: list, in: 0..<list.count) }
        #expect(outcome.changed == 3, "photos 0, 1, 5; the repeat of 1 counts once")
        #expect(outcome.unchanged == 1, "photo 2 had it")
        #expect(outcome.unknown == [3, 4], "each unknown text once, in input order")
        for (n, expected) in [(0, true), (1, true), (2, true), (3, false), (4, false), (5, true)] {
            #expect(try store.photo(localID: PhotoLocalID(n + 1))?.tags.contains("trip") == expected, "photo \(n)")
        }
        // A sub-range touches only its entries; removal counts the other way round.
        let removed = try store.transaction { tx in try tx.changeTag("trip", .remove, of: list, in: 5..<8) }
        #expect(removed.changed == 2 && removed.unchanged == 0 && removed.unknown == [6])
        #expect(try store.photo(localID: 3)?.tags == [] && store.photo(localID: 6)?.tags == [])
        let again = try store.transaction { tx in try tx.changeTag("trip", .remove, of: list, in: 5..<6) }
        #expect(again.changed == 0 && again.unchanged == 1)
        #expect(throws: PhotoLibraryError.self) {
            try store.transaction { tx in try tx.changeTag("bad\ttag", .add, of: list, in: 0..<1) }
        }
    }

    @Test func changeTagRollsBackWithItsTransaction() throws {
        let (store, ids) = try Self.library(3)
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try store.transaction { tx in
                _ = try tx.changeTag("trip", .add, of: StableIDList(ids), in: 0..<3)
                throw Stop()
            }
        }
        #expect(try store.database.query("SELECT count(*) FROM tags").first?.int(0) == 0)
    }

    @Test func resolveKeepsInputOrderWhateverTheIDOrder() throws {
        let (store, ids) = try Self.library(20)
        let shuffled = [ids[7], ids[3], ids[19], ids[0], ids[3], ids[11]]
        let resolved = try store.resolve(StableIDList(shuffled), in: 0..<6)
        #expect(resolved.localIDs == [8, 4, 20, 1, 12])
        #expect(resolved.unknown == [])
    }

    @Test func photoByStableID() throws {
        let (store, ids) = try Self.library(3)
        let id = try #require(StableID(ids[1]))
        let photo = try #require(try store.photo(stableID: id))
        #expect(photo.localID == 2 && photo.path == "/photos/IMG_1.jpg")
        #expect(try store.photo(stableID: StableID(contentsOf: [7])) == nil)
    }

    /// Photos `1...count` written straight into a store at schema `version` (tags as that version keeps them are
    /// the caller's to insert), for migration tests.
    static func oldStore(at path: String, version: Int, photos count: Int) throws -> Database {
        let old = try Database(path: path)
        try old.execute("PRAGMA foreign_keys = ON")
        try old.migrate(Array(PhotoStore.migrations.prefix(version)))
        for n in 1...count {
            try old.query(
                "INSERT INTO photos (id, stable_id, path, bytes, mtime_ns, inode) VALUES (?, ?, ?, 1, 0, ?)",
                [.integer(Int64(n)), .text(StableID(contentsOf: Array("p\(n)".utf8)).text), .text("/p/\(n).jpg"),
                 .integer(Int64(n))])
        }
        return old
    }

    /// Every (photo, tag) pair, as the `tags` table (up to version 3) or view (from version 4) gives them.
    static func pairs(_ database: Database) throws -> [String] {
        try database.query("SELECT photo_id, tag FROM tags ORDER BY photo_id, tag").map {
            "\($0.int(0) ?? -1) \($0.text(1) ?? "")"
        }
    }

    /// A version-2 store (tags with a foreign key) keeps its tags through versions 3 and 4, and deleting a photo
    /// still deletes its tags.
    @Test func migrationFromVersion2KeepsTagsAndCascade() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/photos.db"
        do {
            let old = try Self.oldStore(at: path, version: 2, photos: 3)
            for n in 1...3 {
                try old.query("INSERT INTO tags (photo_id, tag) VALUES (?, 'trip'), (?, 'year:2024')",
                              [.integer(Int64(n)), .integer(Int64(n))])
            }
        }
        let store = try PhotoStore(path: path)
        #expect(try store.database.query("PRAGMA user_version").first?.int(0) == Int64(PhotoStore.migrations.count))
        #expect(try store.photo(localID: 2)?.tags == ["trip", "year:2024"])
        try store.database.query("DELETE FROM photos WHERE id = 2")
        #expect(try Self.pairs(store.database) == ["1 trip", "1 year:2024", "3 trip", "3 year:2024"])
        // No write path can tag a photo that is not there.
        #expect(try store.addTag("x", to: [2]).missing == 1)
        #expect(
            try store.transaction { tx in
                try tx.changeTag("x", .add, of: StableIDList([StableID(contentsOf: Array("p2".utf8)).text]), in: 0..<1)
            }.unknown == [0])
        #expect(try store.database.query("SELECT count(*) FROM tags WHERE photo_id = 2").first?.int(0) == 0)
    }

    /// Version 4 turns one row per photo and tag into bitmap words: every pair survives, including photos on the
    /// edges of a word (bit 0, and bit 63, SQLite's sign bit) and a word where all 64 photos have the tag.
    @Test func migrationToBitmapsKeepsEveryPair() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/photos.db"
        let before: [String]
        do {
            let old = try Self.oldStore(at: path, version: 3, photos: 200)
            for id in [1, 63, 64, 127, 128, 130, 191] { try old.query("INSERT INTO tags VALUES (?, 'edge')", [.integer(Int64(id))]) }
            for id in 128...191 { try old.query("INSERT INTO tags VALUES (?, 'full word')", [.integer(Int64(id))]) }
            try old.query("INSERT INTO tags VALUES (63, 'place:Lisbon'), (200, 'place:Lisbon')")
            before = try Self.pairs(old)
        }
        #expect(before.count == 7 + 64 + 2)
        let store = try PhotoStore(path: path)
        #expect(try Self.pairs(store.database) == before)
        #expect(try store.photo(localID: 63)?.tags == ["edge", "place:Lisbon"])
        #expect(
            try store.database.query("SELECT DISTINCT stable_id FROM tags WHERE photo_id = 63").map { $0.text(0) }
                == [StableID(contentsOf: Array("p63".utf8)).text], "the view names photos by stable ID too")
        #expect(try store.photo(localID: 129)?.tags == ["full word"])
        #expect(try store.database.query("SELECT bits FROM tag_words JOIN tag_names ON id = tag_id WHERE name = 'full word'")
            .map { $0.int(0) } == [-1], "all 64 bits of word 2")
    }

    /// Bits at the edges of a word: adding, removing and deleting photos touch only their own bit, a word whose
    /// last bit goes has no row, and counts are per photo.
    @Test func bitmapWordsKeepNeighboursApart() throws {
        let (store, _) = try Self.library(200)
        let rows = { try store.database.query("SELECT count(*) FROM tag_words").first?.int(0) ?? -1 }
        var counts = try store.addTag("edge", to: [63, 64, 1, 127, 128, 64])
        #expect(counts.changed == 5 && counts.unchanged == 0)
        #expect(try rows() == 3, "words 0, 1 and 2")
        counts = try store.addTag("edge", to: [62, 63])
        #expect(counts.changed == 1 && counts.unchanged == 1)
        #expect(try Self.pairs(store.database) == ["1 edge", "62 edge", "63 edge", "64 edge", "127 edge", "128 edge"])
        counts = try store.removeTag("edge", from: [128, 63, 65])
        #expect(counts.changed == 2 && counts.unchanged == 1)
        #expect(try rows() == 2, "word 2 lost its only bit")
        #expect(try store.photo(localID: 62)?.tags == ["edge"] && store.photo(localID: 63)?.tags == [])
        // The delete trigger clears one bit, and the row with it when it was the last.
        try store.database.query("DELETE FROM photos WHERE id IN (62, 127)")
        #expect(try Self.pairs(store.database) == ["1 edge", "64 edge"])
        try store.database.query("DELETE FROM photos WHERE id IN (1, 64)")
        #expect(try rows() == 0)
        #expect(throws: SQLiteError.self) {
            try store.database.query("INSERT INTO tag_words VALUES (5, 1, 0)")
        }
        // Removing a tag no photo ever had is a no-op that names nothing.
        #expect(try store.removeTag("never", from: [2, 3]).unchanged == 2)
        #expect(try store.database.query("SELECT count(*) FROM tag_names WHERE name = 'never'").first?.int(0) == 0)
    }

    /// The CLI's reader never migrates: an older store is refused with what to do (an older daemon may still be
    /// writing it), and a current one is read without being writable.
    @Test func readersNeverMigrate() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/photos.db"
        do {
            let old = try Self.oldStore(at: path, version: 3, photos: 2)
            try old.query("INSERT INTO tags VALUES (1, 'trip')")
        }
        do {
            _ = try PhotoStore.openForReading(path: path)
            Issue.record("a version-3 store was opened")
        } catch {
            #expect(error.message.contains("schema version 3") && error.message.contains("start the daemon"))
        }
        #expect(try Database(path: path).query("PRAGMA user_version").first?.int(0) == 3, "left as it was")
        _ = try PhotoStore(path: path)
        let reader = try PhotoStore.openForReading(path: path)
        #expect(try reader.photo(localID: 1)?.tags == ["trip"])
        #expect(throws: PhotoLibraryError.self) { _ = try reader.addTag("x", to: [1]) }
        #expect(throws: PhotoLibraryError.self) { _ = try PhotoStore.openForReading(path: dir + "/missing.db") }
    }

    /// `replaceTags` (autotag's write) swaps the managed tags of one photo and leaves its own keywords and its
    /// neighbours alone.
    @Test func replaceTagsTouchesOneBitPerTag() throws {
        let (store, _) = try Self.library(70)
        _ = try store.addTag("year:2023", to: [64, 65])
        _ = try store.addTag("trip", to: [64])
        let managed = { (tag: String) in tag.hasPrefix("year:") || tag == "night" }
        let changes = try store.transaction { tx in
            try tx.replaceTags(of: 64, with: ["year:2024", "night"], where: managed)
        }
        #expect(changes.added == 2 && changes.removed == 1)
        #expect(try store.photo(localID: 64)?.tags == ["night", "trip", "year:2024"])
        #expect(try store.photo(localID: 65)?.tags == ["year:2023"])
        let none = try store.transaction { tx in try tx.replaceTags(of: 999, with: ["night"], where: managed) }
        #expect(none.added == 0 && none.removed == 0, "no photo 999, nothing written")
        #expect(try Self.pairs(store.database).count == 4)
    }
}
