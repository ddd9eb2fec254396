import CExif
import CJPEGShim

/// What a JPEG says about itself: pixel size from its header, and EXIF fields read with libexif.
///
/// Every field is optional; a damaged EXIF block yields the fields that could be read plus `warnings`,
/// never a crash or an error. EXIF field meanings: CIPA DC-008-2023 (Exif 3.0) §4.6.
public struct PhotoMetadata: Hashable, Sendable, Codable {
    /// Stored pixel width, before orientation: from the JPEG SOF header, else EXIF PixelXDimension.
    public var width: Int?
    /// Stored pixel height, before orientation: from the JPEG SOF header, else EXIF PixelYDimension.
    public var height: Int?
    /// EXIF Orientation (tag 0x0112), 1…8; `nil` when absent or out of range.
    public var orientation: Int?
    /// Capture time, ISO 8601: `2024-05-03T18:22:10+01:00` from DateTimeOriginal (0x9003) and OffsetTimeOriginal
    /// (0x9011). Without an offset it is a local time with no zone designator (`2024-05-03T18:22:10`).
    /// Falls back to DateTimeDigitized (0x9004) with OffsetTimeDigitized (0x9012).
    public var takenAt: String?
    /// Make (0x010F), trimmed of spaces and NULs; `nil` when empty.
    public var cameraMake: String?
    /// Model (0x0110), trimmed; `nil` when empty.
    public var cameraModel: String?
    /// GPSLatitude/GPSLongitude (GPS IFD 0x0002/0x0004, degrees-minutes-seconds rationals) signed by their
    /// Ref tags (`N`/`S`, `E`/`W`). `nil` when a part or a Ref is missing, a denominator is zero, the value
    /// is out of range, or it is exactly 0°, 0° (the "no fix" placeholder many cameras write).
    public var gps: GPSCoordinate?
    /// Whether the file has an EXIF block libexif could parse at all.
    public var hasEXIF: Bool
    /// Problems met while reading (unreadable header, odd values); for the job's report.
    public var warnings: [String]

    public init(
        width: Int? = nil, height: Int? = nil, orientation: Int? = nil, takenAt: String? = nil,
        cameraMake: String? = nil, cameraModel: String? = nil, gps: GPSCoordinate? = nil, hasEXIF: Bool = false,
        warnings: [String] = []
    ) {
        self.width = width
        self.height = height
        self.orientation = orientation
        self.takenAt = takenAt
        self.cameraMake = cameraMake
        self.cameraModel = cameraModel
        self.gps = gps
        self.hasEXIF = hasEXIF
        self.warnings = warnings
    }

    /// Reads the metadata of a JPEG file held in memory.
    ///
    /// - Throws: `PhotoLibraryError.empty` for zero bytes, `.notJPEG` when there is no SOI marker. Anything
    ///   else (truncated header, damaged EXIF) becomes `nil` fields and `warnings`.
    public init(jpeg bytes: [UInt8]) throws(PhotoLibraryError) {
        self.init()
        let info = try JPEGHeader(jpeg: bytes, tolerateCorruptHeader: true)
        if let info {
            width = info.width
            height = info.height
        } else {
            warnings.append("JPEG header unreadable")
        }
        readEXIF(bytes)
        if width == nil || height == nil {
            width = nil
            height = nil
        }
    }

    /// Reads the metadata of the JPEG file at `path` (the whole file is read, up to `PhotoFile.defaultMaxBytes`).
    ///
    /// - Throws: as `init(jpeg:)`, plus `PhotoLibraryError.io` / `.tooLarge` from reading the file.
    public init(path: String) throws(PhotoLibraryError) {
        try self.init(jpeg: PhotoFile.read(path: path).bytes)
    }

    private mutating func readEXIF(_ bytes: [UInt8]) {
        guard let data = bytes.withUnsafeBufferPointer({ exif_data_new_from_data($0.baseAddress, UInt32($0.count)) })
        else {
            warnings.append("libexif out of memory")
            return
        }
        defer { exif_data_unref(data) }
        let reader = EXIFReader(data: data)
        hasEXIF = reader.isPresent
        guard hasEXIF else { return }

        if let value = reader.integer(EXIF_IFD_0, EXIF_TAG_ORIENTATION) {
            if (1...8).contains(value) { orientation = value } else { warnings.append("orientation \(value) out of range") }
        }
        cameraMake = reader.text(EXIF_IFD_0, EXIF_TAG_MAKE)
        cameraModel = reader.text(EXIF_IFD_0, EXIF_TAG_MODEL)

        if let stamp = reader.text(EXIF_IFD_EXIF, EXIF_TAG_DATE_TIME_ORIGINAL) {
            takenAt = PhotoMetadata.isoDate(stamp, offset: reader.text(EXIF_IFD_EXIF, EXIF_TAG_OFFSET_TIME_ORIGINAL))
            if takenAt == nil { warnings.append("DateTimeOriginal \"\(stamp)\" is not a date") }
        } else if let stamp = reader.text(EXIF_IFD_EXIF, EXIF_TAG_DATE_TIME_DIGITIZED) {
            takenAt = PhotoMetadata.isoDate(stamp, offset: reader.text(EXIF_IFD_EXIF, EXIF_TAG_OFFSET_TIME_DIGITIZED))
        }

        if width == nil || height == nil,
            let w = reader.integer(EXIF_IFD_EXIF, EXIF_TAG_PIXEL_X_DIMENSION),
            let h = reader.integer(EXIF_IFD_EXIF, EXIF_TAG_PIXEL_Y_DIMENSION), w > 0, h > 0
        {
            width = w
            height = h
        }
        readGPS(reader)
    }

    private mutating func readGPS(_ reader: EXIFReader) {
        let latValues = reader.rationals(EXIF_IFD_GPS, tb_exif_tag_gps_latitude())
        let lonValues = reader.rationals(EXIF_IFD_GPS, tb_exif_tag_gps_longitude())
        guard latValues != nil || lonValues != nil else { return }
        guard let latValues, let lonValues,
            let lat = PhotoMetadata.degrees(latValues), let lon = PhotoMetadata.degrees(lonValues)
        else {
            warnings.append("GPS position incomplete or has a zero denominator")
            return
        }
        let latRef = reader.text(EXIF_IFD_GPS, tb_exif_tag_gps_latitude_ref())?.uppercased()
        let lonRef = reader.text(EXIF_IFD_GPS, tb_exif_tag_gps_longitude_ref())?.uppercased()
        let latSign: Double? = latRef == "N" ? 1 : latRef == "S" ? -1 : nil
        let lonSign: Double? = lonRef == "E" ? 1 : lonRef == "W" ? -1 : nil
        guard let latSign, let lonSign else {
            warnings.append("GPS reference missing or not N/S/E/W")
            return
        }
        guard lat != 0 || lon != 0 else {
            warnings.append("GPS position 0°, 0° (no fix)")
            return
        }
        gps = GPSCoordinate(latitude: latSign * lat, longitude: lonSign * lon)
        if gps == nil { warnings.append("GPS position out of range") }
    }

    /// Degrees + minutes/60 + seconds/3600 from up to three rationals; `nil` on a zero denominator or NaN.
    static func degrees(_ parts: [(numerator: UInt32, denominator: UInt32)]) -> Double? {
        guard !parts.isEmpty else { return nil }
        var total = 0.0
        var scale = 1.0
        for part in parts.prefix(3) {
            guard part.denominator != 0 else { return nil }
            total += Double(part.numerator) / Double(part.denominator) / scale
            scale *= 60
        }
        return total.isFinite ? total : nil
    }

    /// `"YYYY:MM:DD HH:MM:SS"` (EXIF's form, §4.6.5) plus an optional `"+HH:MM"` offset → ISO 8601.
    static func isoDate(_ stamp: String, offset: String?) -> String? {
        let c = Array(stamp.utf8)
        guard c.count >= 19, c[4] == UInt8(ascii: ":"), c[7] == UInt8(ascii: ":"), c[13] == UInt8(ascii: ":"),
            c[16] == UInt8(ascii: ":"), c[10] == UInt8(ascii: " ") || c[10] == UInt8(ascii: "T")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for i in range {
                guard c[i] >= UInt8(ascii: "0"), c[i] <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(c[i] - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1800...9999).contains(year), (1...12).contains(month), (1...31).contains(day), (0...23).contains(hour),
            (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        var text = "\(year)-\(two(month))-\(two(day))T\(two(hour)):\(two(minute)):\(two(second))"
        if let offset, let zone = isoOffset(offset) { text += zone }
        return text
    }

    /// `"+01:00"`, `"-05:30"` → itself; `"Z"`-less blanks and malformed values → `nil`.
    static func isoOffset(_ offset: String) -> String? {
        let c = Array(offset.utf8)
        guard c.count == 6, c[0] == UInt8(ascii: "+") || c[0] == UInt8(ascii: "-"), c[3] == UInt8(ascii: ":")
        else { return nil }
        for i in [1, 2, 4, 5] where !(c[i] >= UInt8(ascii: "0") && c[i] <= UInt8(ascii: "9")) { return nil }
        let hours = Int(c[1] - 48) * 10 + Int(c[2] - 48)
        let minutes = Int(c[4] - 48) * 10 + Int(c[5] - 48)
        guard hours <= 14, minutes < 60 else { return nil }
        return offset
    }
}

/// Typed reads of libexif entries. `exif_data_get_entry` is a C macro, so entries are looked up per IFD
/// through the shim's `tb_exif_entry`.
struct EXIFReader {
    let data: UnsafeMutablePointer<ExifData>
    let order: ExifByteOrder

    init(data: UnsafeMutablePointer<ExifData>) {
        self.data = data
        order = exif_data_get_byte_order(data)
    }

    /// Whether any IFD holds an entry.
    var isPresent: Bool {
        let ifds = withUnsafeBytes(of: data.pointee.ifd) { Array($0.bindMemory(to: UnsafeMutablePointer<ExifContent>?.self)) }
        return ifds.contains { ($0?.pointee.count ?? 0) > 0 }
    }

    func entry(_ ifd: ExifIfd, _ tag: ExifTag) -> UnsafeMutablePointer<ExifEntry>? {
        guard let entry = tb_exif_entry(data, ifd, tag), entry.pointee.data != nil, entry.pointee.size > 0 else {
            return nil
        }
        return entry
    }

    /// An ASCII entry up to its first NUL, trimmed of spaces; `nil` when absent, not ASCII-format, or empty.
    func text(_ ifd: ExifIfd, _ tag: ExifTag) -> String? {
        guard let entry = entry(ifd, tag), entry.pointee.format == EXIF_FORMAT_ASCII
            || entry.pointee.format == EXIF_FORMAT_UNDEFINED
        else { return nil }
        let buffer = UnsafeBufferPointer(start: entry.pointee.data, count: Int(entry.pointee.size))
        let bytes = buffer.prefix { $0 != 0 }
        return trimmed(String(decoding: bytes, as: UTF8.self))
    }

    /// The first value of a SHORT or LONG entry.
    func integer(_ ifd: ExifIfd, _ tag: ExifTag) -> Int? {
        guard let entry = entry(ifd, tag), entry.pointee.components >= 1 else { return nil }
        let size = Int(entry.pointee.size)
        switch entry.pointee.format {
        case EXIF_FORMAT_SHORT where size >= 2: return Int(exif_get_short(entry.pointee.data, order))
        case EXIF_FORMAT_LONG where size >= 4: return Int(exif_get_long(entry.pointee.data, order))
        default: return nil
        }
    }

    /// All values of a RATIONAL entry (bounded by the entry's real size).
    func rationals(_ ifd: ExifIfd, _ tag: ExifTag) -> [(numerator: UInt32, denominator: UInt32)]? {
        guard let entry = entry(ifd, tag), entry.pointee.format == EXIF_FORMAT_RATIONAL else { return nil }
        let count = min(Int(entry.pointee.components), Int(entry.pointee.size) / 8)
        guard count > 0 else { return nil }
        return (0..<count).map { i in
            let r = exif_get_rational(entry.pointee.data + 8 * i, order)
            return (UInt32(r.numerator), UInt32(r.denominator))
        }
    }
}

/// `text` without leading or trailing spaces, tabs and NULs; `nil` when nothing is left.
func trimmed(_ text: String) -> String? {
    let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\0" || $0 == "\n" || $0 == "\r" }
    guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) })
    else { return nil }
    return String(text[first...last])
}
