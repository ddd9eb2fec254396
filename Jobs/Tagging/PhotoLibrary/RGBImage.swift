import CJPEGShim

/// Limits that keep decoding one untrusted JPEG bounded in memory and time.
public struct DecodeLimits: Hashable, Sendable, Codable {
    /// Refuse a decode that would produce more pixels than this, decided from the header before anything is
    /// allocated. It bounds what each decode path decodes, not the photo's size: a JPEG is decoded at the DCT
    /// scale that gets it near `targetLongSide` (a 200-megapixel photo decodes to 3 megapixels at 1/8; JPEG's
    /// largest frame, 65 535 × 65 535, to 67 megapixels), a HEIF's thumbnail when it has a fitting one; a HEIF
    /// without one is decoded whole, and its full size is what is checked. Default 100 000 000 (100 megapixels).
    /// A progressive JPEG keeps every coefficient of the full size: `maxMemoryBytes` bounds that.
    public var maxPixels: UInt64 = 100_000_000
    /// libjpeg's `max_memory_to_use` in bytes. Default 256 MiB. Baseline files need little at any size; a
    /// progressive file keeps every coefficient (about 2 bytes per pixel per full-resolution component), so
    /// progressive files over roughly 85 megapixels fail with `out_of_memory` instead of growing.
    public var maxMemoryBytes: UInt64 = 256 << 20
    /// Refuse progressive files with more scans than this (a CPU bomb of thousands of tiny scans). Default 1 000.
    public var maxScans: UInt32 = 1_000
    /// The long side, in pixels, the analysis works at. libjpeg scales by 1/1, 1/2, 1/4 or 1/8 while decoding
    /// (the smallest scale that reaches this, at most 1/8), then a box filter brings it down the rest of the
    /// way. Default 256.
    public var targetLongSide: Int = 256

    public init() {}
}

/// An 8-bit RGB image: 3 bytes per pixel, rows top to bottom, no padding.
public struct RGBImage: Hashable, Sendable {
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int
    /// `width * height * 3` bytes, R G B.
    public let pixels: [UInt8]

    /// An image of `width × height` from `pixels` (`width * height * 3` bytes).
    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(width > 0 && height > 0 && pixels.count == width * height * 3, "pixel buffer does not match size")
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// Decodes a JPEG at reduced scale with libjpeg-turbo, converting grey and CMYK/YCCK to RGB, and box-filters
    /// the result so its long side is at most `limits.targetLongSide`.
    ///
    /// - Returns: the image (stored orientation, not yet rotated), the header's full size, and how many libjpeg
    ///   warnings about corrupt data decoding survived.
    /// - Throws: `PhotoLibraryError` with `.empty`, `.notJPEG`, `.truncated`, `.corrupt`, `.tooLarge`
    ///   (the scaled decode over `maxPixels`, or over `maxScans`), `.outOfMemory` (over `maxMemoryBytes`),
    ///   `.unsupported`, or `.unsupportedCoding` for a valid JPEG coded in a way libjpeg-turbo does not decode
    ///   (`JPEGFrame` says which).
    public static func decodeJPEG(_ bytes: [UInt8], limits: DecodeLimits = DecodeLimits()) throws(PhotoLibraryError)
        -> (image: RGBImage, sourceWidth: Int, sourceHeight: Int, warnings: Int)
    {
        var c = tb_jpeg_limits(
            max_pixels: limits.maxPixels, max_memory: limits.maxMemoryBytes, max_scans: limits.maxScans,
            target_long_side: UInt32(clamping: limits.targetLongSide))
        var out = tb_jpeg_image()
        var message = [CChar](repeating: 0, count: 200)
        let status = bytes.withUnsafeBufferPointer { buffer in
            message.withUnsafeMutableBufferPointer {
                tb_jpeg_decode_rgb(buffer.baseAddress, buffer.count, &c, &out, $0.baseAddress, $0.count)
            }
        }
        guard status == Int32(TB_JPEG_OK.rawValue), let raw = out.pixels else {
            throw JPEGHeader.classified(
                JPEGHeader.error(status == 0 ? Int32(TB_JPEG_CORRUPT.rawValue) : status, message), bytes)
        }
        defer { tb_jpeg_free(raw) }
        let w = Int(out.width), h = Int(out.height)
        let image = RGBImage(width: w, height: h, pixels: Array(UnsafeBufferPointer(start: raw, count: w * h * 3)))
        return (
            image.fitted(longSide: limits.targetLongSide), Int(out.source_width), Int(out.source_height),
            Int(out.warnings)
        )
    }

    /// This image box-filtered (area average) down so its long side is at most `longSide`; unchanged if it fits.
    public func fitted(longSide: Int) -> RGBImage {
        let long = max(width, height)
        guard long > longSide, longSide > 0 else { return self }
        let w = max(1, width * longSide / long), h = max(1, height * longSide / long)
        return resized(width: w, height: h)
    }

    /// This image resampled to `width × height` by area averaging (each output pixel is the mean of the input
    /// pixels whose centres fall in its box). Meant for shrinking.
    public func resized(width newWidth: Int, height newHeight: Int) -> RGBImage {
        var out = [UInt8](repeating: 0, count: newWidth * newHeight * 3)
        for y in 0..<newHeight {
            let y0 = y * height / newHeight
            let y1 = max(y0 + 1, (y + 1) * height / newHeight)
            for x in 0..<newWidth {
                let x0 = x * width / newWidth
                let x1 = max(x0 + 1, (x + 1) * width / newWidth)
                var r = 0, g = 0, b = 0
                for sy in y0..<y1 {
                    var i = (sy * width + x0) * 3
                    for _ in x0..<x1 {
                        r += Int(pixels[i]); g += Int(pixels[i + 1]); b += Int(pixels[i + 2])
                        i += 3
                    }
                }
                let n = (y1 - y0) * (x1 - x0)
                let o = (y * newWidth + x) * 3
                out[o] = UInt8((r + n / 2) / n)
                out[o + 1] = UInt8((g + n / 2) / n)
                out[o + 2] = UInt8((b + n / 2) / n)
            }
        }
        return RGBImage(width: newWidth, height: newHeight, pixels: out)
    }

    /// This image turned upright for EXIF orientation `orientation` (CIPA DC-008 §4.6.4 A, tag 0x0112):
    /// 1 as is, 2 mirror left–right, 3 rotate 180°, 4 mirror top–bottom, 5 transpose, 6 rotate 90° clockwise,
    /// 7 transverse, 8 rotate 90° counter-clockwise. Values outside 1…8 are treated as 1.
    public func oriented(_ orientation: Int) -> RGBImage {
        guard (2...8).contains(orientation) else { return self }
        let swaps = orientation >= 5
        let ow = swaps ? height : width, oh = swaps ? width : height
        var out = [UInt8](repeating: 0, count: pixels.count)
        for dy in 0..<oh {
            for dx in 0..<ow {
                let sx: Int, sy: Int
                switch orientation {
                case 2: (sx, sy) = (width - 1 - dx, dy)
                case 3: (sx, sy) = (width - 1 - dx, height - 1 - dy)
                case 4: (sx, sy) = (dx, height - 1 - dy)
                case 5: (sx, sy) = (dy, dx)
                case 6: (sx, sy) = (dy, height - 1 - dx)
                case 7: (sx, sy) = (width - 1 - dy, height - 1 - dx)
                default: (sx, sy) = (width - 1 - dy, dx)  // 8
                }
                let s = (sy * width + sx) * 3, d = (dy * ow + dx) * 3
                out[d] = pixels[s]; out[d + 1] = pixels[s + 1]; out[d + 2] = pixels[s + 2]
            }
        }
        return RGBImage(width: ow, height: oh, pixels: out)
    }

    /// Encodes this image as a JPEG with libjpeg-turbo (for thumbnails and test fixtures).
    ///
    /// - Parameters:
    ///   - quality: libjpeg quality, 1…100.
    ///   - progressive: progressive (libjpeg's default scans) instead of baseline.
    ///   - cmyk: store as CMYK with an Adobe marker, inverted as Photoshop writes it (C = R, M = G, Y = B,
    ///     K = 255 in the file), as print workflows deliver photos.
    /// - Throws: `PhotoLibraryError` if libjpeg fails.
    public func jpegData(quality: Int = 90, progressive: Bool = false, cmyk: Bool = false) throws(PhotoLibraryError)
        -> [UInt8]
    {
        var out: UnsafeMutablePointer<UInt8>?
        var size = 0
        var message = [CChar](repeating: 0, count: 200)
        var samples = pixels
        if cmyk {
            samples = []
            samples.reserveCapacity(width * height * 4)
            for i in stride(from: 0, to: pixels.count, by: 3) {
                samples += [pixels[i], pixels[i + 1], pixels[i + 2], 255]
            }
        }
        let status = samples.withUnsafeBufferPointer { buffer in
            message.withUnsafeMutableBufferPointer {
                tb_jpeg_encode(
                    buffer.baseAddress, UInt32(width), UInt32(height), cmyk ? 4 : 3, Int32(quality),
                    progressive ? 1 : 0, &out, &size, $0.baseAddress, $0.count)
            }
        }
        guard status == Int32(TB_JPEG_OK.rawValue), let out else { throw JPEGHeader.error(status, message) }
        defer { tb_jpeg_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: size))
    }
}
