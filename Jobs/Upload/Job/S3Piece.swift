import S3Client
import TrailbookEngine
import TrailbookHTTP
import TrailbookLoop
import TusClient

/// One part's bytes and digests, computed on the thread pool.
struct S3Piece: Sendable {
    let bytes: [UInt8]
    /// The MD5 (`Content-MD5`), when computed.
    let md5: [UInt8]?
    let sha256Hex: String

    /// Computes the SHA-256 unless the caller already has it (`sha256Hex`, of exactly `bytes`), and the MD5 if
    /// `withMD5` (a body with a SHA-256 checksum needs none: MD5 was a third of the daemon's CPU per byte).
    init(bytes: [UInt8], sha256Hex: String? = nil, withMD5: Bool) {
        self.bytes = bytes
        md5 = withMD5 ? TusChecksumAlgorithm.md5.digest(bytes) : nil
        self.sha256Hex = sha256Hex ?? S3Signer.hexSHA256(bytes)
    }

    var md5Hex: String? { md5.map(SHA256.hex) }

    /// The SHA-256 in base64, as `x-amz-checksum-sha256` and `ChecksumSHA256` give it.
    var sha256Base64: String {
        func nibble(_ digit: UInt8) -> UInt8 { digit <= 57 ? digit - 48 : (digit | 0x20) - 87 }
        let digits = Array(sha256Hex.utf8)
        return Base64.encode(stride(from: 0, to: digits.count, by: 2).map { nibble(digits[$0]) << 4 | nibble(digits[$0 + 1]) })
    }

    /// Whether `etag` has the form of an MD5 (32 hex digits), as S3 gives for parts and single-`PUT` objects.
    static func isMD5(_ etag: String) -> Bool {
        etag.utf8.count == 32 && etag.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }
}
