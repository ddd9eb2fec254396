import Foundation
import Testing

@testable import PhotoLibrary

#if canImport(Glibc)
import Glibc
#endif

/// Real camera JPEGs from ../shared/photos (read in place, never copied). Expectations were written by hand from
/// `exiftool -n -Make -Model -Orientation -GPSLatitude -GPSLongitude -ImageWidth -ImageHeight -DateTimeOriginal`.
struct RealPhotoTests {
    /// `../shared/photos` beside this checkout (as laid out for developers and CI), else `/work/shared/photos`.
    static let folder: String = {
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { root.deleteLastPathComponent() }  // RealPhotoTests.swift, PhotoLibraryTests, Tests
        let beside = root.deletingLastPathComponent().appendingPathComponent("shared/photos").path
        return FileManager.default.fileExists(atPath: beside) ? beside : "/work/shared/photos"
    }()
    static let available = access(folder + "/SOURCES.md", R_OK) == 0

    struct Expected: Sendable, CustomTestStringConvertible {
        var file: String
        var make: String?
        var model: String?
        var orientation: Int?
        var width: Int
        var height: Int
        var takenAt: String?
        var gps: (Double, Double)?
        var place: String?
        var aspect: AspectClass
        var testDescription: String { file }
    }

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

    @Test(.enabled(if: available, "skipped: ../shared/photos is missing (real camera JPEGs, see issue 5)"),
          arguments: expectations)
    func matchesExiftool(_ e: Expected) throws {
        let inspection = try PhotoInspection(path: Self.folder + "/" + e.file)
        let m = inspection.metadata
        #expect(m.cameraMake == e.make)
        #expect(m.cameraModel == e.model)
        #expect(m.orientation == e.orientation)
        #expect(m.width == e.width && m.height == e.height)
        #expect(m.takenAt == e.takenAt)
        if let (lat, lon) = e.gps {
            let gps = try #require(m.gps)
            #expect(abs(gps.latitude - lat) < 1e-6 && abs(gps.longitude - lon) < 1e-6)
        } else {
            #expect(m.gps == nil)
        }
        let tags = AutoTags.tags(metadata: m, pixels: inspection.pixels, places: .bundled)
        #expect(tags.contains { $0.hasPrefix("place:") } == (e.place != nil))
        if let place = e.place { #expect(tags.contains("place:" + place)) }
        let pixels = try #require(inspection.pixels, "\(inspection.pixelError ?? "")")
        #expect(pixels.aspect == e.aspect)
        #expect(pixels.hashIsEvidence, "a real photo has detail enough for duplicates: \(pixels.hashDetail)")
    }

    @Test(.enabled(if: available, "skipped: ../shared/photos is missing"))
    func awkwardFilesFailCleanly() throws {
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

    @Test(.enabled(if: available, "skipped: ../shared/photos is missing"))
    func scanAndThroughput() throws {
        let files = Array(PhotoScan(root: Self.folder))
        #expect(files.count == 12)
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
