import Testing
import TrailbookLoop
import TrailbookSQLite

@testable import PhotoLibrary

/// The photo store's side of uploads of library photos: photos selected by tags (every tag, from the bitmap
/// words), their files in selection order, and the memory of where each photo went (`photo_uploads`).
struct PhotoUploadStoreTests {
    /// A store with photos 1…n (local IDs 1…n, paths /photos/IMG_n.jpg).
    static func store(_ count: Int) throws -> PhotoStore {
        let store = try PhotoStore(path: ":memory:")
        for n in 1...count { try store.upsert(PhotoStoreTests.item(n)) }
        return store
    }

    @Test func photosWithEveryTagAcrossBitmapWords() throws {
        let store = try Self.store(200)
        // Local IDs spread over four 64-photo words; 63, 64 and 128 sit on word edges.
        let trip: [PhotoLocalID] = [1, 5, 63, 64, 65, 128, 150, 200]
        let pick: [PhotoLocalID] = [5, 64, 128, 129, 199, 200]
        try store.addTag("trip:Lisbon", to: trip)
        try store.addTag("pick", to: pick)
        #expect(try store.localIDs(withEveryTag: ["trip:Lisbon"]) == trip)
        #expect(try store.localIDs(withEveryTag: ["pick"]) == pick)
        #expect(try store.localIDs(withEveryTag: ["trip:Lisbon", "pick"]) == [5, 64, 128, 200])
        #expect(try store.localIDs(withEveryTag: ["pick", "trip:Lisbon"]) == [5, 64, 128, 200])
        // Spelled as typed: trimmed and NFC, like every tag.
        #expect(try store.localIDs(withEveryTag: ["  pick "]) == pick)
        #expect(try store.localIDs(withEveryTag: ["nobody-has-this"]).isEmpty)
        #expect(try store.localIDs(withEveryTag: ["pick", "nobody-has-this"]).isEmpty)
        #expect { try store.localIDs(withEveryTag: ["bad\u{1}tag"]) } throws: {
            ($0 as? PhotoLibraryError)?.code == .invalidTag
        }
    }

    @Test func uploadSourcesKeepTheGivenOrderAndLeaveOutMissingIDs() throws {
        let store = try Self.store(12)
        let sources = try store.uploadSources(of: [9, 2, 999, 4])
        #expect(sources.map(\.localID) == [9, 2, 4])
        #expect(sources.map(\.path) == ["/photos/IMG_9.jpg", "/photos/IMG_2.jpg", "/photos/IMG_4.jpg"])
        #expect(sources.map(\.stableID) == [9, 2, 4].map { PhotoStoreTests.item($0).stableID.text })
        // More than one lookup batch, in order.
        let many = try Self.store(1)
        for n in 2...(PhotoStore.uploadLookupBatch + 10) {
            try many.upsert(PhotoStoreTests.item(n))
        }
        let all = try many.uploadSources(of: Array((1...Int64(PhotoStore.uploadLookupBatch + 10)).reversed()))
        #expect(all.count == PhotoStore.uploadLookupBatch + 10)
        #expect(all.first?.localID == Int64(PhotoStore.uploadLookupBatch + 10) && all.last?.localID == 1)
    }

    @Test func remembersWherePhotosWentPerDestination() throws {
        let store = try Self.store(3)
        let one = PhotoStoreTests.item(1).stableID.text
        let two = PhotoStoreTests.item(2).stableID.text
        // A location that is not UTF-8 (a file name in Latin-1) is kept byte for byte.
        let latin1 = BytePath(bytes: Array("/srv/photos/caf".utf8) + [0xE9] + Array(".jpg".utf8))
        try store.remember([
            PhotoUpload(
                stableID: one, destination: "file:///srv/photos", job: "job-a", uploadedAtMilliseconds: 1_000,
                location: latin1, bytes: 10, sha256: String(repeating: "a", count: 64)),
            PhotoUpload(
                stableID: one, destination: "s3://photos/picks", job: "job-b", uploadedAtMilliseconds: 2_000,
                location: "s3://photos/picks/IMG_1.jpg", bytes: 10, sha256: String(repeating: "a", count: 64)),
        ])
        let atFile = try store.uploads(of: [one, two], to: "file:///srv/photos")
        #expect(Array(atFile.keys) == [one], "photo 2 was never uploaded")
        #expect(atFile[one]?.job == "job-a" && atFile[one]?.location == latin1 && atFile[one]?.uploadedAtMilliseconds == 1_000)
        #expect(try store.uploads(of: [one], to: "s3://photos/picks")[one]?.job == "job-b")
        #expect(try store.uploads(of: [one], to: "s3://photos/other").isEmpty, "another prefix is another place")
        #expect(try store.uploads(of: one).map(\.destination) == ["file:///srv/photos", "s3://photos/picks"])
        // The latest upload of a photo to a place replaces the earlier one: one row per photo and place.
        try store.remember([
            PhotoUpload(
                stableID: one, destination: "file:///srv/photos", job: "job-c", uploadedAtMilliseconds: 3_000,
                location: "/srv/photos/IMG_1.jpg", bytes: 10, sha256: String(repeating: "b", count: 64))
        ])
        #expect(try store.uploads(of: [one], to: "file:///srv/photos")[one]?.job == "job-c")
        #expect(try store.database.query("SELECT count(*) FROM photo_uploads").first?.int(0) == 2)
        // Nothing is written when the transaction fails half way (a trigger refuses the second row).
        try store.database.execute("CREATE TRIGGER refuse BEFORE INSERT ON photo_uploads WHEN new.job = 'bad' BEGIN SELECT RAISE(ABORT, 'refused'); END;")
        #expect(throws: PhotoLibraryError.self) {
            try store.remember([
                PhotoUpload(stableID: two, destination: "d", job: "good", uploadedAtMilliseconds: 1, location: "", bytes: 1, sha256: "x"),
                PhotoUpload(stableID: two, destination: "e", job: "bad", uploadedAtMilliseconds: 1, location: "", bytes: 1, sha256: "x"),
            ])
        }
        #expect(try store.uploads(of: [two], to: "d").isEmpty, "all or nothing")
    }

    @Test func aVersion7StoreGainsTheUploadsTableAndKeepsItsPhotos() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/photos.sqlite3"
        do {
            let old = try Database(path: path)
            _ = try old.migrate(Array(PhotoStore.migrations.prefix(7)))
            try old.query(
                "INSERT INTO photos (stable_id, path, bytes, mtime_ns, inode) VALUES ('0f6b2c1e-0000-5000-8000-000000000001', '/p/a.jpg', 1, 1, 1)")
        }
        let store = try PhotoStore(path: path)
        #expect(try store.count() == 1)
        #expect(try store.uploads(of: ["0f6b2c1e-0000-5000-8000-000000000001"], to: "file:///x").isEmpty)
        #expect(try store.database.query("PRAGMA user_version").first?.int(0) == Int64(PhotoStore.migrations.count))
    }
}
