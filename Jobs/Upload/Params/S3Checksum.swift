/// - `sha256` (the default): S3's additional checksum `x-amz-checksum-sha256` on every `PUT` and part instead of
///   `Content-MD5`, the multipart upload created with `x-amz-checksum-algorithm: SHA256` and each part's checksum
///   listed in the Complete, so the server keeps a SHA-256 for every part and the object
///   (https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html). The part's SHA-256 is the
///   signed payload hash already computed for Signature Version 4, so it costs nothing more. It relies on the server
///   checking the checksum (AWS does); one that ignores it checks nothing of the body.
/// - `md5`: `Content-MD5` only, for S3-compatible providers without the additional checksums.
public enum S3Checksum: String, Codable, Sendable, Equatable {
    /// `x-amz-checksum-sha256` (base64 of the body's SHA-256); JSON `"sha256"`.
    case sha256
    /// `Content-MD5` (base64 of the body's MD5, RFC 1864); JSON `"md5"`.
    case md5
}
