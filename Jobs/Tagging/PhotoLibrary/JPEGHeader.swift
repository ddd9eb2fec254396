import CJPEGShim

/// What a JPEG's frame header (SOF) says, read with libjpeg's `jpeg_read_header` without decoding pixels.
public struct JPEGHeader: Hashable, Sendable, Codable {
    /// Stored width in pixels (before EXIF orientation).
    public var width: Int
    /// Stored height in pixels.
    public var height: Int
    /// Colour components: 1 grey, 3 YCbCr/RGB, 4 CMYK/YCCK.
    public var components: Int
    /// Whether the image is progressive (ITU T.81 Annex G).
    public var isProgressive: Bool

    /// Reads the header of `bytes`.
    ///
    /// - Throws: `PhotoLibraryError` with `.empty`, `.notJPEG`, `.truncated`, `.corrupt`, or `.unsupportedCoding`
    ///   for a valid frame libjpeg-turbo does not decode (`JPEGFrame.unsupportedReason`).
    public init(jpeg bytes: [UInt8]) throws(PhotoLibraryError) {
        var info = tb_jpeg_info()
        var message = [CChar](repeating: 0, count: 200)
        let status = bytes.withUnsafeBufferPointer { buffer in
            message.withUnsafeMutableBufferPointer {
                tb_jpeg_read_info(buffer.baseAddress, buffer.count, &info, $0.baseAddress, $0.count)
            }
        }
        if status != Int32(TB_JPEG_OK.rawValue) {
            throw JPEGHeader.classified(JPEGHeader.error(status, message), bytes)
        }
        width = Int(info.width)
        height = Int(info.height)
        components = Int(info.components)
        isProgressive = info.progressive != 0
    }

    /// `error` as `.unsupportedCoding` with what the frame header says, when the file's frame is a valid kind the
    /// decoder does not read (libjpeg reports some of them, a DNL height for one, as corrupt data); else `error`.
    static func classified(_ error: PhotoLibraryError, _ bytes: [UInt8]) -> PhotoLibraryError {
        guard error.code == .corrupt || error.code == .unsupportedCoding, let frame = JPEGFrame(jpeg: bytes),
            let reason = frame.unsupportedReason
        else { return error }
        return frame.unsupportedError(reason)
    }

    static func error(_ status: Int32, _ message: [CChar]) -> PhotoLibraryError {
        let text = message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        let code: PhotoLibraryError.Code
        switch UInt32(status) {
        case TB_JPEG_EMPTY.rawValue: code = .empty
        case TB_JPEG_NOT_JPEG.rawValue: code = .notJPEG
        case TB_JPEG_TRUNCATED.rawValue: code = .truncated
        case TB_JPEG_TOO_LARGE.rawValue: code = .tooLarge
        case TB_JPEG_NO_MEMORY.rawValue: code = .outOfMemory
        case TB_JPEG_UNSUPPORTED.rawValue: code = .unsupported
        case TB_JPEG_UNSUPPORTED_CODING.rawValue: code = .unsupportedCoding
        default: code = .corrupt
        }
        return PhotoLibraryError(code, text.isEmpty ? "libjpeg status \(status)" : text)
    }
}
