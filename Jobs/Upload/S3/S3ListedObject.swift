/// One object of a `ListObjectsV2` page: what the listing tells of it without a `HeadObject`.
public struct S3ListedObject: Sendable, Equatable {
    /// The object's full key.
    public var key: String
    /// Its size in bytes.
    public var size: Int64
    /// Its ETag, quotes removed: the MD5 of the bytes (hex) for an unencrypted single `PUT`, `MD5-of-part-MD5s-N`
    /// for a multipart upload of N parts, something else under SSE-KMS or SSE-C.
    public var etag: String

    /// An object `key` of `size` bytes with `etag` (unquoted).
    public init(key: String, size: Int64, etag: String) {
        self.key = key
        self.size = size
        self.etag = etag
    }
}
