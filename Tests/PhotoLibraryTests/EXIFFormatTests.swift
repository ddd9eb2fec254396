import CExif
import Foundation
import Testing

@testable import PhotoLibrary

/// Every EXIF field autotag uses, in every numeric or text type a writer may store it in, with more values than
/// needed too. Fixtures are built by libexif at test time (`Fixtures.Entry`); exiftool reads the odd ones back as
/// the reference.
struct EXIFFormatTests {
    typealias Entry = Fixtures.Entry

    static let integerFormats: [ExifFormat] = [
        EXIF_FORMAT_BYTE, EXIF_FORMAT_SBYTE, EXIF_FORMAT_SHORT, EXIF_FORMAT_SSHORT, EXIF_FORMAT_LONG, EXIF_FORMAT_SLONG,
    ]
    static let rationalFormats: [ExifFormat] = [EXIF_FORMAT_RATIONAL, EXIF_FORMAT_SRATIONAL]

    static func metadata(_ entries: [Entry], width: Int = 40, height: Int = 30) throws -> PhotoMetadata {
        try PhotoMetadata(jpeg: Fixtures.withEXIF(try Fixtures.scene(width, height).jpegData(), .init(entries: entries)))
    }

    /// A value in `format`: whole numbers as such, rationals as n/1.
    static func entry(_ ifd: ExifIfd, _ tag: ExifTag, _ format: ExifFormat, _ values: [Int64]) -> Entry {
        rationalFormats.contains(format)
            ? .ratios(ifd, tag, format, values.map { ($0, 1) }) : .numbers(ifd, tag, format, values)
    }

    @Test(arguments: integerFormats + rationalFormats, [1, 2])
    func orientationInEveryFormat(_ format: ExifFormat, count: Int) throws {
        let values = [Int64(6)] + Array(repeating: 1, count: count - 1)
        let m = try Self.metadata([Self.entry(EXIF_IFD_0, EXIF_TAG_ORIENTATION, format, values)])
        #expect(m.orientation == 6, "format \(format.rawValue) count \(count)")
        #expect(m.warnings.isEmpty, "\(m.warnings)")
    }

    @Test func orientationOutOfRangeIsAWarning() throws {
        let m = try Self.metadata([.numbers(EXIF_IFD_0, EXIF_TAG_ORIENTATION, EXIF_FORMAT_LONG, [70_000])])
        #expect(m.orientation == nil)
        #expect(m.warnings == ["orientation 70000 out of range"])
    }

    @Test(arguments: [EXIF_FORMAT_SHORT, EXIF_FORMAT_LONG, EXIF_FORMAT_SSHORT, EXIF_FORMAT_SLONG, EXIF_FORMAT_RATIONAL])
    func pixelDimensionsInEveryFormat(_ format: ExifFormat) throws {
        // Only the SOI and the EXIF segment: no frame header, so the size comes from PixelX/YDimension.
        let full = Fixtures.withEXIF(
            try Fixtures.scene(40, 30).jpegData(),
            .init(entries: [
                Self.entry(EXIF_IFD_EXIF, EXIF_TAG_PIXEL_X_DIMENSION, format, [4032]),
                Self.entry(EXIF_IFD_EXIF, EXIF_TAG_PIXEL_Y_DIMENSION, format, [3024]),
            ]))
        let app1Length = Int(full[4]) << 8 | Int(full[5])
        let m = try PhotoMetadata(jpeg: Array(full[..<(4 + app1Length)]))
        #expect(m.width == 4032 && m.height == 3024, "format \(format.rawValue)")
        #expect(m.warnings == ["JPEG header unreadable"])
    }

    @Test(arguments: [EXIF_FORMAT_ASCII, EXIF_FORMAT_UNDEFINED, EXIF_FORMAT_BYTE], [true, false])
    func makeAndModelAsTextOfAnyKind(_ format: ExifFormat, terminated: Bool) throws {
        let m = try Self.metadata([
            .text(EXIF_IFD_0, EXIF_TAG_MAKE, "Apple", format: format, terminated: terminated),
            .text(EXIF_IFD_0, EXIF_TAG_MODEL, "iPhone 12 mini", format: format, terminated: terminated),
        ])
        #expect(m.cameraMake == "Apple" && m.cameraModel == "iPhone 12 mini", "format \(format.rawValue)")
        let tags = AutoTags.tags(metadata: m, pixels: nil, places: nil)
        #expect(tags.contains("make:Apple") && tags.contains("camera:Apple iPhone 12 mini"))
    }

    @Test(arguments: [true, false])
    func dateWithOrWithoutTerminator(_ terminated: Bool) throws {
        let m = try Self.metadata([
            .text(EXIF_IFD_EXIF, EXIF_TAG_DATE_TIME_ORIGINAL, "2015:07:14 09:30:00", terminated: terminated),
            .text(EXIF_IFD_EXIF, EXIF_TAG_OFFSET_TIME_ORIGINAL, "-04:00", terminated: terminated),
        ])
        #expect(m.takenAt == "2015-07-14T09:30:00-04:00")
        #expect(AutoTags.tags(metadata: m, pixels: nil, places: nil).contains("month:2015-07"))
    }

    /// Lisbon, 38°41'29.76" N 9°12'57.6" W, as degrees/minutes/seconds in `format` (seconds × 100 for rationals).
    static func lisbon(_ format: ExifFormat, extra: Int = 0, latRef: String = "N", lonRef: String = "W") -> [Entry] {
        let latitude: [(Int64, Int64)] = [(38, 1), (41, 1), (2976, 100)] + Array(repeating: (0, 1), count: extra)
        let longitude: [(Int64, Int64)] = [(9, 1), (12, 1), (5760, 100)] + Array(repeating: (0, 1), count: extra)
        return [
            .text(EXIF_IFD_GPS, tb_exif_tag_gps_latitude_ref(), latRef),
            .ratios(EXIF_IFD_GPS, tb_exif_tag_gps_latitude(), format, latitude),
            .text(EXIF_IFD_GPS, tb_exif_tag_gps_longitude_ref(), lonRef),
            .ratios(EXIF_IFD_GPS, tb_exif_tag_gps_longitude(), format, longitude),
        ]
    }

    static let lisbonLatitude = 38 + 41.0 / 60 + 29.76 / 3600
    static let lisbonLongitude = -(9 + 12.0 / 60 + 57.6 / 3600)

    @Test(arguments: rationalFormats, [0, 1])
    func gpsAsRationalOrSignedRational(_ format: ExifFormat, extra: Int) throws {
        let m = try Self.metadata(Self.lisbon(format, extra: extra))
        let gps = try #require(m.gps, "format \(format.rawValue): \(m.warnings)")
        #expect(abs(gps.latitude - Self.lisbonLatitude) < 1e-9)
        #expect(abs(gps.longitude - Self.lisbonLongitude) < 1e-9)
        #expect(m.warnings.isEmpty)
        #expect(AutoTags.tags(metadata: m, pixels: nil, places: .bundled).contains("place:Lisbon"))
    }

    @Test(arguments: integerFormats)
    func gpsAsWholeNumbers(_ format: ExifFormat) throws {
        // Whole degrees, minutes, seconds (SBYTE holds at most 127: every value here fits).
        let m = try Self.metadata([
            .text(EXIF_IFD_GPS, tb_exif_tag_gps_latitude_ref(), "N"),
            .numbers(EXIF_IFD_GPS, tb_exif_tag_gps_latitude(), format, [38, 41, 30]),
            .text(EXIF_IFD_GPS, tb_exif_tag_gps_longitude_ref(), "W"),
            .numbers(EXIF_IFD_GPS, tb_exif_tag_gps_longitude(), format, [9, 12, 58]),
        ])
        let gps = try #require(m.gps, "format \(format.rawValue): \(m.warnings)")
        #expect(abs(gps.latitude - (38 + 41.0 / 60 + 30.0 / 3600)) < 1e-9)
        #expect(abs(gps.longitude - -(9 + 12.0 / 60 + 58.0 / 3600)) < 1e-9)
    }

    @Test func gpsAsOneDecimalDegreeValue() throws {
        let m = try Self.metadata([
            .text(EXIF_IFD_GPS, tb_exif_tag_gps_latitude_ref(), "S"),
            .ratios(EXIF_IFD_GPS, tb_exif_tag_gps_latitude(), EXIF_FORMAT_SRATIONAL, [(338688, 10_000)]),
            .text(EXIF_IFD_GPS, tb_exif_tag_gps_longitude_ref(), "E"),
            .ratios(EXIF_IFD_GPS, tb_exif_tag_gps_longitude(), EXIF_FORMAT_RATIONAL, [(1_512_093, 10_000)]),
        ])
        #expect(m.gps == GPSCoordinate(latitude: -33.8688, longitude: 151.2093))
    }

    @Test func gpsReferenceWithoutTerminatorOrAsBytes() throws {
        var entries = Self.lisbon(EXIF_FORMAT_SRATIONAL)
        entries[0] = .text(EXIF_IFD_GPS, tb_exif_tag_gps_latitude_ref(), "N", terminated: false)
        entries[2] = .text(EXIF_IFD_GPS, tb_exif_tag_gps_longitude_ref(), "W", format: EXIF_FORMAT_BYTE)
        let gps = try #require(try Self.metadata(entries).gps)
        #expect(abs(gps.longitude - Self.lisbonLongitude) < 1e-9)
    }

    @Test func missingReferenceIsAWarningNotAGuess() throws {
        let m = try Self.metadata(Array(Self.lisbon(EXIF_FORMAT_SRATIONAL).dropFirst()))
        #expect(m.gps == nil)
        #expect(m.warnings == ["GPSLatitudeRef missing; position not used"])
        let bad = try Self.metadata(Self.lisbon(EXIF_FORMAT_RATIONAL, lonRef: "X"))
        #expect(bad.warnings == ["GPSLongitudeRef \"X\" is not E or W; position not used"])
    }

    @Test func aPositionInATypeNoFieldAllowsIsAWarning() throws {
        var entries = Self.lisbon(EXIF_FORMAT_RATIONAL)
        entries[1] = .text(EXIF_IFD_GPS, tb_exif_tag_gps_latitude(), "38.69")
        let m = try Self.metadata(entries)
        #expect(m.gps == nil)
        #expect(m.warnings == ["GPSLatitude is stored as ASCII, not as numbers; position not used"])
    }

    @Test func zeroDenominatorIsAWarning() throws {
        var entries = Self.lisbon(EXIF_FORMAT_SRATIONAL)
        entries[1] = .ratios(EXIF_IFD_GPS, tb_exif_tag_gps_latitude(), EXIF_FORMAT_SRATIONAL, [(38, 0), (0, 1), (0, 1)])
        let m = try Self.metadata(entries)
        #expect(m.gps == nil)
        #expect(m.warnings == ["GPS position has a zero denominator; position not used"])
    }

    /// The reference: exiftool reads the SRATIONAL position of the file this library reads, to the same value.
    @Test func signedRationalGPSAgreesWithExiftool() throws {
        let jpeg = Fixtures.withEXIF(
            try Fixtures.scene(40, 30).jpegData(), .init(entries: Self.lisbon(EXIF_FORMAT_SRATIONAL)))
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        Fixtures.write(jpeg, to: dir + "/srational.jpg")
        let exiftool = Process()
        exiftool.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        exiftool.arguments = ["exiftool", "-n", "-s3", "-Composite:GPSLatitude", "-Composite:GPSLongitude", dir + "/srational.jpg"]
        let pipe = Pipe()
        exiftool.standardOutput = pipe
        try exiftool.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        exiftool.waitUntilExit()
        let values = output.split(separator: "\n").compactMap { Double($0) }
        try #require(values.count >= 2, "exiftool said: \(output)")
        let ours = try #require(try PhotoMetadata(jpeg: jpeg).gps)
        #expect(abs(ours.latitude - values[0]) < 1e-6 && abs(ours.longitude - values[1]) < 1e-6, "exiftool: \(values)")
    }
}
