import Foundation
import Testing

@testable import PhotoLibrary

#if canImport(Glibc)
import Glibc
#endif

/// Camera photos made at test time (`CameraFixtures`: libjpeg pixels, EXIF written by exiftool, a CMYK file, a
/// truncated progressive one), read back as the analysis reads them. These always run: nothing outside the
/// repository is needed.
struct CameraPhotoTests {
    /// Checks one inspection against what the photo should hold.
    static func check(_ inspection: PhotoInspection, _ e: CameraFixtures.Photo) throws {
        let m = inspection.metadata
        #expect(m.cameraMake == e.make, "\(e.file)")
        #expect(m.cameraModel == e.model, "\(e.file)")
        #expect(m.orientation == e.orientation, "\(e.file)")
        #expect(m.width == e.width && m.height == e.height, "\(e.file)")
        #expect(m.takenAt == e.takenAt, "\(e.file)")
        if let (lat, lon) = e.gps {
            let gps = try #require(m.gps, "\(e.file): \(m.warnings)")
            #expect(abs(gps.latitude - lat) < 1e-6 && abs(gps.longitude - lon) < 1e-6, "\(e.file)")
        } else {
            #expect(m.gps == nil, "\(e.file)")
        }
        let tags = AutoTags.tags(metadata: m, pixels: inspection.pixels, places: .bundled)
        #expect(tags.contains { $0.hasPrefix("place:") } == (e.place != nil), "\(e.file): \(tags)")
        if let place = e.place { #expect(tags.contains("place:" + place), "\(e.file): \(tags)") }
        let pixels = try #require(inspection.pixels, "\(e.file): \(inspection.pixelError ?? "")")
        #expect(pixels.aspect == e.aspect, "\(e.file)")
        #expect(pixels.hashIsEvidence, "\(e.file) has detail enough for duplicates: \(pixels.hashDetail)")
    }

    @Test func exiftoolWrittenCameraPhotosReadBack() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        try CameraFixtures.write(into: dir)
        for photo in CameraFixtures.photos {
            try Self.check(try PhotoInspection(path: dir + "/" + photo.file), photo)
        }
    }

    @Test func awkwardFilesDecodeOrFailCleanly() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        try CameraFixtures.write(into: dir)
        // CMYK with an Adobe marker: converted to RGB.
        let cmyk = try PhotoInspection(path: dir + "/" + CameraFixtures.cmykFile)
        let pixels = try #require(cmyk.pixels, "\(cmyk.pixelError ?? "")")
        #expect(pixels.aspect == .square && pixels.dominantColor == .red, "\(pixels)")
        // A progressive file cut in half: the EXIF and the size are read, the pixels are `truncated`.
        let truncated = try PhotoInspection(path: dir + "/" + CameraFixtures.truncatedFile)
        #expect(truncated.metadata.cameraMake == "Pentax")
        #expect(truncated.metadata.width == 200 && truncated.metadata.height == 150)
        #expect(truncated.pixels == nil)
        #expect(truncated.pixelErrorCode == "truncated")
        #expect(truncated.pixelError?.hasPrefix("truncated") == false, "the code is not repeated in the message")
        #expect(truncated.warnings.first?.hasPrefix("unreadable (truncated): ") == true, "\(truncated.warnings)")
        #expect(AutoTags.tags(metadata: truncated.metadata, pixels: nil, places: nil) == ["make:Pentax", "unreadable"])
    }
}

/// Real camera JPEGs, when a folder of them is named (`CameraFixtures.extraPhotos`: `$TRAILBOOK_EXTRA_PHOTOS`):
/// an addition to `CameraPhotoTests`, never needed. Expectations were
/// written by hand from `exiftool -n -Make -Model -Orientation -GPSLatitude -GPSLongitude -ImageWidth -ImageHeight
/// -DateTimeOriginal` on the files of the folder's SOURCES.md.
struct RealPhotoTests {
    static let folder = CameraFixtures.extraPhotos ?? ""
    static let available = CameraFixtures.extraPhotos != nil

    typealias Expected = CameraFixtures.Photo

    static let expectations: [Expected] = [
        .init(file: "es_Canon_40D.jpg", make: "Canon", model: "Canon EOS 40D", orientation: 1, width: 100, height: 68,
              takenAt: "2008-05-30T15:56:01", aspect: .landscape),
        .init(file: "es_Nikon_D70.jpg", make: "NIKON CORPORATION", model: "NIKON D70", orientation: 1, width: 100,
              height: 66, takenAt: "2008-03-15T09:52:01", aspect: .landscape),
        .init(file: "es_Pentax_K10D.jpg", make: "PENTAX Corporation", model: "PENTAX K10D", orientation: 1,
              width: 100, height: 72, takenAt: "2008-05-04T16:47:24", aspect: .landscape),
        .init(file: "es_Sony_HDR-HC3.jpg", make: "SONY", model: "HDR-HC3", orientation: 1, width: 100, height: 64,
              takenAt: "2007-06-15T04:42:32", aspect: .landscape),
        .init(file: "es_exiforg_nikon-e950.jpg", make: "NIKON", model: "E950", orientation: 1, width: 800, height: 600,
              takenAt: "2001-04-06T11:51:40", aspect: .landscape),
        .init(file: "es_gps_DSCN0010.jpg", make: "NIKON", model: "COOLPIX P6000", orientation: 1, width: 640,
              height: 480, takenAt: "2008-10-22T16:28:39", gps: (43.4674483, 11.8851267), place: "Arezzo",
              aspect: .landscape),
        .init(file: "es_hdr_iphone_hdr_YES.jpg", make: "Apple", model: "iPhone 6", orientation: 1, width: 3264,
              height: 2448, takenAt: "2015-04-10T20:12:23", gps: (40.4469722, -3.7247528), place: "Madrid",
              aspect: .landscape),
        // Stored 450 × 600, orientation 6 (rotate 90° clockwise): upright it is 600 × 450.
        .init(file: "es_orient_landscape_6.jpg", orientation: 6, width: 450, height: 600, aspect: .landscape),
        // Stored 600 × 450, orientation 5 (transpose): upright 450 × 600.
        .init(file: "es_orient_portrait_5.jpg", orientation: 5, width: 600, height: 450, aspect: .portrait),
        .init(file: "pil_pil_sample_cmyk.jpg", orientation: 1, width: 100, height: 100, aspect: .square),
    ]

    @Test(.enabled(if: available, "no extra real photos (optional: TRAILBOOK_EXTRA_PHOTOS)"), arguments: expectations)
    func matchesExiftool(_ e: Expected) throws {
        let path = Self.folder + "/" + e.file
        guard access(path, R_OK) == 0 else { return }  // an extra folder holds whichever photos it holds
        try CameraPhotoTests.check(try PhotoInspection(path: path), e)
    }

    @Test(.enabled(if: available, "no extra real photos (optional: TRAILBOOK_EXTRA_PHOTOS)"))
    func awkwardFilesFailCleanly() throws {
        guard access(Self.folder + "/pil_truncated_jpeg.jpg", R_OK) == 0,
            access(Self.folder + "/es_odd_corrupted.jpg", R_OK) == 0
        else { return }  // not in this extra folder
        let truncated = try PhotoInspection(path: Self.folder + "/pil_truncated_jpeg.jpg")
        #expect(truncated.pixels == nil)
        #expect(truncated.pixelErrorCode == "truncated")
        #expect(truncated.pixelError?.hasPrefix("truncated") == false, "the code is not repeated in the message")
        #expect(AutoTags.tags(metadata: truncated.metadata, pixels: nil, places: nil) == ["unreadable"])

        // Damaged EXIF: whatever libexif recovers, no crash; the pixels still decode or fail with a code.
        let odd = try PhotoInspection(path: Self.folder + "/es_odd_corrupted.jpg")
        #expect(odd.metadata.width == 3648 && odd.metadata.height == 2736)
        #expect((odd.pixels == nil) == (odd.pixelError != nil), "pixels, or a reason they are missing, not both")
    }

    @Test(.enabled(if: available, "no extra real photos (optional: TRAILBOOK_EXTRA_PHOTOS)"))
    func scanAndThroughput() throws {
        let files = Array(PhotoScan(root: Self.folder))
        #expect(!files.isEmpty)
        var clock = timespec()
        clock_gettime(CLOCK_MONOTONIC, &clock)
        let start = Double(clock.tv_sec) + Double(clock.tv_nsec) / 1e9
        let rounds = 3
        for _ in 0..<rounds {
            for file in files { _ = try PhotoInspection(path: file.path) }
        }
        clock_gettime(CLOCK_MONOTONIC, &clock)
        let seconds = Double(clock.tv_sec) + Double(clock.tv_nsec) / 1e9 - start
        print("PhotoInspection: \(rounds * files.count) inspections in \(seconds) s, \(Double(rounds * files.count) / seconds) per second")
    }
}
