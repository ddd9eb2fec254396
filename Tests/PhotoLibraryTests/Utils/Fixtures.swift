import CExif
import Glibc
import TrailbookLoop
import PhotoLibrary

/// Test fixtures made with the libraries themselves: pixels encoded by libjpeg (through `RGBImage.jpegData`),
/// EXIF built and serialised by libexif (`exif_data_new`, entries, `exif_data_save_data`) and spliced in as an
/// APP1 segment right after SOI. No EXIF field is ever written by hand.
enum Fixtures {
    /// A `width × height` image from a function of (x, y) → (r, g, b).
    static func image(_ width: Int, _ height: Int, _ color: (Int, Int) -> (UInt8, UInt8, UInt8)) -> RGBImage {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let (r, g, b) = color(x, y)
                let i = (y * width + x) * 3
                pixels[i] = r; pixels[i + 1] = g; pixels[i + 2] = b
            }
        }
        return RGBImage(width: width, height: height, pixels: pixels)
    }

    /// A textured daylight scene: sky-blue top, green bottom, with diagonal detail.
    static func scene(_ width: Int, _ height: Int, seed: Int = 0) -> RGBImage {
        image(width, height) { x, y in
            let wave = UInt8(truncatingIfNeeded: ((x * 7 + y * 3 + seed * 13) % 40))
            if y < height / 2 { return (60 + wave, 120 + wave, 220) }
            return (50 + wave, 160 + wave / 2, 60)
        }
    }

    /// EXIF fields to write.
    struct EXIF {
        var orientation: UInt16?
        var make: String?
        var model: String?
        var dateTimeOriginal: String?
        var offsetTimeOriginal: String?
        /// (latitude degrees ≥ 0, "N"/"S", longitude degrees ≥ 0, "E"/"W")
        var gps: (Double, String, Double, String)?
        /// Raw rationals for odd GPS tests: latitude (num, den) triples.
        var gpsLatitudeRationals: [(UInt32, UInt32)]?
        /// Entries in any format, written after (and instead of) the fields above with the same tag.
        var entries: [Entry] = []
    }

    /// One EXIF entry in a format of the test's choosing (for fields some writers store in another type).
    struct Entry {
        var ifd: ExifIfd
        var tag: ExifTag
        var format: ExifFormat
        /// Numbers for numeric formats (rationals as (numerator, denominator)), or bytes for ASCII/UNDEFINED/BYTE.
        var values: [Value]

        enum Value {
            case number(Int64)
            case ratio(Int64, Int64)
            case byte(UInt8)
        }

        /// A text entry: the bytes of `text`, plus a NUL when `terminated`.
        static func text(_ ifd: ExifIfd, _ tag: ExifTag, _ text: String, format: ExifFormat = EXIF_FORMAT_ASCII,
                         terminated: Bool = true) -> Entry {
            Entry(ifd: ifd, tag: tag, format: format, values: (Array(text.utf8) + (terminated ? [0] : [])).map { .byte($0) })
        }

        /// A numeric entry of whole numbers.
        static func numbers(_ ifd: ExifIfd, _ tag: ExifTag, _ format: ExifFormat, _ values: [Int64]) -> Entry {
            Entry(ifd: ifd, tag: tag, format: format, values: values.map { .number($0) })
        }

        /// A RATIONAL or SRATIONAL entry.
        static func ratios(_ ifd: ExifIfd, _ tag: ExifTag, _ format: ExifFormat, _ values: [(Int64, Int64)]) -> Entry {
            Entry(ifd: ifd, tag: tag, format: format, values: values.map { .ratio($0.0, $0.1) })
        }
    }

    /// `jpeg` with an APP1 EXIF segment built by libexif inserted after SOI.
    static func withEXIF(_ jpeg: [UInt8], _ fields: EXIF) -> [UInt8] {
        let data = exif_data_new()!
        defer { exif_data_unref(data) }
        exif_data_set_byte_order(data, EXIF_BYTE_ORDER_INTEL)
        let order = EXIF_BYTE_ORDER_INTEL
        let mem = exif_mem_new_default()!
        defer { exif_mem_unref(mem) }
        let ifds = withUnsafeBytes(of: data.pointee.ifd) { Array($0.bindMemory(to: UnsafeMutablePointer<ExifContent>?.self)) }

        func add(_ ifd: ExifIfd, _ tag: ExifTag, _ format: ExifFormat, _ components: Int, _ unit: Int)
            -> UnsafeMutablePointer<UInt8>
        {
            let entry = exif_entry_new_mem(mem)!
            entry.pointee.tag = tag
            entry.pointee.format = format
            entry.pointee.components = UInt(components)
            entry.pointee.size = UInt32(components * unit)
            entry.pointee.data = exif_mem_alloc(mem, UInt32(components * unit)).assumingMemoryBound(to: UInt8.self)
            exif_content_add_entry(ifds[Int(ifd.rawValue)], entry)
            exif_entry_unref(entry)
            return entry.pointee.data
        }
        func ascii(_ ifd: ExifIfd, _ tag: ExifTag, _ text: String) {
            let bytes = Array(text.utf8) + [0]
            let p = add(ifd, tag, EXIF_FORMAT_ASCII, bytes.count, 1)
            for (i, b) in bytes.enumerated() { p[i] = b }
        }
        func rationals(_ ifd: ExifIfd, _ tag: ExifTag, _ values: [(UInt32, UInt32)]) {
            let p = add(ifd, tag, EXIF_FORMAT_RATIONAL, values.count, 8)
            for (i, v) in values.enumerated() {
                exif_set_rational(p + 8 * i, order, ExifRational(numerator: ExifLong(v.0), denominator: ExifLong(v.1)))
            }
        }
        func dms(_ degrees: Double) -> [(UInt32, UInt32)] {
            let d = UInt32(degrees)
            let minutes = (degrees - Double(d)) * 60
            let m = UInt32(minutes)
            let s = UInt32(((minutes - Double(m)) * 60 * 10_000).rounded())
            return [(d, 1), (m, 1), (s, 10_000)]
        }

        if let orientation = fields.orientation {
            exif_set_short(add(EXIF_IFD_0, EXIF_TAG_ORIENTATION, EXIF_FORMAT_SHORT, 1, 2), order, orientation)
        }
        if let make = fields.make { ascii(EXIF_IFD_0, EXIF_TAG_MAKE, make) }
        if let model = fields.model { ascii(EXIF_IFD_0, EXIF_TAG_MODEL, model) }
        if let date = fields.dateTimeOriginal { ascii(EXIF_IFD_EXIF, EXIF_TAG_DATE_TIME_ORIGINAL, date) }
        if let offset = fields.offsetTimeOriginal { ascii(EXIF_IFD_EXIF, EXIF_TAG_OFFSET_TIME_ORIGINAL, offset) }
        if let (lat, latRef, lon, lonRef) = fields.gps {
            ascii(EXIF_IFD_GPS, tb_exif_tag_gps_latitude_ref(), latRef)
            rationals(EXIF_IFD_GPS, tb_exif_tag_gps_latitude(), fields.gpsLatitudeRationals ?? dms(lat))
            ascii(EXIF_IFD_GPS, tb_exif_tag_gps_longitude_ref(), lonRef)
            rationals(EXIF_IFD_GPS, tb_exif_tag_gps_longitude(), dms(lon))
        }

        for entry in fields.entries {
            if let old = exif_content_get_entry(ifds[Int(entry.ifd.rawValue)], entry.tag) {
                exif_content_remove_entry(ifds[Int(entry.ifd.rawValue)], old)
            }
            let unit = Int(exif_format_get_size(entry.format))
            let p = add(entry.ifd, entry.tag, entry.format, entry.values.count, unit)
            for (i, value) in entry.values.enumerated() {
                let at = p + unit * i
                switch (entry.format, value) {
                case (_, .byte(let b)): at.pointee = b
                case (EXIF_FORMAT_BYTE, .number(let n)), (EXIF_FORMAT_SBYTE, .number(let n)):
                    at.pointee = UInt8(truncatingIfNeeded: n)
                case (EXIF_FORMAT_SHORT, .number(let n)): exif_set_short(at, order, ExifShort(truncatingIfNeeded: n))
                case (EXIF_FORMAT_SSHORT, .number(let n)): exif_set_sshort(at, order, ExifSShort(truncatingIfNeeded: n))
                case (EXIF_FORMAT_LONG, .number(let n)): exif_set_long(at, order, ExifLong(truncatingIfNeeded: n))
                case (EXIF_FORMAT_SLONG, .number(let n)): exif_set_slong(at, order, ExifSLong(truncatingIfNeeded: n))
                case (EXIF_FORMAT_RATIONAL, .ratio(let n, let d)):
                    exif_set_rational(at, order, ExifRational(numerator: ExifLong(n), denominator: ExifLong(d)))
                case (EXIF_FORMAT_SRATIONAL, .ratio(let n, let d)):
                    exif_set_srational(at, order, ExifSRational(numerator: ExifSLong(n), denominator: ExifSLong(d)))
                default: preconditionFailure("value \(value) does not fit format \(entry.format)")
                }
            }
        }

        var buffer: UnsafeMutablePointer<UInt8>?
        var size: UInt32 = 0
        exif_data_save_data(data, &buffer, &size)
        precondition(buffer != nil && size > 6, "libexif did not serialise")
        defer { free(buffer) }
        let segmentLength = Int(size) + 2
        var out: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE1, UInt8(segmentLength >> 8), UInt8(segmentLength & 0xFF)]
        out.append(contentsOf: UnsafeBufferPointer(start: buffer, count: Int(size)))
        out.append(contentsOf: jpeg[2...])
        return out
    }

    /// A fresh temporary directory (removed by `removeTree`).
    static func temporaryDirectory() -> String {
        var template = Array("/tmp/photolibrary-tests-XXXXXX".utf8CString)
        let path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        return path
    }

    static func write(_ bytes: [UInt8], to path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        precondition(fd >= 0, "cannot create \(path)")
        bytes.withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    /// Removes `path` and everything under it, never following symbolic links.
    static func removeTree(_ path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        if (st.st_mode & S_IFMT) == S_IFDIR, let dir = opendir(path) {
            var names: [String] = []
            while let entry = readdir(dir) {
                let name = String(decoding: DirectoryEntry.name(entry), as: UTF8.self)
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(dir)
            for name in names { removeTree(path + "/" + name) }
            rmdir(path)
        } else {
            unlink(path)
        }
    }
}
