import Foundation
import Testing

@testable import PhotoLibrary

struct StableIDTests {
    @Test func namespaceIsTheDocumentedDerivation() {
        // UUIDv5(NameSpace_URL, "https://trailbook.example/ns/photo-content-sha256"), RFC 9562 §5.5 / §6.6.
        let url: [UInt8] = [0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8]
        let digest = Digest.hash(.sha1, url + Array("https://trailbook.example/ns/photo-content-sha256".utf8))
        let namespace = StableID(uuidBytes: Array(digest.prefix(16)), version: 5)
        #expect(namespace.text == "c44417ba-eb9d-5583-993e-f5ac8ea0c0f4")
    }

    @Test func knownVector() {
        // Python: uuid.uuid5(uuid.UUID("c44417ba-…"), hashlib.sha256(b"hello").hexdigest())
        #expect(StableID(contentsOf: Array("hello".utf8)).text == "1962f5dd-5822-5fc1-883c-ef0d0e440e8c")
    }

    @Test func identicalBytesGiveIdenticalIDs() throws {
        let jpeg = try Fixtures.scene(64, 48).jpegData()
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        Fixtures.write(jpeg, to: dir + "/a.jpg")
        Fixtures.write(jpeg, to: dir + "/b.jpg")
        let a = try StableID(fileAt: dir + "/a.jpg"), b = try StableID(fileAt: dir + "/b.jpg")
        #expect(a == b)
        #expect(a == StableID(contentsOf: jpeg))
        var changed = jpeg
        changed[changed.count - 3] ^= 1
        #expect(StableID(contentsOf: changed) != a)
        #expect(StableID(a.text.uppercased()) == a)
        #expect(StableID("not-a-uuid") == nil)
    }
}

struct PhotoMetadataTests {
    @Test func readsEXIFWrittenByLibexif() throws {
        let jpeg = Fixtures.withEXIF(
            try Fixtures.scene(120, 80).jpegData(),
            .init(
                orientation: 6, make: "  Canon ", model: "Canon EOS 40D  ", dateTimeOriginal: "2024:05:03 18:22:10",
                offsetTimeOriginal: "+01:00", gps: (38.6916, "N", 9.2160, "W")))
        let m = try PhotoMetadata(jpeg: jpeg)
        #expect(m.hasEXIF)
        #expect(m.width == 120 && m.height == 80)
        #expect(m.orientation == 6)
        #expect(m.cameraMake == "Canon")
        #expect(m.cameraModel == "Canon EOS 40D")
        #expect(m.takenAt == "2024-05-03T18:22:10+01:00")
        let gps = try #require(m.gps)
        #expect(abs(gps.latitude - 38.6916) < 1e-4)
        #expect(abs(gps.longitude - -9.2160) < 1e-4)
        #expect(PlaceTable.bundled.nearest(to: gps)?.place.name == "Lisbon")
        #expect(AutoTags.tags(metadata: m, pixels: nil, places: .bundled).contains("place:Lisbon"))
    }

    @Test func dateWithoutOffsetIsLocalTime() throws {
        let jpeg = Fixtures.withEXIF(try Fixtures.scene(16, 16).jpegData(), .init(dateTimeOriginal: "2008:05:30 15:56:01"))
        #expect(try PhotoMetadata(jpeg: jpeg).takenAt == "2008-05-30T15:56:01")
        let blank = Fixtures.withEXIF(try Fixtures.scene(16, 16).jpegData(), .init(dateTimeOriginal: "    :  :     :  :  "))
        #expect(try PhotoMetadata(jpeg: blank).takenAt == nil)
    }

    @Test func southernAndEasternHemispheres() throws {
        let jpeg = Fixtures.withEXIF(try Fixtures.scene(16, 16).jpegData(), .init(gps: (33.8688, "S", 151.2093, "E")))
        let gps = try #require(try PhotoMetadata(jpeg: jpeg).gps)
        #expect(gps.latitude < -33.8 && gps.longitude > 151.2)
        #expect(PlaceTable.bundled.nearest(to: gps)?.place.name == "Sydney")
    }

    @Test func oddGPSValuesAreRejected() throws {
        let base = try Fixtures.scene(16, 16).jpegData()
        let zeroDenominator = Fixtures.withEXIF(
            base, .init(gps: (10, "N", 10, "E"), gpsLatitudeRationals: [(10, 0), (0, 1), (0, 1)]))
        #expect(try PhotoMetadata(jpeg: zeroDenominator).gps == nil)
        let outOfRange = Fixtures.withEXIF(base, .init(gps: (10, "N", 10, "E"), gpsLatitudeRationals: [(95, 1), (0, 1), (0, 1)]))
        #expect(try PhotoMetadata(jpeg: outOfRange).gps == nil)
        let badRef = Fixtures.withEXIF(base, .init(gps: (10, "Q", 10, "E")))
        #expect(try PhotoMetadata(jpeg: badRef).gps == nil)
        let nullIsland = Fixtures.withEXIF(base, .init(gps: (0, "N", 0, "E")))
        #expect(try PhotoMetadata(jpeg: nullIsland).gps == nil)
        #expect(GPSCoordinate(latitude: .nan, longitude: 0) == nil)
    }

    @Test func farFromEveryPlaceGivesNoPlace() throws {
        let midAtlantic = try #require(GPSCoordinate(latitude: 30, longitude: -40))
        #expect(PlaceTable.bundled.nearest(to: midAtlantic) == nil)
        // Haversine check: Lisbon → Madrid is about 503 km.
        let lisbon = GPSCoordinate(latitude: 38.7223, longitude: -9.1393)!, madrid = GPSCoordinate(latitude: 40.4168, longitude: -3.7038)!
        #expect(abs(lisbon.distance(to: madrid) - 503) < 5)
    }

    @Test func corruptEXIFDoesNotCrash() throws {
        var jpeg = Fixtures.withEXIF(
            try Fixtures.scene(40, 30).jpegData(),
            .init(orientation: 3, make: "Canon", model: "X", dateTimeOriginal: "2024:05:03 18:22:10", gps: (1, "N", 1, "E")))
        // Damage the TIFF structure inside APP1 (offsets and counts), not any one field.
        var state: UInt32 = 12345
        for i in 20..<min(120, jpeg.count) where i % 3 == 0 {
            state = state &* 1_103_515_245 &+ 12345
            jpeg[i] = UInt8(truncatingIfNeeded: state >> 16)
        }
        let m = try PhotoMetadata(jpeg: jpeg)
        #expect(m.width == 40)
        _ = try? PixelAnalysis(jpeg: jpeg, orientation: m.orientation ?? 1)
    }

    @Test func placesCSV() throws {
        let table = try PlaceTable.parseCSV(
            "name,lat,lon\n# comment\n\"Washington, D.C.\",38.9072,-77.0369\r\nHome,52.0,4.3\n\n")
        #expect(table.places.count == 2)
        #expect(table.nearest(to: GPSCoordinate(latitude: 38.9, longitude: -77.0)!)?.place.name == "Washington, D.C.")
        #expect(throws: PhotoLibraryError.self) { try PlaceTable.parseCSV("A,1,2\nB,95,0\n") }
        #expect(throws: PhotoLibraryError.self) { try PlaceTable.parseCSV("A,1\n") }
        // No places at all (empty, comments only, or a lone line taken as the header) is an error, not a table that
        // takes every place: tag away.
        #expect(try PlaceTable.parseCSV("# mine\nname,lat,lon\nHome,52.0,4.3\n").places.count == 1, "header after a comment")
        for text in ["", "# mine\n\n", "Home,abc,def\n", "name,lat,lon\n"] {
            #expect(throws: PhotoLibraryError.self, "\(text)") { try PlaceTable.parseCSV(text) }
        }
        #expect(PlaceTable.bundledPlaces.count >= 100)
    }

    /// What a spreadsheet or another editor saves: a byte order mark is not part of the first place's name (its
    /// tag used to be `place:\u{FEFF}Home`, which `--tag place:Home` never matched); a name that cannot be a tag
    /// (a control character) is refused naming its line, at submit, where the job used to fail on its first
    /// photo; a file that is not UTF-8 (Latin-1 `São Paulo`) is refused rather than read as `S\u{FFFD}o Paulo`.
    @Test func placesCSVAsEditorsSaveIt() throws {
        let table = try PlaceTable.parseCSV("\u{FEFF}Home,38.69,-9.21\n")
        #expect(table.places.map(\.name) == ["Home"])
        #expect(try PlaceTable.parseCSV("\u{FEFF}name,lat,lon\nHome,38.69,-9.21\n").places.map(\.name) == ["Home"])
        #expect {
            try PlaceTable.parseCSV("Home,1,2\nEsc\u{1B}[2J,38.69,-9.21\n")
        } throws: { error in
            let error = error as? PhotoLibraryError
            return error?.code == .badPlaceFile && error?.message.contains("line 2: the name cannot be a tag: tag holds control characters") == true
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("places-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let latin1 = directory.appendingPathComponent("latin1.csv").path
        try Data(Array("S".utf8) + [0xE3] + Array("o Paulo,-23.55,-46.63\n".utf8)).write(to: URL(fileURLWithPath: latin1))
        #expect {
            try PlaceTable.load(csvAt: BytePath(latin1))
        } throws: { error in
            let error = error as? PhotoLibraryError
            return error?.code == .badPlaceFile && error?.message.contains("is not UTF-8 text; save it as UTF-8") == true
        }
    }
}
