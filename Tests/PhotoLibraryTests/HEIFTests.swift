import Foundation
import Testing

@testable import PhotoLibrary

/// HEIF photos through `HEIFDecoder`: the real files in `Tests/Fixtures/heif` (expected values read with
/// `exiftool -n` and `heif-info`) and files made here with `heif-enc` and exiftool.
@Suite(.serialized)
struct HEIFTests {
    static let fixtures: String = {
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<2 { root.deleteLastPathComponent() }  // HEIFTests.swift, PhotoLibraryTests
        return root.appendingPathComponent("Fixtures/heif").path
    }()

    struct Expected: Sendable, CustomTestStringConvertible {
        var file: String
        var width: Int
        var height: Int
        var orientation: Int
        var takenAt: String
        var make: String
        var model: String
        var gps: (Double, Double)?
        var aspect: AspectClass
        var testDescription: String { file }
    }

    static let expectations: [Expected] = [
        // iPhone 8 Plus: a 4032 × 3024 grid with `irot` 90° clockwise (exiftool: Rotation 270) and EXIF
        // Orientation 6 saying the same; displayed 3024 × 4032.
        .init(file: "ph_arrow.heic", width: 4032, height: 3024, orientation: 6, takenAt: "2018-07-31T14:52:07",
              make: "Apple", model: "iPhone 8 Plus", aspect: .portrait),
        .init(file: "ph_aux_YCbCr.heic", width: 4000, height: 1848, orientation: 1,
              takenAt: "2025-06-02T14:07:50+03:00", make: "samsung", model: "Galaxy S25 Ultra",
              gps: (59.5128174, 24.8343057997222), aspect: .panorama),
        .init(file: "ne_exif.avif", width: 192, height: 256, orientation: 1, takenAt: "2022-07-22T21:26:32+08:00",
              make: "Apple", model: "iPhone 12 Pro", gps: (43.2901277777778, 84.2271277777778), aspect: .portrait),
    ]

    @Test(arguments: expectations)
    func realFilesGiveTheFieldsExiftoolReads(_ e: Expected) throws {
        let path = Self.fixtures + "/" + e.file
        #expect(try PhotoFormat(sniffing: PhotoFile.read(path: path).bytes) == .heif)
        let inspection = try PhotoInspection(path: path)
        let m = inspection.metadata
        #expect(m.width == e.width && m.height == e.height, "\(m)")
        #expect(m.orientation == e.orientation)
        #expect(m.takenAt == e.takenAt)
        #expect(m.cameraMake == e.make && m.cameraModel == e.model)
        #expect(m.hasEXIF)
        #expect(m.warnings == [])
        if let (lat, lon) = e.gps {
            let gps = try #require(m.gps)
            #expect(abs(gps.latitude - lat) < 1e-7 && abs(gps.longitude - lon) < 1e-7, "\(gps)")
        } else {
            #expect(m.gps == nil)
        }
        let pixels = try #require(inspection.pixels, "\(inspection.pixelError ?? "")")
        #expect(pixels.aspect == e.aspect)
        let swaps = e.orientation >= 5
        #expect(pixels.width == (swaps ? e.height : e.width) && pixels.height == (swaps ? e.width : e.height))
    }

    /// The embedded thumbnail stands in for the full decode only where it gives the same tags.
    /// Measured: the hashes (thumbnail, full) and mean luma (tenths, thumbnail then full) of each file.
    @Test(arguments: [
        ("ph_arrow.heic", "ef973b55579bffff", "ef972b55579bffff", 1597, 1598),
        ("ph_aux_YCbCr.heic", "c84c4c2424246426", "c84c4c2424246426", 1300, 1299),
    ])
    func thumbnailGivesTheFeaturesOfTheFullImage(_ file: String, _ fastHash: String, _ fullHash: String, _ fastLuma: Int, _ fullLuma: Int) throws {
        let bytes = try PhotoFile.read(path: Self.fixtures + "/" + file).bytes
        let metadata = try HEIFDecoder().metadata(bytes)
        let fast = PixelAnalysis(
            displayed: try HEIFDecoder(usesThumbnails: true).displayedImage(bytes, metadata: metadata, limits: .init()))
        let full = PixelAnalysis(
            displayed: try HEIFDecoder(usesThumbnails: false).displayedImage(bytes, metadata: metadata, limits: .init()))
        #expect(fast.width == full.width && fast.height == full.height && fast.aspect == full.aspect)
        #expect(fast.dominantColor == full.dominantColor && fast.isNight == full.isNight)
        #expect(fast.dominantColor == .gray)
        #expect(Int((fast.meanLuma * 10).rounded()) == fastLuma && Int((full.meanLuma * 10).rounded()) == fullLuma)
        #expect(fast.perceptualHash.description == fastHash && full.perceptualHash.description == fullHash)
    }

    /// `heif-enc` keeps a JPEG's EXIF Orientation 6 but writes no `irot`: the pixels are shown as stored, and
    /// the EXIF value is reported, not applied.
    @Test func exifOrientationInsideAHEIFIsNotAppliedAgain() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        // Upright portrait pixels (64 × 96) whose EXIF claims they still need a 90° turn.
        let jpeg = Fixtures.withEXIF(try Fixtures.scene(64, 96).jpegData(), .init(orientation: 6, make: "Canon"))
        Fixtures.write(jpeg, to: dir + "/portrait.jpg")
        try run("heif-enc", ["-q", "90", dir + "/portrait.jpg", "-o", dir + "/portrait.heic"])
        #expect(try run("exiftool", ["-n", "-s3", "-Orientation", dir + "/portrait.heic"]) == "6\n")

        let inspection = try PhotoInspection(path: dir + "/portrait.heic")
        #expect(inspection.metadata.orientation == 1)
        #expect(inspection.metadata.width == 64 && inspection.metadata.height == 96)
        #expect(inspection.metadata.cameraMake == "Canon")
        #expect(inspection.metadata.warnings == ["EXIF Orientation 6 ignored: the HEIF transforms say 1"])
        let pixels = try #require(inspection.pixels)
        #expect(pixels.aspect == .portrait && pixels.width == 64 && pixels.height == 96)
    }

    /// 10-bit 4:2:2 (as cameras write) decodes to the same picture as 8-bit 4:2:0.
    @Test func tenBitFourTwoTwoHEICReadsLikeEightBit() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        // The same smooth picture as a 16-bit and an 8-bit PNG (heif-enc makes 10-bit HEIC from 16-bit PNG only).
        try run("python3", ["-c", Self.pngWriter, dir])
        try run("heif-enc", ["-b", "10", "-p", "chroma=422", "-t", "64", dir + "/p16.png", "-o", dir + "/ten.heic"])
        try run("heif-enc", [dir + "/p8.png", "-o", dir + "/eight.heic"])
        let info = try run("exiftool", ["-s3", "-BitDepthLuma", "-ChromaFormat", dir + "/ten.heic"])
        #expect(info == "10\n4:2:2 (2)\n" || info == "10\n4:2:2\n", "\(info)")

        let ten = try PhotoInspection(path: dir + "/ten.heic")
        let eight = try PhotoInspection(path: dir + "/eight.heic")
        #expect(ten.metadata.width == 320 && ten.metadata.height == 200 && ten.metadata.warnings == [])
        let a = try #require(ten.pixels, "\(ten.pixelError ?? "")")
        let b = try #require(eight.pixels)
        #expect(a.aspect == .landscape && a.dominantColor == .blue && b.dominantColor == .blue)
        #expect(Int((a.meanLuma * 10).rounded()) == 647 && Int((b.meanLuma * 10).rounded()) == 645)
        #expect(a.perceptualHash == b.perceptualHash)
    }

    /// A file whose image data is cut short still gives its EXIF, and its pixels are `corrupt`.
    @Test func cutShortHEICIsCorruptButKeepsItsEXIF() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let whole = try PhotoFile.read(path: Self.fixtures + "/ph_arrow.heic").bytes
        Fixtures.write(Array(whole.prefix(400_000)), to: dir + "/cut.heic")
        let inspection = try PhotoInspection(path: dir + "/cut.heic")
        let m = inspection.metadata
        #expect(m.cameraMake == "Apple" && m.cameraModel == "iPhone 8 Plus" && m.takenAt == "2018-07-31T14:52:07")
        #expect(m.orientation == 6 && m.width == 4032 && m.height == 3024)
        let cut = "the file is cut short: its image data ends after 400000 bytes, 392052 bytes before its last box does"
        #expect(m.warnings == [cut])
        #expect(inspection.pixels == nil)
        #expect(inspection.pixelErrorCode == "corrupt" && inspection.pixelError == cut)
    }

    /// A motion photo: the HEIF, then its video, either as a whole MP4 file appended or inside an `mpvd` box.
    @Test func motionPhotoIsItsPrimaryImage() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let still = try PhotoFile.read(path: Self.fixtures + "/ne_exif.avif").bytes
        func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
            let size = UInt32(8 + payload.count)
            return [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: size >> $0) } + Array(type.utf8) + payload
        }
        let mp4 = box("ftyp", Array("mp42\0\0\0\0mp42isom".utf8)) + box("mdat", [UInt8](repeating: 7, count: 4000))
        Fixtures.write(still, to: dir + "/still.avif")
        Fixtures.write(still + mp4, to: dir + "/appended.avif")
        Fixtures.write(still + box("mpvd", mp4), to: dir + "/boxed.avif")
        let expected = try PhotoInspection(path: dir + "/still.avif")
        #expect(expected.pixels != nil && expected.metadata.cameraModel == "iPhone 12 Pro")
        for name in ["appended.avif", "boxed.avif"] {
            let motion = try PhotoInspection(path: dir + "/" + name)
            #expect(motion.metadata == expected.metadata, "\(name)")
            #expect(motion.pixels == expected.pixels, "\(name): \(motion.pixelError ?? "")")
        }
    }

    @Test func formatIsDecidedByContent() throws {
        let jpeg = try Fixtures.scene(32, 24).jpegData()
        let heic = try PhotoFile.read(path: Self.fixtures + "/ph_arrow.heic").bytes
        #expect(try PhotoFormat(sniffing: jpeg) == .jpeg)
        #expect(try PhotoFormat(sniffing: heic) == .heif)
        func failure(_ bytes: [UInt8]) -> PhotoLibraryError? {
            do {
                _ = try PhotoFormat(sniffing: bytes)
                return nil
            } catch { return error }
        }
        #expect(failure([])?.code == .empty)
        let png = failure([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        #expect(png?.code == .unsupportedFormat)
        #expect(png?.message == "a PNG image; the library reads JPEG, HEIC/HEIF and AVIF")
        let text = failure(Array("hello, not a photo".utf8))
        #expect(text?.message == "not a known photo format (starts 68 65 6c 6c 6f 2c 20 6e); the library reads JPEG, HEIC/HEIF and AVIF")
        // An MP4 video: ISO media like HEIF, but with no image brand.
        let video = failure([0, 0, 0, 24] + Array("ftypisom\0\0\0\0isommp42".utf8))
        #expect(video?.code == .unsupportedFormat)
        #expect(video?.message == "an ISO media file (brand isom, a video?), not a photo format the library reads")
    }

    @Test func oversizedHEIFIsRefusedBeforeDecoding() throws {
        var limits = DecodeLimits()
        limits.maxPixels = 192 * 256 - 1
        let bytes = try PhotoFile.read(path: Self.fixtures + "/ne_exif.avif").bytes
        let decoder = HEIFDecoder()
        #expect(
            throws: PhotoLibraryError(
                .tooLarge,
                "192 × 256 pixels, decoded whole (no thumbnail of at least 256 pixels and the same shape to decode "
                    + "instead), is over the limit of 49151")
        ) {
            try decoder.displayedImage(bytes, metadata: decoder.metadata(bytes), limits: limits)
        }
    }

    @Test func transformsComposeInOrder() {
        #expect(HEIFTransforms.composed([]) == 1)
        #expect(HEIFTransforms.composed([6]) == 6)
        #expect(HEIFTransforms.composed([6, 6]) == 3)
        #expect(HEIFTransforms.composed([8, 2]) == 7)  // 90° anti-clockwise, then left–right: transverse
        #expect(HEIFTransforms.composed([6, 2]) == 5)  // 90° clockwise, then left–right: transpose
        #expect(HEIFTransforms.composed([2, 2]) == 1)
    }

    /// Writes `p16.png` (16 bits a channel) and `p8.png` (8 bits) of one 320 × 200 picture into `argv[1]`.
    static let pngWriter = """
        import math, struct, sys, zlib
        w, h = 320, 200
        def png(path, depth):
            raw = bytearray()
            for y in range(h):
                raw.append(0)
                for x in range(w):
                    v = 0.5 + 0.4 * math.sin(x / 23.0) * math.cos(y / 17.0)
                    for c in (0.25 * v, 0.45 * v, 0.55 + 0.4 * v):
                        raw += struct.pack('>H', int(c * 65535)) if depth == 16 else bytes([int(c * 255)])
            def chunk(t, d):
                return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
            with open(path, 'wb') as f:
                f.write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, depth, 2, 0, 0, 0))
                        + chunk(b'IDAT', zlib.compress(bytes(raw))) + chunk(b'IEND', b''))
        png(sys.argv[1] + '/p16.png', 16)
        png(sys.argv[1] + '/p8.png', 8)
        """

    /// Runs `tool` (found on `PATH`) and returns its standard output; throws when it exits non-zero.
    @discardableResult
    func run(_ tool: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw PhotoLibraryError(.io, "\(tool) \(arguments) exited \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
