import TusClient
import TrailbookHTTP

/// Why an S3 request failed, with a stable code for the job's error.
///
/// The code is the S3 error code in snake case where S3 names one (`NoSuchBucket` → `no_such_bucket`), so a user
/// can look it up in AWS's list; failures S3 does not name get codes of their own (`s3_unavailable`,
/// `no_credentials`, `bad_endpoint`, `s3_protocol_error`).
public struct S3Error: Error, Sendable, Equatable, CustomStringConvertible {
    /// The stable code.
    public enum Code: String, Sendable {
        case noSuchBucket = "no_such_bucket"
        case noSuchUpload = "no_such_upload"
        case accessDenied = "access_denied"
        case invalidAccessKeyID = "invalid_access_key_id"
        case signatureDoesNotMatch = "signature_does_not_match"
        case requestTimeTooSkewed = "request_time_too_skewed"
        case expiredToken = "expired_token"
        case slowDown = "slow_down"
        case entityTooSmall = "entity_too_small"
        case entityTooLarge = "entity_too_large"
        case invalidPart = "invalid_part"
        case badDigest = "bad_digest"
        /// The bucket is in another region than the one the requests were signed for (`301 PermanentRedirect`,
        /// `AuthorizationHeaderMalformed`, `IllegalLocationConstraintException`): the message names the bucket's
        /// region when the server said it (`x-amz-bucket-region`, `<Region>`, `<Endpoint>`) and `--region`.
        case wrongRegion = "wrong_region"
        /// 5xx, 429, `RequestTimeout`, a dropped connection, DNS or TLS trouble: worth retrying after a pause.
        case unavailable = "s3_unavailable"
        case noCredentials = "no_credentials"
        case badEndpoint = "bad_endpoint"
        /// An answer that does not follow the S3 API (no UploadId, a part the server reports twice).
        case protocolError = "s3_protocol_error"
        /// Any other S3 error code (the message names it).
        case other = "s3_error"
    }

    /// The stable code.
    public var code: Code
    /// What happened and what to do.
    public var message: String
    /// The HTTP status, when the server answered.
    public var status: Int?
    /// Seconds the server asked to wait (`Retry-After`), if it said.
    public var retryAfterSeconds: Int?

    public init(code: Code, message: String, status: Int? = nil, retryAfterSeconds: Int? = nil) {
        self.code = code
        self.message = message
        self.status = status
        self.retryAfterSeconds = retryAfterSeconds
    }

    public var description: String { "[\(code.rawValue)] \(message)" }

    /// Whether trying the same request again after a backoff may succeed.
    public var isTransient: Bool { code == .unavailable || code == .slowDown || code == .badDigest }

    /// The error for an HTTP error response: the XML `<Error>` body's `Code`, else the status.
    ///
    /// - Parameters:
    ///   - what: the request, for the message ("PUT photos/a.jpg").
    ///   - now: the client's clock (seconds since the epoch), to name the skew of `RequestTimeTooSkewed`.
    public static func from(response: HTTPResponse, what: String, bucket: String, now: Int64) -> S3Error {
        let body = String(decoding: response.body, as: UTF8.self)
        let s3Code = S3XML.first("Code", in: body) ?? ""
        let serverMessage = S3XML.first("Message", in: body) ?? ""
        let retryAfter = response.headers["Retry-After"].flatMap { Int($0.trimmingCharacters(in: " ")) }
        func make(_ code: Code, _ advice: String) -> S3Error {
            let said = serverMessage.isEmpty ? "" : " (\(serverMessage))"
            return S3Error(
                code: code, message: "\(what): HTTP \(response.status) \(s3Code)\(said) — \(advice)",
                status: response.status, retryAfterSeconds: retryAfter)
        }
        switch s3Code {
        case "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
            return make(.wrongRegion, wrongRegionAdvice(body: body, response: response, bucket: bucket))
        case "NoSuchBucket":
            return make(.noSuchBucket, "bucket '\(bucket)' does not exist at this endpoint; create it or fix --to")
        case "NoSuchUpload":
            return make(.noSuchUpload, "the multipart upload is gone (aborted, or expired by a lifecycle rule)")
        case "AccessDenied", "AllAccessDisabled", "AccountProblem":
            return make(.accessDenied, "these credentials may not write to bucket '\(bucket)'; check its policy and the key's permissions (s3:PutObject, s3:ListMultipartUploadParts, s3:AbortMultipartUpload)")
        case "InvalidAccessKeyId":
            return make(.invalidAccessKeyID, "the access key ID is unknown to this endpoint; check AWS_ACCESS_KEY_ID / the profile and the endpoint")
        case "SignatureDoesNotMatch":
            return make(.signatureDoesNotMatch, "the secret access key is wrong for this access key ID; check AWS_SECRET_ACCESS_KEY / the profile")
        case "RequestTimeTooSkewed":
            let skew = skewSeconds(body: body, response: response, now: now)
            return make(.requestTimeTooSkewed, "the daemon's clock is \(skew.map { "\($0) s " } ?? "")off the server's (S3 allows 15 minutes); set the clock (NTP) and resume the job")
        case "ExpiredToken", "TokenRefreshRequired", "InvalidToken":
            return make(.expiredToken, "the session token has expired; refresh the credentials the daemon reads, the job resumes on its next attempt")
        case "SlowDown":
            return make(.slowDown, "the server asks to slow down; retrying with backoff")
        case "EntityTooSmall":
            return make(.entityTooSmall, "a part is below the server's minimum part size; submit again with a larger --chunk-size and --min-part-size (S3: at least 5MiB)")
        case "EntityTooLarge":
            let limit = S3XML.first("MaxSizeAllowed", in: body).map { " (\($0) bytes)" } ?? ""
            return make(.entityTooLarge, "the object or a part is above the server's maximum size\(limit); submit again with a smaller --chunk-size, or --max-parts for a lower part limit")
        case "InvalidPart", "InvalidPartOrder":
            return make(.invalidPart, "the server does not have a listed part as sent; the job resumes and sends it again")
        case "BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch":
            return make(.badDigest, "the data was damaged on the way; the part is sent again")
        case "RequestTimeout", "InternalError", "ServiceUnavailable":
            return make(.unavailable, "the server is busy or failing; retrying with backoff")
        default:
            if response.status >= 500 || response.status == 429 {
                return make(.unavailable, "the server is busy or failing; retrying with backoff")
            }
            if response.status == 404 && s3Code.isEmpty {
                return make(.noSuchBucket, "bucket '\(bucket)' or the endpoint path does not exist; check --to and the endpoint")
            }
            if (response.status == 301 || response.status == 307) && response.headers["x-amz-bucket-region"] != nil {
                // A HEAD (no body) to a bucket of another region: the header alone says where it is.
                return make(.wrongRegion, wrongRegionAdvice(body: body, response: response, bucket: bucket))
            }
            if response.status == 403 && s3Code.isEmpty {
                return make(.accessDenied, "access denied; check the credentials and the bucket's policy")
            }
            return make(.other, "see the S3 error code's documentation")
        }
    }

    /// What to do about a bucket in another region: the region the server named (`x-amz-bucket-region`, else
    /// `<Region>`, else the one in `<Endpoint>` such as `b.s3.eu-west-1.amazonaws.com`), and the options that set
    /// it.
    static func wrongRegion(body: String, response: HTTPResponse) -> String? {
        if let header = response.headers["x-amz-bucket-region"]?.trimmingCharacters(in: " "), !header.isEmpty {
            return header
        }
        if let region = S3XML.first("Region", in: body), !region.isEmpty { return region }
        guard let endpoint = S3XML.first("Endpoint", in: body) else { return nil }
        // `….s3.REGION.amazonaws.com`, `….s3-REGION.amazonaws.com`, `….s3.dualstack.REGION.amazonaws.com`.
        let labels = endpoint.split(separator: ".")
        guard let amazon = labels.lastIndex(of: "amazonaws"), amazon > 0 else { return nil }
        let before = labels[amazon - 1]
        if before.hasPrefix("s3-") { return String(before.dropFirst(3)) }
        return before == "s3" ? nil : String(before)
    }

    static func wrongRegionAdvice(body: String, response: HTTPResponse, bucket: String) -> String {
        // Only a region-shaped name is quoted back (it goes into the advice as an option's value).
        let region = wrongRegion(body: body, response: response).flatMap { name in
            name.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 } && name.count <= 40
                ? name : nil
        }
        guard let region else {
            return "bucket '\(bucket)' is in another region than the one the daemon signed for; submit again with "
                + "--region set to the bucket's region (or set AWS_REGION in the daemon's environment)"
        }
        return "bucket '\(bucket)' is in region \(region); submit again with --region \(region) (the s3 option "
            + "\"region\"), or set AWS_REGION=\(region) in the daemon's environment"
    }

    /// The error for a transfer that produced no response.
    public static func from(transport error: HTTPError, what: String) -> S3Error {
        S3Error(code: .unavailable, message: "\(what): could not reach the S3 endpoint (\(error.message)); retrying with backoff")
    }

    /// Server time minus the client's, from `<ServerTime>` (or the `Date` header), in whole seconds.
    static func skewSeconds(body: String, response: HTTPResponse, now: Int64) -> Int64? {
        let server = S3XML.first("ServerTime", in: body).flatMap(parseISO8601) ?? response.headers["Date"].flatMap(HTTPDate.parse)
        return server.map { $0 - now }
    }

    /// `2026-12-01T00:00:00Z` (fractional seconds ignored) as seconds since the epoch.
    static func parseISO8601(_ text: String) -> Int64? {
        let digits = text.split(whereSeparator: { !$0.isNumber }).compactMap { Int64($0) }
        guard digits.count >= 6 else { return nil }
        return civilSeconds(year: digits[0], month: digits[1], day: digits[2], hour: digits[3], minute: digits[4], second: digits[5])
    }

    static func civilSeconds(year: Int64, month: Int64, day: Int64, hour: Int64, minute: Int64, second: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return days * 86_400 + hour * 3_600 + minute * 60 + second
    }
}

/// The few XML elements the upload reads from S3's answers, found by name: S3's answers are flat, machine-made
/// documents, so an element's text is what lies between `<Name>` and `</Name>` (entities decoded).
public enum S3XML {
    /// The text of every `<name>` element in `xml`, in order.
    public static func all(_ name: String, in xml: Substring) -> [String] {
        var found: [String] = []
        var rest = xml
        let open = "<\(name)>"
        let close = "</\(name)>"
        while let start = rest.firstRange(of: open) {
            guard let end = rest[start.upperBound...].firstRange(of: close) else { break }
            found.append(decode(rest[start.upperBound..<end.lowerBound]))
            rest = rest[end.upperBound...]
        }
        return found
    }

    /// The text of the first `<name>` element, or `nil`.
    public static func first(_ name: String, in xml: String) -> String? { all(name, in: Substring(xml)).first }

    /// The raw inner XML of every `<name>…</name>` block (for repeated groups such as `<Part>`).
    public static func blocks(_ name: String, in xml: String) -> [Substring] {
        var found: [Substring] = []
        var rest = Substring(xml)
        while let start = rest.firstRange(of: "<\(name)>") {
            guard let end = rest[start.upperBound...].firstRange(of: "</\(name)>") else { break }
            found.append(rest[start.upperBound..<end.lowerBound])
            rest = rest[end.upperBound...]
        }
        return found
    }

    /// `text` with the five predefined entities and numeric references decoded.
    static func decode(_ text: Substring) -> String {
        guard text.contains("&") else { return String(text) }
        var out = ""
        var rest = text
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            guard let semi = rest[amp...].firstIndex(of: ";") else { break }
            let entity = rest[rest.index(after: amp)..<semi]
            switch entity {
            case "quot": out += "\""
            case "amp": out += "&"
            case "lt": out += "<"
            case "gt": out += ">"
            case "apos": out += "'"
            default:
                if entity.hasPrefix("#x"), let value = UInt32(entity.dropFirst(2), radix: 16), let scalar = Unicode.Scalar(value) {
                    out.unicodeScalars.append(scalar)
                } else if entity.hasPrefix("#"), let value = UInt32(entity.dropFirst()), let scalar = Unicode.Scalar(value) {
                    out.unicodeScalars.append(scalar)
                } else {
                    out += "&\(entity);"
                }
            }
            rest = rest[rest.index(after: semi)...]
        }
        return out + rest
    }

    /// `text` with `&`, `<`, `>`, `"` escaped, for element content.
    public static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        var text = Substring(self)
        while text.first == set { text = text.dropFirst() }
        while text.last == set { text = text.dropLast() }
        return String(text)
    }
}
