import CHeif
import Foundation
import Testing
import TestSupport

@testable import PhotoLibrary

/// Photos that are valid but unusual: the biggest phone photos (bounded by what is decoded, not refused for their
/// size), JPEGs coded in ways the decoder does not read (reported `unsupported_coding` with what is intact, never
/// `corrupt`), and capture times a camera's unset clock wrote (flagged, no date tags).
@Suite(.serialized)
struct UnusualPhotoTests {
    // MARK: the biggest phone photos

    @Test func a200MegapixelJPEGIsDecodedAtItsDCTScale() throws {
        let jpeg = LargeJPEG.flatGrey()
        let started = Date()
        let displayed = try JPEGDecoder().displayedImage(jpeg, metadata: try PhotoMetadata(jpeg: jpeg), limits: DecodeLimits())
        #expect(displayed.width == 16_384 && displayed.height == 12_288)
        #expect(max(displayed.image.width, displayed.image.height) == 256)
        #expect(Date().timeIntervalSince(started) < 20)
        // The bound is still real: it applies to the pixels decoded (2 048 × 1 536 at 1/8).
        var tight = DecodeLimits()
        tight.maxPixels = 3_000_000
        #expect {
            _ = try RGBImage.decodeJPEG(jpeg, limits: tight)
        } throws: { error in
            (error as? PhotoLibraryError)?.code == .tooLarge
                && (error as? PhotoLibraryError)?.message.contains("2048x1536 at 1/8 scale") == true
        }
    }

    /// A 200 MP phone HEIC: a thumbnail of 320 × 240 and a primary whose `ispe` says 16 384 × 12 288 (a real one is
    /// encoded from a small picture, then its primary's size property is set to a 200 MP phone's: encoding 200 MP
    /// with x265 takes minutes on the test machines). The thumbnail is what is decoded.
    @Test func a200MegapixelHEICIsDecodedThroughItsThumbnail() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        Fixtures.write(try Fixtures.scene(640, 480).jpegData(), to: dir + "/in.jpg")
        let encode = try Process.run(URL(fileURLWithPath: "/usr/bin/heif-enc"), arguments: ["-q", "50", "-t", "320", "-o", dir + "/big.heic", dir + "/in.jpg"])
        encode.waitUntilExit()
        #expect(encode.terminationStatus == 0)
        var heic = try PhotoFile.read(path: dir + "/big.heic").bytes
        let ispe640x480: [UInt8] = Array("ispe".utf8) + [0, 0, 0, 0, 0, 0, 0x02, 0x80, 0, 0, 0x01, 0xE0]
        let at = try #require(XMPKeywords.find(ispe640x480, in: heic, from: 0))
        heic.replaceSubrange(at + 8..<at + 16, with: [0, 0, 0x40, 0x00, 0, 0, 0x30, 0x00])
        let metadata = try HEIFDecoder().metadata(heic)
        #expect(metadata.width == 16_384 && metadata.height == 12_288)
        let displayed = try HEIFDecoder().displayedImage(heic, metadata: metadata, limits: DecodeLimits())
        #expect(displayed.width == 16_384 && displayed.height == 12_288)
        #expect(displayed.image.width == 256 && displayed.image.height == 192)
        // Decoded whole (no thumbnail used), the full size is what is bounded.
        #expect {
            _ = try HEIFDecoder(usesThumbnails: false).displayedImage(heic, metadata: metadata, limits: DecodeLimits())
        } throws: { error in
            (error as? PhotoLibraryError)?.code == .tooLarge
                && (error as? PhotoLibraryError)?.message.contains("decoded whole") == true
        }
    }

    // MARK: valid but unusual JPEGs

    /// `jpeg` with its SOF0 frame header turned into `marker` with sample precision `precision`.
    static func withFrame(_ jpeg: [UInt8], marker: UInt8, precision: UInt8) throws -> [UInt8] {
        var bytes = jpeg
        let sof = try #require((2..<bytes.count - 9).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC0 })
        bytes[sof + 1] = marker
        bytes[sof + 4] = precision
        return bytes
    }

    static func cameraJPEG() throws -> [UInt8] {
        var fields = Fixtures.EXIF()
        fields.make = "Canon"
        fields.model = "Canon EOS 5D"
        fields.dateTimeOriginal = "2019:06:01 10:11:12"
        return Fixtures.withEXIF(try Fixtures.scene(320, 200).jpegData(), fields)
    }

    @Test(arguments: [
        (UInt8(0xC1), UInt8(12), "12-bit samples"), (UInt8(0xC3), UInt8(8), "lossless coding"),
        (UInt8(0xC5), UInt8(8), "hierarchical"), (UInt8(0xCB), UInt8(16), "lossless coding"),
    ])
    func validJPEGsOfKindsTheDecoderDoesNotReadAreUnsupportedNotCorrupt(marker: UInt8, precision: UInt8, reason: String) throws {
        let jpeg = try Self.withFrame(try Self.cameraJPEG(), marker: marker, precision: precision)
        let metadata = try PhotoMetadata(jpeg: jpeg)
        #expect(metadata.width == 320 && metadata.height == 200)
        #expect(metadata.cameraMake == "Canon" && metadata.takenAt == "2019-06-01T10:11:12")
        #expect(metadata.warnings.contains { $0.contains("valid JPEG") && $0.contains(reason) }, "\(metadata.warnings)")
        #expect {
            _ = try JPEGDecoder().displayedImage(jpeg, metadata: metadata, limits: DecodeLimits())
        } throws: { error in
            (error as? PhotoLibraryError)?.code == .unsupportedCoding
                && (error as? PhotoLibraryError)?.message.contains(reason) == true
        }
        #expect(PhotoLibraryError.Code.unsupportedCoding.name == "unsupported_coding")
        let frame = try #require(JPEGFrame(jpeg: jpeg))
        #expect(frame.precision == Int(precision) && frame.width == 320 && frame.height == 200)
    }

    /// Arithmetic coding (SOF9) is valid and decoded (libjpeg-turbo reads it).
    @Test func arithmeticCodedJPEGDecodes() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        Fixtures.write(try Self.cameraJPEG(), to: dir + "/in.jpg")
        let convert = Process()
        convert.executableURL = URL(fileURLWithPath: "/bin/sh")
        convert.arguments = ["-c", "djpeg -ppm '\(dir)/in.jpg' | cjpeg -arithmetic > '\(dir)/arith.jpg'"]
        try convert.run()
        convert.waitUntilExit()
        let jpeg = try PhotoFile.read(path: dir + "/arith.jpg").bytes
        #expect(JPEGFrame(jpeg: jpeg)?.marker == 0xC9)
        let displayed = try JPEGDecoder().displayedImage(jpeg, metadata: try PhotoMetadata(jpeg: jpeg), limits: DecodeLimits())
        #expect(displayed.width == 320)
    }

    /// Damage is still `corrupt`: a frame of a kind the decoder reads, with broken data.
    @Test func damagedBaselineIsStillCorrupt() throws {
        var jpeg = try Self.cameraJPEG()
        let sos = try #require((2..<jpeg.count - 1).first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA })
        jpeg[sos + 5] = 0x07  // the scan names a Huffman table that does not exist
        #expect(throws: PhotoLibraryError.self) { try JPEGDecoder().displayedImage(jpeg, metadata: PhotoMetadata(), limits: DecodeLimits()) }
        do {
            _ = try RGBImage.decodeJPEG(jpeg)
        } catch {
            #expect(error.code == .corrupt, "\(error)")
        }
    }

    // MARK: dates a camera never set

    @Test(arguments: [
        ("1998:01:01 00:00:00", true), ("2000:01:01 00:00:00", true), ("2016:01:01 00:00:00", true),
        ("1970:01:01 00:03:12", true), ("1980:01:01 00:00:07", true), ("2000:01:01 10:15:00", false),
        ("2024:05:03 18:22:10", false), ("2023:12:31 23:59:59", false),
    ])
    func unsetCameraClocksAreFlaggedAndGiveNoDateTags(stamp: String, unset: Bool) throws {
        var fields = Fixtures.EXIF()
        fields.dateTimeOriginal = stamp
        let metadata = try PhotoMetadata(jpeg: Fixtures.withEXIF(try Fixtures.scene(64, 48).jpegData(), fields))
        let taken = try #require(metadata.takenAt)
        #expect(CameraClock.isFactoryDefault(taken) == unset)
        #expect(metadata.warnings.contains { $0.contains("factory default") } == unset, "\(metadata.warnings)")
        let tags = AutoTags.tags(metadata: metadata, pixels: nil, places: nil)
        #expect(tags.contains { $0.hasPrefix("year:") } == !unset, "\(tags)")
        #expect(tags.contains { $0.hasPrefix("month:") } == !unset, "\(tags)")
        let json = PhotoJSON(
            id: "x", localID: 1, path: "/p.jpg", bytes: 1, width: nil, height: nil, orientation: nil, takenAt: taken,
            camera: nil, gps: nil, tags: tags, warnings: metadata.warnings)
        #expect(try json.encodedLine().contains("\"clock_not_set\":\(unset)"))
    }
}
