import Foundation
import Testing
import TrailbookSQLite

@testable import PhotoLibrary

/// Tags are text: one keyword typed in two Unicode spellings (precomposed NFC, decomposed NFD) is one tag.
///
/// Swift's `==` on `String` already treats the two spellings as equal, so every comparison here is on UTF-8
/// bytes: that is what SQLite stores and compares.
struct TagNameTests {
    static let nfc = "C\u{E3}o"  // "Cão" with U+00E3
    static let nfd = "Ca\u{303}o"  // "Cão" as a + U+0303 COMBINING TILDE

    static func bytes(_ text: String?) -> [UInt8] { Array((text ?? "").utf8) }

    static func tagBytes(_ store: PhotoStore, _ localID: Int64) throws -> [[UInt8]] {
        try (store.photo(localID: localID)?.tags ?? []).map(bytes)
    }

    static func tagNameRows(_ database: Database) throws -> [[UInt8]] {
        try database.query("SELECT name FROM tag_names ORDER BY id").map { bytes($0.text(0)) }
    }

    @Test func validatedTagsAreNFCBytes() throws {
        #expect(Self.bytes(Self.nfc) != Self.bytes(Self.nfd), "the two spellings really differ in bytes")
        #expect(Self.bytes(try TagName.validated(Self.nfd)) == Self.bytes(Self.nfc))
        #expect(Self.bytes(try TagName.validated("  " + Self.nfd + " ")) == [0x43, 0xC3, 0xA3, 0x6F])
        #expect(try TagName.validated("trip") == "trip")
    }

    /// The standard library's normalizer agrees with Foundation's `precomposedStringWithCanonicalMapping` (full
    /// Foundation, which the daemon does not link) on composition, reordering of combining marks, Hangul,
    /// singletons and composition exclusions.
    @Test func nfcAgreesWithFoundation() {
        let samples = [
            Self.nfd, Self.nfc, "e\u{301}", "e\u{327}\u{301}", "e\u{301}\u{327}", "\u{1100}\u{1161}\u{11A8}",
            "\u{212B}", "\u{2126}", "\u{0958}", "\u{FB2A}", "A\u{30A}\u{301}", "a\u{308}\u{304}", "東京", "👍🏽",
            "\u{0F73}", "ñandú", "n\u{303}andu\u{301}", "Ω", "\u{1E9B}\u{323}", "x\u{0335}\u{0338}", "",
        ]
        for sample in samples {
            #expect(
                Self.bytes(TagName.nfc(sample)) == Self.bytes(sample.precomposedStringWithCanonicalMapping),
                "\(sample.unicodeScalars.map { String($0.value, radix: 16) })")
        }
    }

    /// NFD and NFC adds make one tag; a remove in the other spelling takes it off.
    @Test func bothSpellingsAreOneTag() throws {
        let (store, ids) = try BulkTagTests.library(3)
        #expect(try store.addTag(Self.nfc, to: [1]).changed == 1)
        #expect(try store.addTag(Self.nfd, to: [1, 2]).changed == 1, "photo 1 already has it")
        let list = StableIDList([ids[2]])
        #expect(try store.transaction { tx in try tx.changeTag(Self.nfd, .add, of: list, in: 0..<1) }.changed == 1)
        #expect(try Self.tagNameRows(store.database) == [Self.bytes(Self.nfc)], "one tag, spelled NFC")
        for id in Int64(1)...3 { #expect(try Self.tagBytes(store, id) == [Self.bytes(Self.nfc)]) }
        #expect(try store.removeTag(Self.nfd, from: [1]).changed == 1)
        #expect(try store.transaction { tx in try tx.changeTag(Self.nfd, .remove, of: list, in: 0..<1) }.changed == 1)
        #expect(try Self.tagBytes(store, 1) == [] && Self.tagBytes(store, 3) == [])
        #expect(try Self.tagBytes(store, 2) == [Self.bytes(Self.nfc)])
        // Autotag's writes go through the same spelling rule.
        try store.transaction { tx in
            try tx.replaceTags(of: 2, with: ["place:" + Self.nfd], where: { $0.hasPrefix("place:") })
        }
        #expect(try Self.tagBytes(store, 2) == [Self.bytes(Self.nfc), Self.bytes("place:" + Self.nfc)])
    }

    /// A store written before tags were normalized (version 6) with twins: `Cão` NFC on photos 1 and 3, NFD on 2,
    /// 3 and 70 (another bitmap word), and a tag only ever spelled NFD. Migration 7 merges the twins with OR and
    /// respells the other.
    @Test func migrationMergesTwins() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/photos.db"
        do {
            let old = try BulkTagTests.oldStore(at: path, version: 6, photos: 70)
            #expect(try old.query("PRAGMA user_version").first?.int(0) == 6)
            try old.query(
                "INSERT INTO tag_names (id, name) VALUES (1, ?), (2, 'trip'), (3, ?), (4, ?)",
                [.text(Self.nfc), .text(Self.nfd), .text("e\u{301}")])
            // Bits: photo N is bit N & 63 of word N >> 6.
            try old.query(
                "INSERT INTO tag_words (word, tag_id, bits) VALUES (0, 1, ?), (0, 2, ?), (0, 3, ?), (1, 3, ?), (0, 4, ?)",
                [.integer(1 << 1 | 1 << 3), .integer(1 << 2), .integer(1 << 2 | 1 << 3), .integer(1 << 6), .integer(1 << 5)])
            #expect(try Set(BulkTagTests.pairs(old).map { Array($0.utf8) }).count == 7, "twins are distinct rows before")
        }
        let store = try PhotoStore(path: path)
        #expect(try store.database.query("PRAGMA user_version").first?.int(0) == Int64(PhotoStore.migrations.count))
        #expect(PhotoStore.migrations.count >= 7, "migration 7 (the one under test) ran")
        #expect(try Self.tagNameRows(store.database) == [Self.bytes(Self.nfc), Self.bytes("trip"), Self.bytes("\u{E9}")])
        #expect(try Self.tagBytes(store, 1) == [Self.bytes(Self.nfc)])
        #expect(try Self.tagBytes(store, 2) == [Self.bytes(Self.nfc), Self.bytes("trip")])
        #expect(try Self.tagBytes(store, 3) == [Self.bytes(Self.nfc)], "had both twins: the tag once")
        #expect(try Self.tagBytes(store, 5) == [Self.bytes("\u{E9}")])
        #expect(try Self.tagBytes(store, 70) == [Self.bytes(Self.nfc)], "the twin's word not shared with the kept tag")
        #expect(
            try store.database.query("SELECT word, bits FROM tag_words WHERE tag_id = 1 ORDER BY word").map {
                [$0.int(0) ?? -1, $0.int(1) ?? -1]
            } == [[0, 1 << 1 | 1 << 2 | 1 << 3], [1, 1 << 6]])
        #expect(try store.database.query("SELECT count(*) FROM tag_words WHERE tag_id = 3").first?.int(0) == 0)
        // A remove in either spelling now takes it off.
        #expect(try store.removeTag(Self.nfd, from: [1, 2, 3, 70]).changed == 4)
    }
}
