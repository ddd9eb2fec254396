/// An error from the photo library: a stable machine code plus a human message.
///
/// `code.name` is what `--json` output and job results show (for example `"not_jpeg"`); new codes may be added,
/// so switch on the static members with a `default`.
public struct PhotoLibraryError: Error, CustomStringConvertible, Sendable, Equatable {
    /// A stable, open set of error codes.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: String, Sendable {
            case empty, notJPEG = "not_jpeg", truncated, corrupt, tooLarge = "too_large", outOfMemory = "out_of_memory"
            case unsupported, unsupportedFormat = "unsupported_format", io, notFound = "not_found", ambiguous, invalidID = "invalid_id"
            case invalidTag = "invalid_tag", badPlaceFile = "bad_place_file", store
            case unsupportedCoding = "unsupported_coding"
        }
        private let kind: Kind
        private init(_ kind: Kind) { self.kind = kind }

        /// The file has zero bytes.
        public static let empty = Code(.empty)
        /// The bytes given to a JPEG-only reader (`JPEGHeader`, `RGBImage.decodeJPEG`) do not start with a JPEG SOI
        /// marker. Files are told apart by content first (`PhotoFormat`), which says `unsupportedFormat` instead.
        public static let notJPEG = Code(.notJPEG)
        /// The JPEG data ends before the image does.
        public static let truncated = Code(.truncated)
        /// libjpeg rejected the data (bad markers, Huffman data, no image).
        public static let corrupt = Code(.corrupt)
        /// Over a limit: pixel count (decompression bomb), file size or progressive scan count.
        public static let tooLarge = Code(.tooLarge)
        /// The decoder's memory cap was reached.
        public static let outOfMemory = Code(.outOfMemory)
        /// A colour space or layout that cannot be converted to RGB.
        public static let unsupported = Code(.unsupported)
        /// A valid JPEG coded in a way the decoder does not read: 12-bit (or other non-8-bit) samples, lossless
        /// (SOF3/SOF11), hierarchical (SOF5–7, SOF13–15), a height given by a DNL marker. Not damage: the size from
        /// the frame header and the EXIF are read; only the pixels are not (`JPEGFrame`).
        public static let unsupportedCoding = Code(.unsupportedCoding)
        /// The file's content is no format the library reads (JPEG, HEIF/HEIC, AVIF), or a HEIF feature or codec
        /// libheif cannot read; the message says what the file looks like.
        public static let unsupportedFormat = Code(.unsupportedFormat)
        /// A file system call failed (`errno` in the message).
        public static let io = Code(.io)
        /// No photo has this stable ID or prefix.
        public static let notFound = Code(.notFound)
        /// A stable ID prefix matches more than one photo.
        public static let ambiguous = Code(.ambiguous)
        /// Not a stable ID (a UUID in 8-4-4-4-12 hex form) or not a hex prefix of one.
        public static let invalidID = Code(.invalidID)
        /// A tag that is empty or holds control characters.
        public static let invalidTag = Code(.invalidTag)
        /// A places CSV line that is not `name,lat,lon` with valid coordinates.
        public static let badPlaceFile = Code(.badPlaceFile)
        /// The SQLite store failed (the SQLite message is in `message`).
        public static let store = Code(.store)

        /// The stable snake_case name, for JSON.
        public var name: String { kind.rawValue }
        public var description: String { kind.rawValue }
    }

    /// What went wrong, as a stable code.
    public let code: Code
    /// Details for people: the path, the libjpeg or SQLite message.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.name): \(message)" }
}
