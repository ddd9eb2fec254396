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

    /// The format of `bytes`, from their signature; `nil` when none matches.
    public init?(sniffing bytes: [UInt8]) {
        if bytes.count >= 3, bytes[0] == 0xFF, bytes[1] == 0xD8, bytes[2] == 0xFF {
            self = .jpeg
        } else {
            return nil
        }
    }

    /// This format's decoder.
    public var decoder: any PhotoDecoder {
        switch self {
        case .jpeg: JPEGDecoder()
        }
    }

    /// The decoder for `bytes`.
    ///
    /// - Throws: `PhotoLibraryError.empty` for zero bytes, `.notJPEG` when no format matches.
    public static func decoder(for bytes: [UInt8]) throws(PhotoLibraryError) -> any PhotoDecoder {
        guard !bytes.isEmpty else { throw PhotoLibraryError(.empty, "empty file") }
        guard let format = PhotoFormat(sniffing: bytes) else {
            throw PhotoLibraryError(.notJPEG, "no JPEG SOI marker")
        }
        return format.decoder
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
