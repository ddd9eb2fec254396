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
    /// - Throws: `PhotoLibraryError` with `.empty`, `.notJPEG`, `.truncated` or `.corrupt`.
    public init(jpeg bytes: [UInt8]) throws(PhotoLibraryError) {
        var info = tb_jpeg_info()
        var message = [CChar](repeating: 0, count: 200)
        let status = bytes.withUnsafeBufferPointer { buffer in
            message.withUnsafeMutableBufferPointer {
                tb_jpeg_read_info(buffer.baseAddress, buffer.count, &info, $0.baseAddress, $0.count)
            }
        }
        if status != Int32(TB_JPEG_OK.rawValue) { throw JPEGHeader.error(status, message) }
        width = Int(info.width)
        height = Int(info.height)
        components = Int(info.components)
        isProgressive = info.progressive != 0
    }

    /// `nil` instead of throwing for a JPEG whose header is damaged; still throws for empty or non-JPEG input.
    init?(jpeg bytes: [UInt8], tolerateCorruptHeader: Bool) throws(PhotoLibraryError) {
        do {
            try self.init(jpeg: bytes)
        } catch where error.code == .empty || error.code == .notJPEG {
            throw error
        } catch {
            return nil
        }
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
        default: code = .corrupt
        }
        return PhotoLibraryError(code, text.isEmpty ? "libjpeg status \(status)" : text)
    }
}
