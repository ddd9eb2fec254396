import CHeif
import Foundation

@testable import PhotoLibrary

/// HEIC files made at test time with libheif's encoder (x265), for structures `heif-enc` cannot write: several
/// top-level images with a chosen primary, several EXIF blocks, an alpha plane (stored as an auxiliary image),
/// `irot`/`imir` transforms (libheif writes them from `heif_encoding_options.image_orientation`).
enum HEIFWriter {
    /// One top-level image of the file.
    struct Image {
        /// The stored pixels (before the transforms).
        var pixels: RGBImage
        /// An alpha value per pixel: the image gets an alpha plane, which libheif stores as an auxiliary image.
        var alpha: [UInt8]?
        /// EXIF blocks attached to the image, in order (each `Exif\0\0` + TIFF, as a JPEG's APP1 holds it).
        var exif: [[UInt8]] = []
        /// The EXIF orientation the transforms written for the image stand for (1: none).
        var orientation = 1
    }

    /// Encodes `images` into one HEIC file, in order; `primary` is the index of the primary image.
    static func heic(_ images: [Image], primary: Int = 0) throws -> [UInt8] {
        let context = heif_context_alloc()!
        defer { heif_context_free(context) }
        var encoder: OpaquePointer?
        try check(heif_context_get_encoder_for_format(context, heif_compression_HEVC, &encoder))
        defer { heif_encoder_release(encoder) }
        try check(heif_encoder_set_lossy_quality(encoder, 95))
        var handles: [OpaquePointer] = []
        defer { handles.forEach { heif_image_handle_release($0) } }
        for image in images {
            let w = Int32(image.pixels.width), h = Int32(image.pixels.height)
            var heifImage: OpaquePointer?
            let chroma = image.alpha == nil ? heif_chroma_interleaved_RGB : heif_chroma_interleaved_RGBA
            try check(heif_image_create(w, h, heif_colorspace_RGB, chroma, &heifImage))
            defer { heif_image_release(heifImage) }
            try check(heif_image_add_plane(heifImage, heif_channel_interleaved, w, h, 8))
            var stride: Int32 = 0
            let plane = heif_image_get_plane(heifImage, heif_channel_interleaved, &stride)!
            let channels = image.alpha == nil ? 3 : 4
            for y in 0..<Int(h) {
                for x in 0..<Int(w) {
                    let i = y * Int(w) + x
                    for c in 0..<3 { plane[y * Int(stride) + x * channels + c] = image.pixels.pixels[i * 3 + c] }
                    if let alpha = image.alpha { plane[y * Int(stride) + x * 4 + 3] = alpha[i] }
                }
            }
            let options = heif_encoding_options_alloc()!
            defer { heif_encoding_options_free(options) }
            options.pointee.image_orientation = heif_orientation(rawValue: UInt32(image.orientation))
            var handle: OpaquePointer?
            try check(heif_context_encode_image(context, heifImage, encoder, options, &handle))
            handles.append(handle!)
            for block in image.exif {
                try check(block.withUnsafeBytes { heif_context_add_exif_metadata(context, handle, $0.baseAddress, Int32($0.count)) })
            }
        }
        try check(heif_context_set_primary_image(context, handles[primary]))
        let path = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(path) }
        try check(heif_context_write_to_file(context, path + "/out.heic"))
        return try PhotoFile.read(path: path + "/out.heic").bytes
    }

    /// The `Exif\0\0` + TIFF block libexif writes for `fields` (the APP1 payload of `Fixtures.withEXIF`).
    static func exifBlock(_ fields: Fixtures.EXIF) throws -> [UInt8] {
        let jpeg = Fixtures.withEXIF(try Fixtures.scene(8, 8).jpegData(), fields)
        let length = Int(jpeg[4]) << 8 | Int(jpeg[5])
        return Array(jpeg[6..<(4 + length)])
    }

    static func check(_ error: heif_error) throws {
        guard error.code == heif_error_Ok else {
            throw PhotoLibraryError(.io, "libheif encoder: " + (error.message.map { String(cString: $0) } ?? "\(error.code)"))
        }
    }
}
