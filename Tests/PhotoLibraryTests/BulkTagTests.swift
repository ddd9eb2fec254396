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

    /// Version 3 replaced the tags' foreign key with a trigger: an existing version-2 store keeps its tags, and
    /// deleting a photo still deletes its tags.
    @Test func migrationToVersion3KeepsTagsAndCascade() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/photos.db"
        do {
            let old = try Database(path: path)
            try old.execute("PRAGMA foreign_keys = ON")
            try old.migrate(Array(PhotoStore.migrations.prefix(2)))
            for n in 1...3 {
                try old.query(
                    "INSERT INTO photos (id, stable_id, path, bytes, mtime_ns, inode) VALUES (?, ?, ?, 1, 0, ?)",
                    [.integer(Int64(n)), .text(StableID(contentsOf: [UInt8(n)]).text), .text("/p/\(n).jpg"),
                     .integer(Int64(n))])
                try old.query("INSERT INTO tags (photo_id, tag) VALUES (?, 'trip'), (?, 'year:2024')",
                              [.integer(Int64(n)), .integer(Int64(n))])
            }
        }
        let store = try PhotoStore(path: path)
        #expect(try store.database.query("PRAGMA user_version").first?.int(0) == 3)
        #expect(try store.database.query("PRAGMA foreign_key_list(tags)").isEmpty)
        #expect(try store.photo(localID: 2)?.tags == ["trip", "year:2024"])
        try store.database.query("DELETE FROM photos WHERE id = 2")
        #expect(try store.database.query("SELECT count(*) FROM tags WHERE photo_id = 2").first?.int(0) == 0)
        #expect(try store.database.query("SELECT count(*) FROM tags").first?.int(0) == 4)
        // No write path can tag a photo that is not there.
        #expect(try store.addTag("x", to: [2]).missing == 1)
        #expect(
            try store.transaction { tx in
                try tx.changeTag("x", .add, of: StableIDList([StableID(contentsOf: [2]).text]), in: 0..<1)
            }.unknown == [0])
        #expect(try store.database.query("SELECT count(*) FROM tags WHERE photo_id = 2").first?.int(0) == 0)
    }
}
