#if canImport(Glibc)
import Glibc
#endif

/// A photo's stable ID: the identity every device derives from the file's content alone, with no server.
///
/// **Scheme.** `StableID = UUIDv5(namespace, name)` (RFC 9562 §5.5, name-based with SHA-1) where
/// - `name` is the lowercase hexadecimal SHA-256 of the file's bytes (64 ASCII characters, FIPS 180-4), and
/// - `namespace` is `c44417ba-eb9d-5583-993e-f5ac8ea0c0f4`, itself
///   `UUIDv5(NameSpace_URL, "https://trailbook.example/ns/photo-content-sha256")` (RFC 9562 §6.6 lists NameSpace_URL).
///
/// So: SHA-1 over the 16 namespace bytes followed by the 64 name bytes; the first 16 bytes of that digest, with
/// the version nibble (byte 6, high half) set to 5 and the variant bits (byte 8, top two) set to `10`
/// (RFC 9562 §4.1, §4.2). Rendered lowercase, 8-4-4-4-12.
///
/// Two copies of the same bytes get the same ID on every device; any change to the bytes (even an EXIF edit)
/// gives a new ID. Both digests come from OpenSSL's libcrypto (EVP).
/// Python check: `uuid.uuid5(uuid.UUID("c44417ba-eb9d-5583-993e-f5ac8ea0c0f4"), hashlib.sha256(data).hexdigest())`.
public struct StableID: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// The canonical text form: lowercase hex, 36 characters, 8-4-4-4-12.
    public let text: String

    /// The namespace UUID of the scheme, as 16 bytes.
    public static let namespace: [UInt8] = [
        0xc4, 0x44, 0x17, 0xba, 0xeb, 0x9d, 0x55, 0x83, 0x99, 0x3e, 0xf5, 0xac, 0x8e, 0xa0, 0xc0, 0xf4,
    ]

    /// Parses a stable ID in 8-4-4-4-12 hex form (either case); `nil` when it is not one.
    public init?(_ text: String) {
        let lowered = text.lowercased()
        guard StableID.isCanonical(lowered) else { return nil }
        self.text = lowered
    }

    private init(canonical: String) { text = canonical }

    /// The ID of a file whose SHA-256 (as 64 lowercase hex characters) is `sha256Hex`.
    public init(sha256Hex: String) {
        var input = StableID.namespace
        input.append(contentsOf: Array(sha256Hex.lowercased().utf8))
        self.init(uuidBytes: Array(Digest.hash(.sha1, input).prefix(16)), version: 5)
    }

    /// The ID of `bytes` (hashes them with SHA-256 first).
    public init(contentsOf bytes: [UInt8]) {
        self.init(sha256Hex: Digest.hex(Digest.hash(.sha256, bytes)))
    }

    /// The ID of the file at `path`, read in 1 MiB chunks (memory stays flat for any file size).
    ///
    /// - Throws: `PhotoLibraryError.io` if the file cannot be opened or read.
    public init(fileAt path: String) throws(PhotoLibraryError) {
        self.init(sha256Hex: try StableID.sha256Hex(fileAt: path))
    }

    /// The lowercase hex SHA-256 of the file at `path`, streamed.
    ///
    /// - Throws: `PhotoLibraryError.io` if the file cannot be opened or read.
    public static func sha256Hex(fileAt path: String) throws(PhotoLibraryError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw PhotoLibraryError(.io, "cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let context = Digest.Context(.sha256)
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { chunk.deallocate() }
        while true {
            let n = read(fd, chunk.baseAddress, chunk.count)
            if n < 0 {
                if errno == EINTR { continue }
                throw PhotoLibraryError(.io, "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            context.update(UnsafeRawBufferPointer(rebasing: chunk[0..<n]))
        }
        return Digest.hex(context.finish())
    }

    init(uuidBytes: [UInt8], version: UInt8) {
        var bytes = uuidBytes
        bytes[6] = (bytes[6] & 0x0F) | (version << 4)
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = Array(Digest.hex(bytes))
        let groups = [hex[0..<8], hex[8..<12], hex[12..<16], hex[16..<20], hex[20..<32]]
        self.init(canonical: groups.map { String($0) }.joined(separator: "-"))
    }

    /// Whether `text` is lowercase 8-4-4-4-12 hex.
    static func isCanonical(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return false }
        for (i, c) in utf8.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if !isLowerHex(c) {
                return false
            }
        }
        return true
    }

    /// Whether `text` could start a canonical stable ID (lowercase hex and dashes in the right places).
    public static func isPrefix(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard !utf8.isEmpty, utf8.count <= 36 else { return false }
        for (i, c) in utf8.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if !isLowerHex(c) {
                return false
            }
        }
        return true
    }

    private static func isLowerHex(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "f"))
    }

    public var description: String { text }
    public static func < (a: StableID, b: StableID) -> Bool { a.text < b.text }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = StableID(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a UUID"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}
