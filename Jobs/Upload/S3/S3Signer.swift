import CCrypto
import TrailbookEngine
import TrailbookHTTP
import TusClient

/// Credentials to sign S3 requests with. The secret never leaves the daemon's memory: it is not in params,
/// checkpoints, logs or errors (`description` shows the access key ID only).
public struct S3Credentials: Sendable, Equatable, CustomStringConvertible {
    /// The access key ID (`AKIA…`, `ASIA…` for temporary credentials).
    public var accessKeyID: String
    /// The secret access key.
    public var secretAccessKey: String
    /// The session token of temporary credentials (`x-amz-security-token`), or `nil`.
    public var sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// "access key AKIA…" — never the secret or the token.
    public var description: String { "access key \(accessKeyID)" }
}

/// AWS Signature Version 4 for S3 requests (header form), over OpenSSL's HMAC-SHA256 and SHA-256.
///
/// Spec: https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html. The canonical request
/// signs the method, the path (each segment URI-encoded once, as S3 wants), the sorted query, every header the
/// request carries (lower-cased, sorted) and the payload's SHA-256 (`x-amz-content-sha256`).
public struct S3Signer: Sendable {
    /// The credentials to sign with.
    public var credentials: S3Credentials
    /// The region of the signing scope, for example `us-east-1`.
    public var region: String
    /// The service of the signing scope: `s3`.
    public var service = "s3"

    public init(credentials: S3Credentials, region: String) {
        self.credentials = credentials
        self.region = region
    }

    /// Adds `x-amz-date`, `x-amz-content-sha256`, `x-amz-security-token` (with a session token) and
    /// `Authorization` to `headers`.
    ///
    /// - Parameters:
    ///   - method: the HTTP method.
    ///   - path: the request path as sent, already URI-encoded (`/bucket/key%20name`).
    ///   - query: the query parameters, not encoded (encoded and sorted here).
    ///   - headers: the headers to send, which must include `Host`; all of them are signed.
    ///   - payloadHash: the body's SHA-256 in hex (`S3Signer.hexSHA256`), or `UNSIGNED-PAYLOAD`.
    ///   - time: seconds since the Unix epoch (the request's `x-amz-date`).
    public func sign(
        method: String, path: String, query: [(String, String)], headers: inout HTTPHeaders, payloadHash: String,
        time: Int64
    ) {
        let (date, stamp) = Self.dateAndStamp(time)
        headers.replaceOrAdd(name: "x-amz-date", value: stamp)
        headers.replaceOrAdd(name: "x-amz-content-sha256", value: payloadHash)
        if let token = credentials.sessionToken { headers.replaceOrAdd(name: "x-amz-security-token", value: token) }

        let canonicalHeaders = headers.fields
            .map { (name: $0.name.lowercased(), value: Self.trimmed($0.value)) }
            .sorted { $0.name < $1.name }
        let signedHeaders = canonicalHeaders.map(\.name).joined(separator: ";")
        let canonicalQuery = Self.canonicalQuery(query)
        let canonicalRequest = [
            method, path, canonicalQuery,
            canonicalHeaders.map { "\($0.name):\($0.value)\n" }.joined(), signedHeaders, payloadHash,
        ].joined(separator: "\n")
        let scope = "\(date)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            "AWS4-HMAC-SHA256", stamp, scope, Self.hexSHA256(Array(canonicalRequest.utf8)),
        ].joined(separator: "\n")
        var key = Self.hmac(key: Array("AWS4\(credentials.secretAccessKey)".utf8), Array(date.utf8))
        for part in [region, service, "aws4_request"] { key = Self.hmac(key: key, Array(part.utf8)) }
        let signature = SHA256.hex(Self.hmac(key: key, Array(stringToSign.utf8)))
        headers.replaceOrAdd(
            name: "Authorization",
            value: "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), "
                + "Signature=\(signature)")
    }

    /// `key=value` pairs URI-encoded and sorted by key (then value), joined by `&`: the canonical query string and
    /// the query as sent (the two must match byte for byte).
    public static func canonicalQuery(_ query: [(String, String)]) -> String {
        query.map { (uriEncode($0.0, keepSlash: false), uriEncode($0.1, keepSlash: false)) }
            .sorted { $0.0 == $1.0 ? $0.1 < $1.1 : $0.0 < $1.0 }
            .map { "\($0.0)=\($0.1)" }
            .joined(separator: "&")
    }

    /// SigV4's URI encoding: every byte but `A-Z a-z 0-9 - . _ ~` (and `/` when `keepSlash`) as `%XX`, upper-case.
    public static func uriEncode(_ text: String, keepSlash: Bool) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.append(byte)
            case UInt8(ascii: "/") where keepSlash:
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// SHA-256 of `bytes` as 64 lower-case hex digits (OpenSSL).
    public static func hexSHA256(_ bytes: [UInt8]) -> String {
        SHA256.hex(TusChecksumAlgorithm.sha256.digest(bytes))
    }

    /// HMAC-SHA256 of `data` under `key`, by OpenSSL's `HMAC()`.
    static func hmac(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let done = key.withUnsafeBytes { k in
            data.withUnsafeBytes { d in
                out.withUnsafeMutableBufferPointer { o in
                    HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), d.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        d.count, o.baseAddress, &length)
                }
            }
        }
        precondition(done != nil && length == 32, "HMAC-SHA256 failed")
        return out
    }

    /// `YYYYMMDD` and `YYYYMMDDTHHMMSSZ` (UTC) of `time`, seconds since the Unix epoch.
    static func dateAndStamp(_ time: Int64) -> (String, String) {
        // Civil date from days since 1970-01-01 (Howard Hinnant's days_from_civil inverse).
        let days = time >= 0 ? time / 86_400 : (time - 86_399) / 86_400
        let seconds = time - days * 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let date = "\(year)\(two(month))\(two(day))"
        return (date, "\(date)T\(two(seconds / 3_600))\(two(seconds / 60 % 60))\(two(seconds % 60))Z")
    }

    private static func trimmed(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }
}
