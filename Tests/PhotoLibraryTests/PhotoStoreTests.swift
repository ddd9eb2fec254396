import Foundation
import Testing
import TrailbookLoop
import TrailbookSQLite

@testable import PhotoLibrary

struct PhotoStoreTests {
    static func item(_ n: Int, path: String? = nil, bytes: Int64 = 1000) -> PhotoImport {
        PhotoImport(
            path: BytePath(path ?? "/photos/IMG_\(n).jpg"),
            stamp: FileStamp(bytes: bytes, modifiedNanoseconds: 1_700_000_000_000_000_000 + Int64(n), inode: UInt64(n)),
            stableID: StableID(contentsOf: Array("photo \(n)".utf8)),
            metadata: PhotoMetadata(width: 4032, height: 3024, orientation: 6, takenAt: "2024-05-03T18:22:10+01:00",
                                    cameraMake: "Apple", gps: GPSCoordinate(latitude: 38.6916, longitude: -9.2160)))
    }

    @Test func upsertSkipsUnchangedFiles() throws {
        let store = try PhotoStore(path: ":memory:")
        let first = try store.upsert(Self.item(1))
        guard case .inserted(let id) = first else { Issue.record("expected insert, got \(first)"); return }
        #expect(try store.upsert(Self.item(1)) == .unchanged(id))
        #expect(try store.unchangedPhoto(path: "/photos/IMG_1.jpg", stamp: Self.item(1).stamp) == id)
        var edited = Self.item(1, bytes: 2000)
        edited.stableID = StableID(contentsOf: Array("edited".utf8))
        #expect(try store.upsert(edited) == .updated(id))
        #expect(try store.unchangedPhoto(path: "/photos/IMG_1.jpg", stamp: Self.item(1).stamp) == nil)
        #expect(try store.photo(localID: id)?.stableID == edited.stableID)
        // The same bytes at a second path are one photo.
        let copy = PhotoImport(path: "/copies/x.jpg", stamp: edited.stamp, stableID: edited.stableID, metadata: edited.metadata)
        #expect(try store.upsert(copy) == .sameContent(as: id, path: "/photos/IMG_1.jpg"))
        #expect(try store.count() == 1)
    }

    /// Paths are bytes (issue 10): a name that is not UTF-8 is stored as a BLOB and read back exactly; `café` in
    /// NFC and in NFD are two files, so two photos; a TEXT path (every store before byte paths) still matches.
    @Test func pathsAreStoredByteExact() throws {
        let store = try PhotoStore(path: ":memory:")
        let latin1 = BytePath(bytes: Array("/photos/caf".utf8) + [0xE9] + Array(".jpg".utf8))
        let nfc = BytePath("/photos/caf\u{E9}.jpg")
        let nfd = BytePath("/photos/cafe\u{301}.jpg")
        #expect(nfc != nfd && "/photos/caf\u{E9}.jpg" == "/photos/cafe\u{301}.jpg", "String equality would merge them")
        var ids: [PhotoLocalID] = []
        for (n, path) in [latin1, nfc, nfd].enumerated() {
            var item = Self.item(n + 1)
            item.path = path
            guard case .inserted(let id) = try store.upsert(item) else { Issue.record("\(path) not inserted"); return }
            ids.append(id)
            #expect(try store.upsert(item) == .unchanged(id))
            #expect(try store.unchangedPhoto(path: path, stamp: item.stamp) == id)
        }
        #expect(try store.count() == 3)
        #expect(try store.list().map(\.path.bytes) == [latin1.bytes, nfc.bytes, nfd.bytes])
        #expect(try store.paths(of: ids) == [latin1, nfc, nfd])
        // How SQLite holds them: the one that is not UTF-8 as a BLOB, the others as TEXT.
        #expect(
            try store.database.query("SELECT typeof(path) FROM photos ORDER BY id").compactMap { $0.text(0) }
                == ["blob", "text", "text"])
        // The JSON: a string when UTF-8, else {"base64", "text"} in that order.
        let line = try #require(try store.photo(localID: ids[0])?.json.encodedLine())
        #expect(line.contains(#""path":{"base64":"L3Bob3Rvcy9jYWbpLmpwZw==","text":"/photos/caf\\xe9.jpg"}"#), "\(line)")
        // A second copy of the latin-1 photo's bytes is the same content, reported with the first one's exact path.
        var copy = Self.item(1)
        copy.path = "/copies/x.jpg"
        #expect(try store.upsert(copy) == .sameContent(as: ids[0], path: latin1))
    }

    @Test func lookupByIDAndPrefix() throws {
        let store = try PhotoStore(path: ":memory:")
        var ids: [StableID] = []
        for n in 0..<40 {
            try store.upsert(Self.item(n))
            ids.append(Self.item(n).stableID)
        }
        let target = ids[7]
        #expect(try store.photo(matching: target.text).stableID == target)
        #expect(try store.photo(matching: target.text.uppercased()).stableID == target)
        #expect(try store.photo(matching: String(target.text.prefix(13))).stableID == target)
        // 40 IDs over 16 first hex digits: some first digit is shared.
        let shared = try #require(Dictionary(grouping: ids, by: { $0.text.prefix(1) }).first { $0.value.count > 1 }?.key)
        #expect { try store.photo(matching: String(shared)) } throws: { ($0 as? PhotoLibraryError)?.code == .ambiguous }
        #expect { try store.photo(matching: "zzz") } throws: { ($0 as? PhotoLibraryError)?.code == .invalidID }
        let unused = try #require("0123456789abcdef".map(String.init).first { p in !ids.contains { $0.text.hasPrefix(p) } }
            .map { $0 + "0000000-0000" } ?? Optional("ffffffff-ffff-ffff"))
        if !ids.contains(where: { $0.text.hasPrefix(unused) }) {
            #expect { try store.photo(matching: unused) } throws: { ($0 as? PhotoLibraryError)?.code == .notFound }
        }
    }

    @Test func listPaginates() throws {
        let store = try PhotoStore(path: ":memory:")
        for n in 0..<25 { try store.upsert(Self.item(n)) }
        var seen: [PhotoLocalID] = []
        var after: PhotoLocalID = 0
        while true {
            let page = try store.list(after: after, limit: 10)
            if page.isEmpty { break }
            seen += page.map(\.localID)
            after = page.last!.localID
        }
        #expect(seen.count == 25 && seen == seen.sorted())
    }

    @Test func tagBatchesCountAddedAndAlreadyHad() throws {
        let store = try PhotoStore(path: ":memory:")
        for n in 0..<5 { try store.upsert(Self.item(n)) }
        let resolved = try store.resolve(
            StableIDList(
                [Self.item(0).stableID.text, Self.item(1).stableID.text.uppercased(), Self.item(2).stableID.text,
                 Self.item(2).stableID.text, StableID(contentsOf: [9]).text, "garbage"]), in: 0..<6)
        #expect(resolved.localIDs.count == 3)
        #expect(resolved.unknown == [StableID(contentsOf: [9]).text, "garbage"], "input order")

        let first = try store.addTag("trip", to: [resolved.localIDs[0]])
        #expect(first == TagCounts(changed: 1, unchanged: 0, missing: 0))
        let batch = try store.addTag("trip", to: resolved.localIDs + [9_999])
        #expect(batch.added == 2 && batch.alreadyHad == 1 && batch.missing == 1)
        #expect(try store.addTag("trip", to: resolved.localIDs).alreadyHad == 3)
        let removed = try store.removeTag("trip", from: [resolved.localIDs[0], resolved.localIDs[1], 5])
        #expect(removed == TagCounts(changed: 2, unchanged: 1, missing: 0))
        #expect(throws: PhotoLibraryError.self) { try store.addTag("  ", to: [1]) }
    }

    @Test func callerStatementsShareTheTransaction() throws {
        let store = try PhotoStore(path: ":memory:")
        for n in 0..<3 { try store.upsert(Self.item(n)) }
        try store.database.execute("CREATE TABLE checkpoint (job TEXT PRIMARY KEY, done INTEGER)")
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try store.transaction { tx in
                _ = try tx.addTag("a", to: [1, 2])
                try tx.database.query("INSERT INTO checkpoint VALUES ('j', 2)")
                throw Stop()
            }
        }
        #expect(try store.photo(localID: 1)?.tags == [])
        #expect(try store.database.query("SELECT count(*) FROM checkpoint").first?.int(0) == 0)
        let counts = try store.transaction { tx in
            let c = try tx.addTag("a", to: [1, 2])
            try tx.database.query("INSERT INTO checkpoint VALUES ('j', 2)")
            return c
        }
        #expect(counts.added == 2)
        #expect(try store.database.query("SELECT done FROM checkpoint").first?.int(0) == 2)
    }

    @Test func warningsAreKeptPerPhotoAndReplacedByTheNextRead() throws {
        let store = try PhotoStore(path: ":memory:")
        var item = Self.item(1)
        item.metadata.warnings = ["GPSLatitudeRef missing; position not used"]
        try store.upsert(item)
        #expect(try store.photo(localID: 1)?.warnings == ["GPSLatitudeRef missing; position not used"])
        #expect(try store.photo(localID: 1)?.json.encodedLine().hasSuffix(#""warnings":["GPSLatitudeRef missing; position not used"]}"#) == true)
        try store.setWarnings(["corrupt data: the decoder warned 2 time(s) and decoded the rest"], for: 1)
        #expect(try store.photo(localID: 1)?.warnings == ["corrupt data: the decoder warned 2 time(s) and decoded the rest"])
        try store.setWarnings([], for: 1)
        #expect(try store.photo(localID: 1)?.warnings == [])
        #expect(try store.database.query("SELECT warnings FROM photos").first?.text(0) == nil, "none is NULL")
    }

    @Test func photoJSONHasTheDesignShape() throws {
        let store = try PhotoStore(path: ":memory:")
        try store.upsert(Self.item(1))
        _ = try store.addTag("year:2024", to: [1])
        _ = try store.addTag("place:Lisbon", to: [1])
        _ = try store.addTag("trip", to: [1])
        let json = try #require(try store.photo(localID: 1)).json
        let line = try json.encodedLine()
        let id = Self.item(1).stableID.text
        #expect(
            line == """
                {"id":"\(id)","local_id":1,"path":"/photos/IMG_1.jpg","bytes":1000,"width":4032,"height":3024,\
                "orientation":6,"taken_at":"2024-05-03T18:22:10+01:00","clock_not_set":false,"camera":{"make":"Apple","model":null},\
                "gps":{"lat":38.6916,"lon":-9.216},"tags":["place:Lisbon","trip","year:2024"],"warnings":[]}
                """)
        var bare = json
        bare.camera = nil
        bare.gps = nil
        bare.width = nil
        #expect(try bare.encodedLine().contains(#""width":null"#))
        #expect(try bare.encodedLine().contains(#""camera":null,"gps":null"#))
    }

    @Test func fileStoreUsesWAL() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let store = try PhotoStore(path: dir + "/photos.db")
        #expect(try store.database.query("PRAGMA journal_mode").first?.text(0) == "wal")
        #expect(try store.database.query("PRAGMA user_version").first?.int(0) == Int64(PhotoStore.migrations.count))
        let plan = try store.database.query(
            "EXPLAIN QUERY PLAN SELECT j.key, p.id FROM json_each(?) AS j LEFT JOIN photos AS p ON p.stable_id = j.value",
            [.text("[]")]
        ).compactMap { $0.text(3) }.joined(separator: "; ")
        #expect(plan.contains("USING INDEX") || plan.contains("USING COVERING INDEX"), "\(plan)")
    }

    @Test func nearDuplicateSearch() throws {
        let store = try PhotoStore(path: ":memory:")
        for n in 0..<3 { try store.upsert(Self.item(n)) }
        try store.setPerceptualHash(PerceptualHash(value: 0xFFFF_0000_FFFF_0000), for: 1)
        try store.setPerceptualHash(PerceptualHash(value: 0x0000_FFFF_0000_FFFF), for: 2)
        let hit = try #require(try store.nearestDuplicate(of: PerceptualHash(value: 0xFFFF_0000_FFFF_0001), importedBefore: 3))
        #expect(hit.localID == 1 && hit.distance == 1)
        #expect(hit.stableID == Self.item(0).stableID)
        #expect(try store.nearestDuplicate(of: PerceptualHash(value: 0xFFFF_0000_FFFF_0000), importedBefore: 1) == nil)
        // A later photo nearer than any earlier one does not hide the earlier twin (a re-run of autotag, with
        // every photo already hashed, must give the same duplicate-of: tags).
        try store.setPerceptualHash(PerceptualHash(value: 0xFFFF_0000_FFFF_00FF), for: 3)
        let earlier = try #require(try store.nearestDuplicate(of: PerceptualHash(value: 0xFFFF_0000_FFFF_00FE), importedBefore: 3))
        #expect(earlier.localID == 1 && earlier.distance == 7)
    }

    /// The in-memory hash index follows the store: a hash set inside a transaction that rolls back is not used,
    /// and a re-imported (changed) file loses its hash in both.
    @Test func nearDuplicateSearchFollowsTheStore() throws {
        let store = try PhotoStore(path: ":memory:")
        for n in 0..<3 { try store.upsert(Self.item(n)) }
        let hash = PerceptualHash(value: 0x1234_5678_9ABC_DEF0)
        try store.setPerceptualHash(hash, for: 1)
        #expect(try store.nearestDuplicate(of: hash, importedBefore: 3)?.localID == 1, "index loaded")
        struct Stop: Error {}
        let other = PerceptualHash(value: ~hash.value)
        #expect(throws: Stop.self) {
            try store.transaction { _ in
                try store.setPerceptualHash(other, for: 2)
                #expect(try store.nearestDuplicate(of: other, importedBefore: 3)?.localID == 2, "seen inside")
                throw Stop()
            }
        }
        #expect(try store.database.query("SELECT phash FROM photos WHERE id = 2").first?.int(0) == nil)
        #expect(try store.nearestDuplicate(of: other, importedBefore: 3) == nil, "rolled back with the store")
        #expect(try store.nearestDuplicate(of: hash, importedBefore: 3)?.localID == 1)
        // Photo 1's file changes: re-import clears its hash, so it is no twin any more.
        try store.upsert(Self.item(0, bytes: 2000))
        #expect(try store.database.query("SELECT phash FROM photos WHERE id = 1").first?.int(0) == nil)
        #expect(try store.nearestDuplicate(of: hash, importedBefore: 3) == nil)
        try store.setPerceptualHash(hash, for: 2)
        #expect(try store.nearestDuplicate(of: hash, importedBefore: 3)?.localID == 2)
    }
}

struct PerceptualHashIndexTests {
    @Test func nearestEarlierWithinTheDistanceTiesToTheLowerID() {
        var index = PerceptualHashIndex(ascending: [(2, 0b1111), (5, 0b0111), (9, 0b0011)])
        let probe = PerceptualHash(value: 0b0001)
        #expect(index.nearest(to: probe, maxDistance: 10, before: 100)! == (9, 1))
        #expect(index.nearest(to: probe, maxDistance: 10, before: 9)! == (5, 2), "only IDs below 9")
        #expect(index.nearest(to: probe, maxDistance: 1, before: 9) == nil, "5 is 2 bits away")
        #expect(index.nearest(to: probe, maxDistance: 10, before: 2) == nil)
        index.set(PerceptualHash(value: 0b0011), for: 3)  // same distance as 9, lower ID
        #expect(index.nearest(to: probe, maxDistance: 10, before: 100)! == (3, 1))
        index.set(PerceptualHash(value: 0b1111), for: 3)  // replaced, not added
        #expect(index.count == 4)
        #expect(index.nearest(to: probe, maxDistance: 10, before: 100)! == (9, 1))
        index.remove(9)
        index.remove(42)
        #expect(index.count == 3)
        #expect(index.nearest(to: PerceptualHash(value: 0b0111), maxDistance: 0, before: 100)! == (5, 0))
        #expect(index.nearest(to: PerceptualHash(value: ~0), maxDistance: 10, before: 100) == nil)
    }
}

struct PhotoScanTests {
    /// Names are bytes: one that is not UTF-8 (in a folder that is not UTF-8 either) is yielded with its exact
    /// bytes, `café` in NFC and NFD are two files, and the order is by bytes.
    @Test func yieldsNamesByTheirExactBytes() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let sub = BytePath.join(BytePath(dir), BytePath(bytes: [0x72, 0xE9]))  // r\xe9
        #expect(sub.withCString { mkdir($0, 0o755) } == 0)
        let names: [[UInt8]] = [
            Array("caf".utf8) + [0xE9] + Array(".jpg".utf8), Array("caf\u{E9}.jpg".utf8), Array("cafe\u{301}.jpg".utf8),
            Array("caf".utf8) + [0xE9] + Array(".txt".utf8),
        ]
        for name in names {
            let fd = BytePath.join(sub, BytePath(bytes: name)).withCString { open($0, O_CREAT | O_WRONLY, 0o644) }
            #expect(fd >= 0)
            close(fd)
        }
        var skipped: [PhotoScan.Skip] = []
        let found = Array(PhotoScan(root: sub, passedOver: { skipped.append($0) })).map(\.path)
        #expect(found == names.prefix(3).sorted { $0.lexicographicallyPrecedes($1) }.map { BytePath.join(sub, BytePath(bytes: $0)) })
        #expect(skipped == [PhotoScan.Skip(path: BytePath.join(sub, BytePath(bytes: names[3])).bytes, reason: .notPhotoName, detail: "")])
    }

    /// A byte path survives a checkpoint's JSON (a tag job's pending sidecar changes, an import's failures).
    @Test func bytePathsRoundTripThroughJSON() throws {
        let change = XMPSidecarChange(path: BytePath(bytes: Array("/p/caf".utf8) + [0xE9] + Array(".jpg".utf8)), add: ["trip"], remove: [])
        let json = try JSONEncoder().encode(change)
        #expect(String(decoding: json, as: UTF8.self).contains(#""base64":"L3AvY2Fm6S5qcGc=""#))
        #expect(try JSONDecoder().decode(XMPSidecarChange.self, from: json) == change)
        // A checkpoint written before byte paths (a plain string) still decodes.
        let old = try JSONDecoder().decode(XMPSidecarChange.self, from: Data(#"{"path":"/p/a.jpg","add":["x"],"remove":[]}"#.utf8))
        #expect(old.path == "/p/a.jpg")
    }

    /// Image names are candidates (what they are is read from their content later); other files are not.
    @Test func walksImageFilesInStableOrderWithoutLooping() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        mkdir(dir + "/b", 0o755)
        mkdir(dir + "/a-c", 0o755)
        for name in [
            "z.jpg", "A.JPEG", "c.png", ".hidden.jpg", "b/x.Jpg", "a-c/y.jpeg", "b/notes.txt", "d.HEIC", "e.hif",
            "f.avif", "g.heic.xmp", "noextension",
        ] {
            Fixtures.write([0xFF, 0xD8], to: dir + "/" + name)
        }
        symlink(dir, dir + "/b/loop")  // b/loop → the root: a cycle
        let paths = PhotoScan(root: dir).map { String(decoding: $0.path.bytes.dropFirst(dir.utf8.count + 1), as: UTF8.self) }
        #expect(paths == ["A.JPEG", "a-c/y.jpeg", "b/x.Jpg", "c.png", "d.HEIC", "e.hif", "f.avif", "z.jpg"])
        var failures = 0
        #expect(Array(PhotoScan(root: dir + "/missing") { _, _ in failures += 1 }).isEmpty)
        #expect(failures == 1)
    }
}

#if canImport(Glibc)
import Glibc
#endif
