import CHeif

/// HEIF photos (HEIC from phones, `.hif` from cameras, AVIF) through libheif (ISO/IEC 23008-12).
///
/// The photo is the file's primary image and the first EXIF block attached to it; thumbnails, auxiliary images
/// (depth, alpha, gain maps), other images and data after the boxes libheif reads (a motion photo's video) are
/// not the photo. Rotation and mirroring are the image's transformative properties (`irot`, `imir`), which libheif
/// applies when decoding; the EXIF Orientation inside a HEIF is informative only and is never applied again.
/// `PhotoMetadata.orientation` is those transforms written as the equivalent EXIF value, and `width`/`height`
/// the size before them, so a HEIC and its JPEG twin (stored sideways, Orientation 6) have the same fields.
public struct HEIFDecoder: PhotoDecoder {
    /// Decode the smallest embedded thumbnail instead of the full image when it is at least
    /// `DecodeLimits.targetLongSide` on its long side and has the primary image's shape (within 1 %): the analysis
    /// works at that size anyway, and a 12-megapixel HEVC grid costs about 50 times more to decode.
    public var usesThumbnails: Bool

    public init(usesThumbnails: Bool = true) {
        self.usesThumbnails = usesThumbnails
    }

    /// Size, orientation (from the transforms) and EXIF fields of the primary image.
    ///
    /// - Throws: `PhotoLibraryError.corrupt` when libheif cannot read the file's boxes, `.unsupportedFormat` for
    ///   a HEIF feature it does not support.
    public func metadata(_ bytes: [UInt8]) throws(PhotoLibraryError) -> PhotoMetadata {
        try HEIFDecoder.withPrimaryImage(bytes) { (handle, missing) throws(PhotoLibraryError) in
            var metadata = PhotoMetadata()
            if let missing { metadata.warnings.append(HEIFDecoder.cutShort(bytes.count, missing)) }
            let transforms = HEIFTransforms(bytes)
            if let problem = transforms.problem { metadata.warnings.append(problem) }
            let shown = (Int(heif_image_handle_get_width(handle)), Int(heif_image_handle_get_height(handle)))
            if let block = HEIFDecoder.exifBlock(handle, warnings: &metadata.warnings) {
                metadata.readEXIF(block)
            }
            if let exifOrientation = metadata.orientation, exifOrientation != transforms.orientation {
                metadata.warnings.append(
                    "EXIF Orientation \(exifOrientation) ignored: the HEIF transforms say \(transforms.orientation)")
            }
            metadata.orientation = transforms.orientation
            if shown.0 > 0, shown.1 > 0 {
                let swaps = (5...8).contains(transforms.orientation)
                (metadata.width, metadata.height) = swaps ? (shown.1, shown.0) : (shown.0, shown.1)
            } else {
                metadata.warnings.append("HEIF image has no size")
                (metadata.width, metadata.height) = (nil, nil)
            }
            return metadata
        }
    }

    /// The primary image as displayed (libheif applies crop, rotation and mirroring), 8-bit RGB (10- and 12-bit
    /// images are converted), at most `limits.targetLongSide` on its long side.
    ///
    /// - Throws: `PhotoLibraryError.tooLarge` when what would be decoded is over `limits.maxPixels`: the thumbnail
    ///   used instead of the full image is chosen within it (so a photo of any size with a thumbnail is decoded), and
    ///   without one the full image's stored size is checked before any decoding. `.corrupt` for damaged or
    ///   cut-short image data, `.unsupportedFormat` for a codec libheif lacks, `.outOfMemory`.
    public func displayedImage(_ bytes: [UInt8], metadata: PhotoMetadata, limits: DecodeLimits)
        throws(PhotoLibraryError) -> DisplayedImage
    {
        try HEIFDecoder.withPrimaryImage(bytes) { (handle, missing) throws(PhotoLibraryError) in
            if let missing { throw PhotoLibraryError(.corrupt, HEIFDecoder.cutShort(bytes.count, missing)) }
            let width = Int(heif_image_handle_get_width(handle)), height = Int(heif_image_handle_get_height(handle))
            let stored = UInt64(max(0, heif_image_handle_get_ispe_width(handle)))
                * UInt64(max(0, heif_image_handle_get_ispe_height(handle)))
            guard width > 0, height > 0 else { throw PhotoLibraryError(.corrupt, "HEIF image has no size") }
            // Memory is bounded by what is decoded: the thumbnail when one serves (a 200-megapixel phone photo's
            // is a few hundred pixels across), else the full image, whose stored size is then checked.
            var thumbnail: OpaquePointer?
            if usesThumbnails {
                thumbnail = HEIFDecoder.thumbnail(of: handle, width: width, height: height, limits: limits)
            }
            defer { if let thumbnail { heif_image_handle_release(thumbnail) } }
            guard thumbnail != nil || max(stored, UInt64(width) * UInt64(height)) <= limits.maxPixels else {
                throw PhotoLibraryError(
                    .tooLarge,
                    "\(width) × \(height) pixels, decoded whole (no thumbnail of at least \(limits.targetLongSide) "
                        + "pixels and the same shape to decode instead), is over the limit of \(limits.maxPixels)")
            }
            let source = thumbnail ?? handle
            let image = try HEIFDecoder.decodeRGB(source)
            return DisplayedImage(
                image: image.image.fitted(longSide: limits.targetLongSide), width: width, height: height,
                warnings: image.warnings)
        }
    }

    /// The length a cut-short file is padded up to whatever is left of it: more than any phone or camera HEIF,
    /// well within a worker's memory limit. (A 4-times cap alone refused a file cut in its first quarter whole:
    /// no size, no EXIF.)
    static let maxPadding = 64 << 20

    /// Runs `body` with the primary image's handle of the HEIF file in `bytes`, and how many bytes the file's
    /// last box says are missing when it is cut short (`nil` when whole).
    ///
    /// libheif reads only the HEIF boxes: the file ends at a second top-level `ftyp` (the video a motion photo
    /// appends is a whole MP4 file of its own). libheif refuses a file whose item extents point past its end, so a
    /// file cut short is padded with zeros up to the length its last box declares (up to `maxPadding`, or 4 times
    /// what is there when that is more, never past `PhotoFile.defaultMaxBytes`): the metadata that was there is still
    /// read, and the image is reported `corrupt` without being decoded.
    static func withPrimaryImage<T>(
        _ bytes: [UInt8], _ body: (OpaquePointer, _ missing: Int?) throws(PhotoLibraryError) -> T
    ) throws(PhotoLibraryError) -> T {
        let extent = HEIFTransforms.container(bytes)
        var buffer = Array(bytes[..<extent.end])
        var missing: Int?
        if let declared = extent.declaredEnd, declared <= max(4 * bytes.count, maxPadding),
            declared <= Int(PhotoFile.defaultMaxBytes)
        {
            missing = declared - bytes.count
            buffer += repeatElement(0, count: declared - bytes.count)
        } else if extent.declaredEnd != nil {
            missing = 0
        }
        guard let context = heif_context_alloc() else { throw PhotoLibraryError(.outOfMemory, "libheif context") }
        defer { heif_context_free(context) }
        // libheif reads the boxes from this buffer without copying it; it lives until the context is freed.
        let read = buffer.withUnsafeBytes {
            heif_context_read_from_memory_without_copy(context, $0.baseAddress, $0.count, nil)
        }
        try check(read, "cannot read the HEIF file")
        var handle: OpaquePointer?
        try check(heif_context_get_primary_image_handle(context, &handle), "no primary image")
        guard let handle else { throw PhotoLibraryError(.corrupt, "no primary image") }
        defer { heif_image_handle_release(handle) }
        return try body(handle, missing)
    }

    /// The EXIF block attached to the image as libexif takes it: `Exif\0\0` and the TIFF header onwards.
    ///
    /// libheif returns the item as stored: a 4-byte big-endian offset from the end of those 4 bytes to the TIFF
    /// header (ISO/IEC 23008-12 Annex A.2.1), then the data (often `Exif\0\0` before the header).
    static func exifBlock(_ handle: OpaquePointer, warnings: inout [String]) -> [UInt8]? {
        let count = heif_image_handle_get_number_of_metadata_blocks(handle, "Exif")
        guard count > 0 else { return nil }
        var ids = [heif_item_id](repeating: 0, count: Int(count))
        _ = heif_image_handle_get_list_of_metadata_block_IDs(handle, "Exif", &ids, count)
        let size = heif_image_handle_get_metadata_size(handle, ids[0])
        guard size >= 4, size <= 64 << 20 else {
            warnings.append("EXIF block of \(size) bytes ignored")
            return nil
        }
        var data = [UInt8](repeating: 0, count: size)
        let error = heif_image_handle_get_metadata(handle, ids[0], &data)
        guard error.code == heif_error_Ok else {
            warnings.append("EXIF block unreadable: \(message(error))")
            return nil
        }
        let offset = Int(data[0]) << 24 | Int(data[1]) << 16 | Int(data[2]) << 8 | Int(data[3])
        let isTIFF: (Int) -> Bool = { i in
            i + 4 <= data.count
                && (data[i..<i + 4].elementsEqual([0x49, 0x49, 0x2A, 0x00])
                    || data[i..<i + 4].elementsEqual([0x4D, 0x4D, 0x00, 0x2A]))
        }
        var start = 4 + offset
        if !isTIFF(start) {
            // A wrong offset (some writers count the `Exif\0\0` or not): look for the header near the start.
            guard let found = (4..<min(data.count, 64)).first(where: isTIFF) else {
                warnings.append("EXIF block has no TIFF header")
                return nil
            }
            start = found
        }
        return Array("Exif\0\0".utf8) + data[start...]
    }

    /// The smallest thumbnail of `handle` that is at least `limits.targetLongSide` on its long side, has the same
    /// shape as the `width × height` primary image (within 1 %) and fits `limits.maxPixels`; the caller releases it.
    static func thumbnail(of handle: OpaquePointer, width: Int, height: Int, limits: DecodeLimits) -> OpaquePointer? {
        let count = heif_image_handle_get_number_of_thumbnails(handle)
        guard count > 0 else { return nil }
        var ids = [heif_item_id](repeating: 0, count: Int(count))
        _ = heif_image_handle_get_list_of_thumbnail_IDs(handle, &ids, count)
        var best: (handle: OpaquePointer, pixels: Int)?
        for id in ids {
            var candidate: OpaquePointer?
            guard heif_image_handle_get_thumbnail(handle, id, &candidate).code == heif_error_Ok, let candidate else {
                continue
            }
            let w = Int(heif_image_handle_get_width(candidate)), h = Int(heif_image_handle_get_height(candidate))
            let sameShape = w > 0 && h > 0 && abs(w * height - h * width) * 100 <= width * h
            if sameShape, max(w, h) >= limits.targetLongSide, UInt64(w * h) <= limits.maxPixels,
                w * h < best?.pixels ?? Int.max
            {
                if let old = best?.handle { heif_image_handle_release(old) }
                best = (candidate, w * h)
            } else {
                heif_image_handle_release(candidate)
            }
        }
        return best?.handle
    }

    /// Decodes `handle` (transforms applied) to interleaved 8-bit RGB.
    static func decodeRGB(_ handle: OpaquePointer) throws(PhotoLibraryError) -> (image: RGBImage, warnings: Int) {
        guard let options = heif_decoding_options_alloc() else {
            throw PhotoLibraryError(.outOfMemory, "libheif decoding options")
        }
        defer { heif_decoding_options_free(options) }
        options.pointee.convert_hdr_to_8bit = 1
        var decoded: OpaquePointer?
        try check(
            heif_decode_image(handle, &decoded, heif_colorspace_RGB, heif_chroma_interleaved_RGB, options),
            "cannot decode the HEIF image")
        guard let decoded else { throw PhotoLibraryError(.corrupt, "libheif returned no image") }
        defer { heif_image_release(decoded) }
        let w = Int(heif_image_get_width(decoded, heif_channel_interleaved))
        let h = Int(heif_image_get_height(decoded, heif_channel_interleaved))
        var stride: Int32 = 0
        guard w > 0, h > 0, let plane = heif_image_get_plane_readonly(decoded, heif_channel_interleaved, &stride),
            Int(stride) >= w * 3
        else { throw PhotoLibraryError(.unsupported, "libheif gave no 8-bit RGB plane") }
        var pixels = [UInt8](repeating: 0, count: w * h * 3)
        pixels.withUnsafeMutableBufferPointer { out in
            for y in 0..<h {
                (out.baseAddress! + y * w * 3).update(from: plane + y * Int(stride), count: w * 3)
            }
        }
        var warning = heif_error()
        let warnings = heif_image_get_decoding_warnings(decoded, 0, &warning, 1)
        return (RGBImage(width: w, height: h, pixels: pixels), Int(warnings))
    }

    /// Throws the `PhotoLibraryError` for a libheif error.
    static func check(_ error: heif_error, _ what: String) throws(PhotoLibraryError) {
        let code: PhotoLibraryError.Code
        switch error.code {
        case heif_error_Ok: return
        case heif_error_Unsupported_filetype, heif_error_Unsupported_feature: code = .unsupportedFormat
        case heif_error_Memory_allocation_error: code = .outOfMemory
        default: code = .corrupt  // invalid input, data cut short, the codec refusing the bitstream
        }
        throw PhotoLibraryError(code, "\(what): \(message(error))")
    }

    static func cutShort(_ count: Int, _ missing: Int) -> String {
        missing > 0
            ? "the file is cut short: its image data ends after \(count) bytes, \(missing) bytes before its last box does"
            : "the file is cut short: its last box claims more than can be read from the \(count) bytes there are"
    }

    static func message(_ error: heif_error) -> String {
        error.message.map { String(cString: $0) } ?? "libheif error \(error.code.rawValue)"
    }
}

/// The rotation and mirroring of a HEIF file's primary item, read from its boxes (ISO/IEC 23008-12 §6.5.10
/// `irot`, §6.5.12 `imir`, in the order the item's `ipma` entry lists them), as the EXIF orientation 1…8 that
/// turns the stored image into the displayed one. libheif 1.15 applies these but has no call that reports them.
struct HEIFTransforms {
    /// The EXIF orientation equivalent to the transforms; 1 when there are none.
    var orientation = 1
    /// Why the boxes could not be read, when they could not (the orientation is then 1).
    var problem: String?

    init(_ bytes: [UInt8]) {
        guard let meta = Self.children(bytes, 0..<bytes.count).first(where: { $0.type == "meta" }),
            meta.payload.count >= 4
        else {
            problem = "HEIF file has no meta box"
            return
        }
        let metaBoxes = Self.children(bytes, meta.payload.lowerBound + 4..<meta.payload.upperBound)
        guard let pitm = metaBoxes.first(where: { $0.type == "pitm" }), let primary = Self.primaryItem(bytes, pitm.payload),
            let iprp = metaBoxes.first(where: { $0.type == "iprp" })
        else {
            problem = "HEIF file names no primary item"
            return
        }
        let iprpBoxes = Self.children(bytes, iprp.payload)
        guard let ipco = iprpBoxes.first(where: { $0.type == "ipco" }) else { return }
        let properties = Self.children(bytes, ipco.payload)
        var steps: [Int] = []  // EXIF orientations applied one after another
        for ipma in iprpBoxes where ipma.type == "ipma" {
            for index in Self.associations(bytes, ipma.payload, item: primary) where index >= 1 && index <= properties.count {
                let property = properties[index - 1]
                guard !property.payload.isEmpty else { continue }
                let value = bytes[property.payload.lowerBound]
                if property.type == "irot" {
                    // Angle in units of 90° anti-clockwise.
                    switch value & 3 {
                    case 1: steps.append(8)
                    case 2: steps.append(3)
                    case 3: steps.append(6)
                    default: break
                    }
                } else if property.type == "imir" {
                    // `mode` (ISO/IEC 23008-12:2017 Amd 2, which renamed the 2017 edition's ambiguous `axis`):
                    // 0 exchanges top and bottom, 1 left and right. Apple's HEICs and libheif, which applies the
                    // transform when decoding, read it so; the other reading would report the wrong orientation.
                    steps.append(value & 1 == 0 ? 4 : 2)
                }
            }
        }
        orientation = Self.composed(steps)
    }

    /// The single orientation equal to applying `steps` in order, found by applying both to a 3 × 2 image whose
    /// pixels all differ (the eight orientations move its corners to eight different places).
    static func composed(_ steps: [Int]) -> Int {
        guard steps.count > 1 else { return steps.first ?? 1 }
        let probe = RGBImage(width: 3, height: 2, pixels: (0..<18).map { UInt8($0) })
        let target = steps.reduce(probe) { $0.oriented($1) }
        return (1...8).first { probe.oriented($0) == target } ?? 1
    }

    /// Where the HEIF boxes of `bytes` end (before a second top-level `ftyp`, else at the end of the file) and,
    /// when the last box declares more bytes than there are, where it says it ends.
    static func container(_ bytes: [UInt8]) -> (end: Int, declaredEnd: Int?) {
        var at = 0
        var seenFileType = false
        while at + 8 <= bytes.count {
            var size = be(bytes, at, 4)
            if bytes[at + 4..<at + 8].elementsEqual("ftyp".utf8) {
                if seenFileType { return (at, nil) }
                seenFileType = true
            }
            if size == 1, at + 16 <= bytes.count { size = be(bytes, at + 8, 8) }
            if size == 0 { break }  // extends to the end of the file
            guard size >= 8 else { break }
            guard size <= UInt64(bytes.count - at) else {
                return (bytes.count, size <= UInt64(Int.max / 2) ? at + Int(size) : Int.max)
            }
            at += Int(size)
        }
        return (bytes.count, nil)
    }

    /// The boxes directly inside `range`: type and payload (after the size, type and any 64-bit size).
    static func children(_ bytes: [UInt8], _ range: Range<Int>) -> [(type: String, payload: Range<Int>)] {
        var boxes: [(type: String, payload: Range<Int>)] = []
        var at = range.lowerBound
        while at + 8 <= range.upperBound {
            var size = Int(be(bytes, at, 4))
            var header = 8
            if size == 1 {
                guard at + 16 <= range.upperBound else { break }
                let large = be(bytes, at + 8, 8)
                guard large <= UInt64(range.upperBound - at) else { break }
                size = Int(large)
                header = 16
            } else if size == 0 {
                size = range.upperBound - at
            }
            guard size >= header, at + size <= range.upperBound else { break }
            let type = String(decoding: bytes[at + 4..<at + 8], as: UTF8.self)
            boxes.append((type, at + header..<at + size))
            at += size
        }
        return boxes
    }

    /// The item ID in a `pitm` payload (full box: version 0 → 16 bits, else 32).
    static func primaryItem(_ bytes: [UInt8], _ payload: Range<Int>) -> UInt32? {
        guard payload.count >= 6 else { return nil }
        let version = bytes[payload.lowerBound]
        if version == 0 { return UInt32(be(bytes, payload.lowerBound + 4, 2)) }
        guard payload.count >= 8 else { return nil }
        return UInt32(be(bytes, payload.lowerBound + 4, 4))
    }

    /// The 1-based `ipco` indices associated with `item` in an `ipma` payload, in order.
    static func associations(_ bytes: [UInt8], _ payload: Range<Int>, item: UInt32) -> [Int] {
        guard payload.count >= 8 else { return [] }
        let version = bytes[payload.lowerBound]
        let wideIndex = bytes[payload.lowerBound + 3] & 1 == 1
        let entries = be(bytes, payload.lowerBound + 4, 4)
        var at = payload.lowerBound + 8
        var found: [Int] = []
        for _ in 0..<min(entries, UInt64(payload.count)) {
            let idSize = version < 1 ? 2 : 4
            guard at + idSize + 1 <= payload.upperBound else { break }
            let id = UInt32(be(bytes, at, idSize))
            let count = Int(bytes[at + idSize])
            at += idSize + 1
            let entrySize = wideIndex ? 2 : 1
            guard at + count * entrySize <= payload.upperBound else { break }
            if id == item {
                for i in 0..<count {
                    let raw = Int(be(bytes, at + i * entrySize, entrySize))
                    found.append(wideIndex ? raw & 0x7FFF : raw & 0x7F)
                }
            }
            at += count * entrySize
        }
        return found
    }

    /// The big-endian unsigned integer of `count` bytes at `at` (the caller checked the bounds).
    static func be(_ bytes: [UInt8], _ at: Int, _ count: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<count { value = value << 8 | UInt64(bytes[at + i]) }
        return value
    }
}
