import Foundation
import Testing

@testable import PhotoLibrary

/// HEIF files with more in them than one image: several images, several EXIF blocks, alpha, mirror transforms,
/// an appended video, data cut short. Each is made here with libheif's encoder (`HEIFWriter`); the photo must be
/// the primary image as displayed, with the primary image's EXIF.
@Suite(.serialized)
struct HEIFStructureTests {
    /// A picture that differs from each of its mirror images and rotations: blocks of different brightness in
    /// different corners, over a texture.
    static func picture(_ width: Int, _ height: Int, tint: (Double, Double, Double) = (1, 1, 1)) -> RGBImage {
        Fixtures.image(width, height) { x, y in
            var v = 120 + 70 * sin(Double(x) / 9) * cos(Double(y) / 11)
            if x < width / 3, y < height / 3 { v = 20 }  // dark, top left
            if x > width * 2 / 3, y > height / 2 { v = 240 }  // bright, bottom right
            func channel(_ t: Double) -> UInt8 { UInt8(max(0, min(255, v * t))) }
            return (channel(tint.0), channel(tint.1), channel(tint.2))
        }
    }

    /// Writes `bytes` into a fresh directory and inspects the file.
    func inspect(_ bytes: [UInt8], name: String = "photo.heic") throws -> PhotoInspection {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        Fixtures.write(bytes, to: dir + "/" + name)
        return try PhotoInspection(path: dir + "/" + name)
    }

    /// The stored pixels that orientation `o` turns into `displayed`.
    static func stored(_ displayed: RGBImage, for o: Int) -> RGBImage {
        displayed.oriented([1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 8, 7: 7, 8: 6][o]!)
    }

    /// Mirroring (`imir`, alone and after a rotation): the HEIC with the transform and the JPEG with the matching
    /// EXIF Orientation display the same picture, so both give the same orientation, size, aspect and hash, and
    /// the two are duplicates. The EXIF inside the HEIC says the same orientation and is not applied on top.
    @Test(arguments: [2, 4, 5, 7, 6, 3])
    func mirroredHEICDisplaysLikeItsJPEGTwin(_ orientation: Int) throws {
        let displayed = Self.picture(120, 80)
        let stored = Self.stored(displayed, for: orientation)
        #expect(stored.oriented(orientation) == displayed)
        let exif = Fixtures.EXIF(orientation: UInt16(orientation), make: "Apple", model: "iPhone 15")
        let jpeg = try inspect(Fixtures.withEXIF(try stored.jpegData(quality: 95), exif), name: "twin.jpg")
        let heic = try inspect(
            try HEIFWriter.heic([.init(pixels: stored, exif: [try HEIFWriter.exifBlock(exif)], orientation: orientation)]))

        let truth = PixelAnalysis(image: displayed)
        for (name, photo) in [("jpeg", jpeg), ("heic", heic)] {
            #expect(photo.metadata.orientation == orientation, "\(name)")
            #expect(photo.metadata.width == stored.width && photo.metadata.height == stored.height, "\(name)")
            #expect(photo.metadata.warnings == [], "\(name)")
            #expect(photo.metadata.cameraModel == "iPhone 15", "\(name)")
            let pixels = try #require(photo.pixels, "\(name): \(photo.pixelError ?? "")")
            #expect(pixels.width == 120 && pixels.height == 80 && pixels.aspect == .landscape, "\(name)")
            #expect(pixels.perceptualHash.distance(to: truth.perceptualHash) <= 2, "\(name) \(pixels.perceptualHash) \(truth.perceptualHash)")
            #expect(pixels.hashIsEvidence, "\(name)")
        }
        let a = try #require(jpeg.pixels), b = try #require(heic.pixels)
        #expect(a.perceptualHash.distance(to: b.perceptualHash) <= 2)
        // The same picture mirrored the other way (what the wrong reading of `imir`'s axis shows) is far off.
        let wrong = PixelAnalysis(image: displayed.oriented(2))
        #expect(b.perceptualHash.distance(to: wrong.perceptualHash) > PerceptualHash.nearDuplicateDistance)
        let flipped = PixelAnalysis(image: displayed.oriented(4))
        #expect(b.perceptualHash.distance(to: flipped.perceptualHash) > PerceptualHash.nearDuplicateDistance)
    }

    /// Several top-level images: the primary one (here the second) is the photo, with its own EXIF, size and
    /// pixels, whichever image comes first in the file.
    @Test func severalImagesGiveThePrimaryOne() throws {
        let other = HEIFWriter.Image(
            pixels: Self.picture(160, 96, tint: (1, 0.45, 0.4)),
            exif: [try HEIFWriter.exifBlock(.init(orientation: 1, make: "Other", model: "First Image"))])
        let primary = HEIFWriter.Image(
            pixels: Self.picture(64, 112, tint: (0.4, 0.55, 1)),
            exif: [try HEIFWriter.exifBlock(.init(orientation: 1, make: "Canon", model: "Primary",
                                                  dateTimeOriginal: "2021:04:05 06:07:08"))])
        let file = try HEIFWriter.heic([other, primary], primary: 1)
        let photo = try inspect(file)
        let m = photo.metadata
        #expect(m.cameraMake == "Canon" && m.cameraModel == "Primary" && m.takenAt == "2021-04-05T06:07:08")
        #expect(m.width == 64 && m.height == 112 && m.orientation == 1 && m.warnings == [])
        let pixels = try #require(photo.pixels, "\(photo.pixelError ?? "")")
        #expect(pixels.aspect == .portrait && pixels.dominantColor == .blue)
        #expect(pixels.perceptualHash.distance(to: PixelAnalysis(image: primary.pixels).perceptualHash) <= 2)

        // The same two images with the first as primary give the first.
        let first = try inspect(try HEIFWriter.heic([other, primary], primary: 0))
        #expect(first.metadata.cameraModel == "First Image" && first.metadata.width == 160)
        #expect(first.pixels?.dominantColor == .red)
    }

    /// Several EXIF blocks: only the primary image's count, and of its own blocks the first.
    @Test func severalEXIFBlocksGiveThePrimaryImagesFirst() throws {
        let decoy = try HEIFWriter.exifBlock(.init(orientation: 1, make: "Decoy", model: "Not This"))
        let own = try HEIFWriter.exifBlock(
            .init(orientation: 1, make: "Sony", model: "ILCE-7M4", dateTimeOriginal: "2023:08:09 10:11:12",
                  gps: (38.7223, "N", 9.1393, "W")))
        let second = try HEIFWriter.exifBlock(.init(orientation: 1, make: "Second", model: "Block"))
        // The decoy's image comes first in the file, so its EXIF item is the file's first EXIF item.
        let file = try HEIFWriter.heic(
            [.init(pixels: Self.picture(48, 48), exif: [decoy]), .init(pixels: Self.picture(96, 64), exif: [own, second])],
            primary: 1)
        let m = try inspect(file).metadata
        #expect(m.cameraMake == "Sony" && m.cameraModel == "ILCE-7M4" && m.takenAt == "2023-08-09T10:11:12")
        let gps = try #require(m.gps)
        #expect(abs(gps.latitude - 38.7223) < 1e-4 && abs(gps.longitude + 9.1393) < 1e-4)
        #expect(m.width == 96 && m.height == 64 && m.warnings == [])
    }

    /// An alpha plane (an auxiliary image of the primary): the photo is the colour image, with the same features
    /// as the same picture without alpha.
    @Test func alphaAuxiliaryImageIsNotThePhoto() throws {
        let picture = Self.picture(120, 80)
        let alpha = (0..<(120 * 80)).map { UInt8($0 % 120 < 60 ? 255 : 0) }
        let exif = try HEIFWriter.exifBlock(.init(orientation: 1, make: "Apple", model: "iPhone 15"))
        let withAlpha = try HEIFWriter.heic([.init(pixels: picture, alpha: alpha, exif: [exif])])
        let without = try HEIFWriter.heic([.init(pixels: picture, exif: [exif])])
        // The alpha really is in the file, as an auxiliary image.
        #expect(withAlpha.count > without.count)
        #expect(XMPKeywords.find(Array("urn:mpeg:hevc:2015:auxid:1".utf8), in: withAlpha, from: 0) != nil)

        let a = try inspect(withAlpha), b = try inspect(without)
        #expect(a.metadata == b.metadata)
        #expect(a.metadata.width == 120 && a.metadata.height == 80 && a.metadata.warnings == [])
        let pa = try #require(a.pixels, "\(a.pixelError ?? "")"), pb = try #require(b.pixels)
        #expect(pa.aspect == .landscape && pa.width == 120 && pa.height == 80)
        #expect(pa.perceptualHash == pb.perceptualHash && pa.dominantColor == pb.dominantColor)
        #expect(abs(pa.meanLuma - pb.meanLuma) < 0.5)
    }

    /// A motion photo made of a generated HEIC and a video (a whole MP4 appended, or inside an `mpvd` box) is its
    /// HEIC: same fields, same pixels.
    @Test func motionPhotoWithAppendedVideoIsItsStill() throws {
        let still = try HEIFWriter.heic([
            .init(pixels: Self.picture(96, 64), exif: [try HEIFWriter.exifBlock(.init(orientation: 1, make: "Google", model: "Pixel 8"))])
        ])
        func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
            let size = UInt32(8 + payload.count)
            return [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: size >> $0) } + Array(type.utf8) + payload
        }
        let mp4 = box("ftyp", Array("mp42\0\0\0\0mp42isom".utf8)) + box("moov", [UInt8](repeating: 1, count: 300))
            + box("mdat", [UInt8](repeating: 7, count: 50_000))
        let expected = try inspect(still)
        #expect(expected.metadata.cameraModel == "Pixel 8" && expected.pixels != nil)
        for (name, bytes) in [("appended", still + mp4), ("boxed", still + box("mpvd", mp4))] {
            let motion = try inspect(bytes)
            #expect(motion.metadata == expected.metadata, "\(name)")
            #expect(motion.pixels == expected.pixels, "\(name): \(motion.pixelError ?? "")")
        }
    }

    /// A file cut short anywhere in its image data is `corrupt`, keeps its size (and the EXIF it has), and never
    /// fails as a whole, however early the cut (a cut in the first quarter used to make libheif refuse the file).
    @Test func cutShortAnywhereIsCorruptAndKeepsWhatItHas() throws {
        let exif = try HEIFWriter.exifBlock(.init(orientation: 1, make: "Fujifilm", model: "X-T5", dateTimeOriginal: "2024:01:02 03:04:05"))
        let whole = try HEIFWriter.heic([.init(pixels: Self.picture(256, 192), exif: [exif])])
        let complete = try inspect(whole)
        #expect(complete.metadata.cameraModel == "X-T5" && complete.pixels != nil)
        // libheif writes `ftyp`, `meta`, then `mdat` holding the image data and after it the EXIF item.
        let mdat = try #require(XMPKeywords.find(Array("mdat".utf8), in: whole, from: 0)) + 4
        let exifAt = try #require(XMPKeywords.find(Array("Fujifilm".utf8), in: whole, from: mdat))
        #expect(exifAt > mdat + 1000)
        for cut in [1, 2, 4, 6, 8, 9].map({ mdat + (exifAt - 200 - mdat) * $0 / 10 }) {
            let photo = try inspect(Array(whole.prefix(cut)))
            let m = photo.metadata
            #expect(photo.pixels == nil, "cut at \(cut)")
            #expect(photo.pixelErrorCode == "corrupt", "cut at \(cut): \(photo.pixelError ?? "")")
            #expect(m.width == 256 && m.height == 192, "cut at \(cut)")
            let missing = whole.count - cut
            let cutShort = "the file is cut short: its image data ends after \(cut) bytes, \(missing) bytes before its last box does"
            #expect(m.warnings.first == cutShort, "cut at \(cut): \(m.warnings)")
            #expect(photo.pixelError == cutShort)
            // The EXIF item lies past the cut: none, and said so. (An iPhone HEIC keeps its EXIF before the image
            // data, so a cut there keeps it: `HEIFTests.cutShortHEICIsCorruptButKeepsItsEXIF`.)
            #expect(m.cameraModel == nil && m.hasEXIF == false, "cut at \(cut)")
            #expect(m.warnings == [cutShort, "EXIF block has no TIFF header"], "cut at \(cut)")
        }
    }
}
