import TrailbookHTTP
import TrailbookLoop
import TusClient

/// What `HeadObject` says of an object: enough to tell whether it holds a given multipart upload's bytes.
public struct S3ObjectHead: Sendable, Equatable {
    /// Size in bytes (`Content-Length`).
    public var size: Int64
    /// The ETag, quotes removed: the MD5 of the bytes for an unencrypted single `PUT`, `MD5-of-part-MD5s-N` for a
    /// multipart upload of N parts.
    public var etag: String
    /// The object's SHA-256 checksum in base64 as the server keeps it (asked for with `x-amz-checksum-mode:
    /// ENABLED`), or `nil` when it has none. For a multipart upload S3 gives the SHA-256 of the parts' SHA-256
    /// digests, followed by `-N`.
    public var checksumSHA256: String?

    /// An object of `size` bytes with `etag` (unquoted) and, if the server gave one, `checksumSHA256` (base64).
    public init(size: Int64, etag: String, checksumSHA256: String? = nil) {
        self.size = size
        self.etag = etag
        self.checksumSHA256 = checksumSHA256
    }
}

/// The digests S3 gives a multipart upload's object, computed from its parts' own digests: the composite
/// checksum `base64(SHA-256(sha256(part 1) ‖ … ‖ sha256(part N)))-N` and the ETag
/// `hex(MD5(md5(part 1) ‖ … ‖ md5(part N)))-N`
/// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html).
public struct S3MultipartDigest: Sendable {
    private var partSHA256: [UInt8] = []
    private var partMD5: [UInt8] = []
    /// Parts added so far.
    public private(set) var parts = 0

    /// A digest of no parts yet; `add(sha256:md5:)` each part in part-number order.
    public init() {}

    /// Adds the next part (in part-number order) by its raw SHA-256 and MD5 digests.
    public mutating func add(sha256: [UInt8], md5: [UInt8]) {
        partSHA256 += sha256
        partMD5 += md5
        parts += 1
    }

    /// Adds the next part by its bytes (CPU-bound: call it on the thread pool).
    public mutating func add(part bytes: [UInt8]) {
        add(sha256: TusChecksumAlgorithm.sha256.digest(bytes), md5: TusChecksumAlgorithm.md5.digest(bytes))
    }

    /// The composite SHA-256 checksum in base64, without the `-N` suffix.
    public var checksumSHA256: String { Base64.encode(TusChecksumAlgorithm.sha256.digest(partSHA256)) }

    /// The multipart ETag, `hex-N`.
    public var etag: String {
        let digest = TusChecksumAlgorithm.md5.digest(partMD5)
        let hex = digest.map { byte in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
        }.joined()
        return "\(hex)-\(parts)"
    }

    /// Whether `head` is an object made of exactly these parts: its size is `size` and the digest it carries
    /// matches, the SHA-256 checksum when it has one (with or without the `-N` suffix), else the multipart ETag.
    /// - Returns: `nil` when the object carries neither in a form this can check (an ETag of another form, as with
    ///   SSE-KMS), so nothing proves or disproves it; else whether it matches.
    public func matches(_ head: S3ObjectHead, size: Int64) -> Bool? {
        guard head.size == size else { return false }
        if let checksum = head.checksumSHA256 {
            let bare = checksum.split(separator: "-", maxSplits: 1).first.map(String.init) ?? checksum
            return bare == checksumSHA256
        }
        guard let dash = head.etag.lastIndex(of: "-") else { return nil }
        guard head.etag[head.etag.index(after: dash)...] == "\(parts)" else { return false }
        return head.etag.lowercased() == etag
    }
}

extension S3Client {
    /// `HeadObject` with `x-amz-checksum-mode: ENABLED` (the object's checksum, where it has one).
    /// - Returns: the object's size, ETag and checksum, or `nil` when there is no such object (404).
    /// - Throws: `S3Error` for any other failure.
    public func headObject(key: String) async throws(S3Error) -> S3ObjectHead? {
        let response: HTTPResponse
        do {
            response = try await send("HEAD", key: key, headers: ["x-amz-checksum-mode": "ENABLED"], what: "HEAD \(key)")
        } catch where error.status == 404 {
            return nil
        }
        guard let length = response.headers["Content-Length"].flatMap({ Int64($0) }) else {
            throw S3Error(code: .protocolError, message: "HEAD \(key): no Content-Length")
        }
        return S3ObjectHead(
            size: length, etag: Self.unquoted(response.headers["ETag"] ?? ""),
            checksumSHA256: response.headers[Self.checksumHeader])
    }
}
