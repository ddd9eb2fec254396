import CHeif

/// What one photo file format gives the library, whatever its container and codec: the metadata (stored size,
/// orientation, the EXIF fields) and the picture as displayed, at reduced scale, with its orientation applied
/// exactly once. Each format the library reads is one conformance; `PhotoFormat.decoder(for:)` picks it by content.
///
/// Called only from worker processes (`PhotoInspection`): the bytes are untrusted.
public protocol PhotoDecoder: Sendable {
    /// Reads the metadata of `bytes`. A damaged EXIF block or header yields `nil` fields and `warnings`.
    ///
    /// - Throws: `PhotoLibraryError` only when the bytes are not this format at all.
    func metadata(_ bytes: [UInt8]) throws(PhotoLibraryError) -> PhotoMetadata

    /// Decodes `bytes` at reduced scale (long side at most `limits.targetLongSide`) into the picture as displayed.
    ///
    /// - Parameter metadata: what `metadata(_:)` returned for the same bytes.
    /// - Throws: `PhotoLibraryError` from decoding (`.truncated`, `.corrupt`, `.tooLarge`, `.outOfMemory`, …).
    func displayedImage(_ bytes: [UInt8], metadata: PhotoMetadata, limits: DecodeLimits) throws(PhotoLibraryError)
        -> DisplayedImage
}

/// A photo as displayed: upright, at reduced scale, plus its full upright size.
public struct DisplayedImage: Hashable, Sendable {
    /// The upright picture, long side at most `DecodeLimits.targetLongSide`.
    public var image: RGBImage
    /// Upright width of the full-size picture, in pixels.
    public var width: Int
    /// Upright height of the full-size picture, in pixels.
    public var height: Int
    /// Decoder warnings about damaged data that did not stop decoding.
    public var warnings: Int

    public init(image: RGBImage, width: Int, height: Int, warnings: Int) {
        self.image = image
        self.width = width
        self.height = height
        self.warnings = warnings
    }
}

/// The photo formats the library reads, told apart by their first bytes (never by the file name).
public enum PhotoFormat: String, Hashable, Sendable, Codable, CaseIterable {
    /// JPEG (ITU T.81): starts with the SOI marker `FF D8` and another marker's `FF`.
    case jpeg
    /// The HEIF family (ISO/IEC 23008-12): HEIC, HEIF, `.hif`, AVIF; an ISO-BMFF `ftyp` box whose brands libheif
    /// reads.
    case heif

    /// The format of `bytes`, from their signature.
    ///
    /// - Throws: `PhotoLibraryError.empty` for zero bytes, `.unsupportedFormat` for anything else, with what the
    ///   file looks like (PNG, TIFF or raw, video, a HEIF libheif cannot read, …).
    public init(sniffing bytes: [UInt8]) throws(PhotoLibraryError) {
        guard !bytes.isEmpty else { throw PhotoLibraryError(.empty, "empty file") }
        if bytes.count >= 3, bytes[0] == 0xFF, bytes[1] == 0xD8, bytes[2] == 0xFF {
            self = .jpeg
            return
        }
        if bytes.count >= 12, bytes[4..<8].elementsEqual("ftyp".utf8) {
            let brand = String(decoding: bytes[8..<12], as: UTF8.self)
            switch heif_check_filetype(bytes, Int32(clamping: bytes.count)) {
            case heif_filetype_yes_supported:
                self = .heif
                return
            case heif_filetype_yes_unsupported:
                throw PhotoLibraryError(.unsupportedFormat, "a HEIF file (brand \(brand)) of a kind libheif cannot read")
            default:
                throw PhotoLibraryError(
                    .unsupportedFormat, "an ISO media file (brand \(brand), a video?), not a photo format the library reads")
            }
        }
        throw PhotoLibraryError(.unsupportedFormat, "\(PhotoFormat.describe(bytes)); the library reads JPEG, HEIC/HEIF and AVIF")
    }

    /// What a file that is no readable photo looks like, for the failure message.
    static func describe(_ bytes: [UInt8]) -> String {
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            bytes.count >= offset + prefix.count && bytes[offset..<offset + prefix.count].elementsEqual(prefix)
        }
        if starts([0x89, 0x50, 0x4E, 0x47]) { return "a PNG image" }
        if starts(Array("GIF8".utf8)) { return "a GIF image" }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return "a TIFF or camera raw file" }
        if starts(Array("RIFF".utf8)), starts(Array("WEBP".utf8), at: 8) { return "a WebP image" }
        if starts([0xFF, 0x0A]) || starts([0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20]) { return "a JPEG XL image" }
        if starts(Array("BM".utf8)) { return "a BMP image" }
        if starts([0xFF, 0xD8]) { return "a JPEG with no marker after SOI" }
        let head = bytes.prefix(8).map { $0 < 16 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
        return "not a known photo format (starts \(head.joined(separator: " ")))"
    }

    /// This format's decoder.
    public var decoder: any PhotoDecoder {
        switch self {
        case .jpeg: JPEGDecoder()
        case .heif: HEIFDecoder()
        }
    }

    /// The decoder for `bytes`, by content.
    ///
    /// - Throws: as `init(sniffing:)`.
    public static func decoder(for bytes: [UInt8]) throws(PhotoLibraryError) -> any PhotoDecoder {
        try PhotoFormat(sniffing: bytes).decoder
    }
}

/// JPEG through libjpeg-turbo (pixels, scaled decode by 1/2, 1/4, 1/8) and libexif (the APP1 EXIF block).
/// The EXIF orientation is applied to the decoded pixels.
public struct JPEGDecoder: PhotoDecoder {
    public init() {}

    /// See `PhotoMetadata.init(jpeg:)`.
    public func metadata(_ bytes: [UInt8]) throws(PhotoLibraryError) -> PhotoMetadata {
        try PhotoMetadata(jpeg: bytes)
    }

    /// Decodes with `RGBImage.decodeJPEG` and turns the result upright by `metadata.orientation`.
    public func displayedImage(_ bytes: [UInt8], metadata: PhotoMetadata, limits: DecodeLimits)
        throws(PhotoLibraryError) -> DisplayedImage
    {
        let decoded = try RGBImage.decodeJPEG(bytes, limits: limits)
        let orientation = metadata.orientation ?? 1
        let swaps = (5...8).contains(orientation)
        return DisplayedImage(
            image: decoded.image.oriented(orientation),
            width: swaps ? decoded.sourceHeight : decoded.sourceWidth,
            height: swaps ? decoded.sourceWidth : decoded.sourceHeight, warnings: decoded.warnings)
    }
}
