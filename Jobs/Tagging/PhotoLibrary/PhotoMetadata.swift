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
    /// Falls back to DateTimeDigitized (0x9004) with OffsetTimeDigitized (0x9012). A camera clock's factory default
    /// (`CameraClock`) is kept as the file has it, with a warning.
    public var takenAt: String?
    /// Make (0x010F), trimmed of spaces and NULs; `nil` when empty.
    public var cameraMake: String?
    /// Model (0x0110), trimmed; `nil` when empty.
    public var cameraModel: String?
    /// GPSLatitude/GPSLongitude (GPS IFD 0x0002/0x0004: degrees, minutes, seconds in any numeric type, RATIONAL
    /// by the specification, SRATIONAL from some phones) with their own sign, negated by a Ref of `S` or `W` (as
    /// exiftool does). `nil`, with a warning, when a part or a Ref is missing, a denominator is zero, the value
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
    ///   else (truncated header, damaged EXIF) becomes `nil` fields and `warnings`; a valid JPEG the decoder does
    ///   not read (12-bit, lossless: `JPEGFrame`) keeps the frame header's size, with a warning saying so.
    public init(jpeg bytes: [UInt8]) throws(PhotoLibraryError) {
        self.init()
        do {
            let info = try JPEGHeader(jpeg: bytes)
            width = info.width
            height = info.height
        } catch where error.code == .empty || error.code == .notJPEG {
            throw error
        } catch where error.code == .unsupportedCoding {
            // Valid, of a kind the decoder does not read: the frame header still gives the size.
            if let frame = JPEGFrame(jpeg: bytes), frame.width > 0, frame.height > 0 {
                width = frame.width
                height = frame.height
            }
            warnings.append(error.message)
        } catch {
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

    /// Reads the EXIF fields with libexif from `bytes`: a whole JPEG file (libexif finds its APP1 segment) or an
    /// EXIF block that starts with `Exif\0\0` and the TIFF header (what `HEIFDecoder` hands over).
    mutating func readEXIF(_ bytes: [UInt8]) {
        guard let data = exif_data_new() else {
            warnings.append("libexif out of memory")
            return
        }
        defer { exif_data_unref(data) }
        // Without FOLLOW_SPECIFICATION libexif keeps each entry as the file has it: its "fix" pass would add
        // placeholder entries for missing mandatory tags (a PixelXDimension of 0) and rewrite some formats.
        exif_data_unset_option(data, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION)
        bytes.withUnsafeBufferPointer { exif_data_load_data(data, $0.baseAddress, UInt32(clamping: $0.count)) }
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
        if let takenAt, CameraClock.isFactoryDefault(takenAt) { warnings.append(CameraClock.warning(takenAt)) }

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
        let latValues = reader.numbers(EXIF_IFD_GPS, tb_exif_tag_gps_latitude())
        let lonValues = reader.numbers(EXIF_IFD_GPS, tb_exif_tag_gps_longitude())
        for (name, tag, values) in [
            ("GPSLatitude", tb_exif_tag_gps_latitude(), latValues), ("GPSLongitude", tb_exif_tag_gps_longitude(), lonValues),
        ] where values == nil {
            if let entry = reader.entry(EXIF_IFD_GPS, tag) {
                let format = exif_format_get_name(entry.pointee.format).map { String(cString: $0) } ?? "an unknown type"
                warnings.append("\(name) is stored as \(format), not as numbers; position not used")
                return
            }
        }
        guard latValues != nil || lonValues != nil else { return }
        guard let latValues, let lonValues else {
            warnings.append("GPS position has only a \(latValues == nil ? "longitude" : "latitude"); position not used")
            return
        }
        guard let lat = PhotoMetadata.degrees(latValues), let lon = PhotoMetadata.degrees(lonValues) else {
            warnings.append("GPS position has a zero denominator; position not used")
            return
        }
        let latRef = reader.text(EXIF_IFD_GPS, tb_exif_tag_gps_latitude_ref())?.uppercased()
        let lonRef = reader.text(EXIF_IFD_GPS, tb_exif_tag_gps_longitude_ref())?.uppercased()
        // As exiftool: the value's own sign (an SRATIONAL may be negative), turned round by S or W.
        var missing: [String] = []
        for (name, ref, allowed) in [("GPSLatitudeRef", latRef, ["N", "S"]), ("GPSLongitudeRef", lonRef, ["E", "W"])] {
            if ref == nil {
                missing.append("\(name) missing")
            } else if let ref, !allowed.contains(ref) {
                missing.append("\(name) \"\(ref)\" is not \(allowed.joined(separator: " or "))")
            }
        }
        guard missing.isEmpty, let latRef, let lonRef else {
            warnings.append(missing.joined(separator: ", ") + "; position not used")
            return
        }
        guard lat != 0 || lon != 0 else {
            warnings.append("GPS position 0°, 0° (no fix); position not used")
            return
        }
        gps = GPSCoordinate(latitude: latRef == "S" ? -lat : lat, longitude: lonRef == "W" ? -lon : lon)
        if gps == nil { warnings.append("GPS position \(lat), \(lon) out of range; position not used") }
    }

    /// Degrees + minutes/60 + seconds/3600 from the first three values (fewer: degrees, or degrees and
    /// minutes, as some writers store decimal degrees); `nil` on a zero denominator (NaN) or no value.
    static func degrees(_ parts: [Double]) -> Double? {
        guard !parts.isEmpty else { return nil }
        var total = 0.0
        var scale = 1.0
        for part in parts.prefix(3) {
            guard part.isFinite else { return nil }
            total += part / scale
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
///
/// Numbers are read in whatever integer or rational type the file uses (BYTE, SBYTE, SHORT, SSHORT, LONG, SLONG,
/// RATIONAL, SRATIONAL: TIFF 6.0 §2 and CIPA DC-008 §4.6.2), not only the one the specification names for
/// the field: writers differ (some phones store GPS positions as SRATIONAL, some tools Orientation as LONG), and
/// exiftool and Pillow read them all.
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

    /// A text entry (ASCII, or UNDEFINED/BYTE as some writers store it) up to its first NUL, trimmed of spaces;
    /// `nil` when absent, of a numeric format, or empty.
    func text(_ ifd: ExifIfd, _ tag: ExifTag) -> String? {
        guard let entry = entry(ifd, tag),
            [EXIF_FORMAT_ASCII, EXIF_FORMAT_UNDEFINED, EXIF_FORMAT_BYTE].contains(entry.pointee.format)
        else { return nil }
        let buffer = UnsafeBufferPointer(start: entry.pointee.data, count: Int(entry.pointee.size))
        let bytes = buffer.prefix { $0 != 0 }
        return trimmed(String(decoding: bytes, as: UTF8.self))
    }

    /// Every value of a numeric entry, in order, bounded by the entry's real size. A rational with a zero
    /// denominator is NaN. `nil` when absent or of another format (text, FLOAT/DOUBLE, which no EXIF field that
    /// autotag reads allows).
    func numbers(_ ifd: ExifIfd, _ tag: ExifTag) -> [Double]? {
        guard let entry = entry(ifd, tag) else { return nil }
        let format = entry.pointee.format
        guard Self.numberFormats.contains(format.rawValue) else { return nil }
        let unit = Int(exif_format_get_size(format))
        let count = min(Int(entry.pointee.components), Int(entry.pointee.size) / unit)
        guard count > 0 else { return nil }
        let base = entry.pointee.data!
        return (0..<count).map { i -> Double in
            let p = base + unit * i
            switch format {
            case EXIF_FORMAT_BYTE: return Double(p.pointee)
            case EXIF_FORMAT_SBYTE: return Double(Int8(bitPattern: p.pointee))
            case EXIF_FORMAT_SHORT: return Double(exif_get_short(p, order))
            case EXIF_FORMAT_SSHORT: return Double(exif_get_sshort(p, order))
            case EXIF_FORMAT_LONG: return Double(exif_get_long(p, order))
            case EXIF_FORMAT_SLONG: return Double(exif_get_slong(p, order))
            case EXIF_FORMAT_RATIONAL:
                let r = exif_get_rational(p, order)
                return r.denominator == 0 ? .nan : Double(r.numerator) / Double(r.denominator)
            case EXIF_FORMAT_SRATIONAL:
                let r = exif_get_srational(p, order)
                return r.denominator == 0 ? .nan : Double(r.numerator) / Double(r.denominator)
            default: return .nan
            }
        }
    }

    /// The formats `numbers` reads.
    static let numberFormats: Set<UInt32> = Set(
        [
            EXIF_FORMAT_BYTE, EXIF_FORMAT_SBYTE, EXIF_FORMAT_SHORT, EXIF_FORMAT_SSHORT, EXIF_FORMAT_LONG,
            EXIF_FORMAT_SLONG, EXIF_FORMAT_RATIONAL, EXIF_FORMAT_SRATIONAL,
        ].map(\.rawValue))

    /// The first value of a numeric entry when it is a whole number (`3`, `3/1`, `12/2`); `nil` otherwise.
    func integer(_ ifd: ExifIfd, _ tag: ExifTag) -> Int? {
        guard let first = numbers(ifd, tag)?.first, first.isFinite, first == first.rounded(),
            abs(first) < 1e15
        else { return nil }
        return Int(first)
    }
}

/// `text` without leading or trailing spaces, tabs and NULs; `nil` when nothing is left.
func trimmed(_ text: String) -> String? {
    let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\0" || $0 == "\n" || $0 == "\r" }
    guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) })
    else { return nil }
    return String(text[first...last])
}
