import TrailbookHTTP
import TrailbookLoop
import TusClient

#if canImport(Glibc)
    import Glibc
#endif

/// What `ListParts` says of a multipart upload.
public struct S3PartListing: Sendable, Equatable {
    /// The parts by number.
    public var parts: [Int: S3Part]
    /// The checksum algorithm the upload was created with (`SHA256`, `CRC32`, …), when the server gives it.
    public var checksumAlgorithm: String?

    /// A listing of `parts` (by number) of an upload created with `checksumAlgorithm`, if known.
    public init(parts: [Int: S3Part], checksumAlgorithm: String? = nil) {
        self.parts = parts
        self.checksumAlgorithm = checksumAlgorithm
    }
}

/// What the server said it stored for a `PutObject` or `UploadPart`.
public struct S3Stored: Sendable, Equatable {
    /// The ETag, quotes removed (the body's MD5 in hex for unencrypted uploads on S3).
    public var etag: String
    /// The `x-amz-checksum-sha256` the server answered with (it verified the body against the one sent), or `nil`.
    public var checksumSHA256: String?

    /// What was stored: `etag` unquoted, `checksumSHA256` in base64 as the server echoed it (or `nil`).
    public init(etag: String, checksumSHA256: String? = nil) {
        self.etag = etag
        self.checksumSHA256 = checksumSHA256
    }

    init(_ response: HTTPResponse) {
        self.init(
            etag: S3Client.unquoted(response.headers["ETag"] ?? ""),
            checksumSHA256: response.headers[S3Client.checksumHeader])
    }
}

/// A part of a multipart upload as the server lists it.
public struct S3Part: Sendable, Equatable {
    /// 1 … 10 000.
    public var number: Int
    /// The server's ETag, quotes removed (the part's MD5 in hex for unencrypted uploads).
    public var etag: String
    /// Size in bytes.
    public var size: Int64
    /// The part's SHA-256 in base64 as the server verified it (`ChecksumSHA256`), for uploads created with the
    /// SHA-256 checksum; `nil` otherwise.
    public var checksumSHA256: String?

    public init(number: Int, etag: String, size: Int64, checksumSHA256: String? = nil) {
        self.number = number
        self.etag = etag
        self.checksumSHA256 = checksumSHA256
        self.size = size
    }
}

/// A multipart upload in progress as `ListMultipartUploads` lists it.
public struct S3MultipartUpload: Sendable, Equatable {
    /// The object key.
    public var key: String
    /// The UploadId.
    public var uploadID: String
    /// When the server created it (Unix seconds, the server's clock), if it said.
    public var initiated: Int64?
    /// The checksum algorithm it was created with (`SHA256`, `CRC32`, …), if the server said.
    public var checksumAlgorithm: String?

    public init(key: String, uploadID: String, initiated: Int64?, checksumAlgorithm: String? = nil) {
        self.key = key
        self.uploadID = uploadID
        self.initiated = initiated
        self.checksumAlgorithm = checksumAlgorithm
    }
}

/// The S3 requests an upload needs (https://docs.aws.amazon.com/AmazonS3/latest/API/), signed with SigV4, on the
/// daemon's `HTTPClient` (the loop's libcurl multi handle). Each call is one request: retries are the caller's.
///
/// Every request carries `x-amz-content-sha256` (the body's SHA-256, part of the signature) and, for data,
/// either `x-amz-checksum-sha256` or `Content-MD5` (`S3Checksum`), which the server checks before it stores anything.
@LoopActor
public struct S3Client {
    /// The HTTP client (shared).
    public let http: HTTPClient
    /// Endpoint, region, addressing, credentials.
    public let settings: S3Settings
    /// The bucket.
    public let bucket: String
    /// Upper bound on the upload rate per request in bytes/s, or `nil`.
    public var maxSendBytesPerSecond: Int64?
    /// Time allowed for a request without a body, in milliseconds.
    public var requestTimeoutMilliseconds = 30_000
    /// A request is aborted when no byte moved for this many seconds (a silent network). Default 60.
    public var stallTimeoutSeconds = 60
    /// Time allowed to connect (TCP and TLS), in milliseconds. Default 10 000.
    public var connectTimeoutMilliseconds = 10_000

    public init(http: HTTPClient, settings: S3Settings, bucket: String) {
        self.http = http
        self.settings = settings
        self.bucket = bucket
    }


    private var now: Int64 { Int64(time(nil)) }

    /// Sends one signed request and returns the response if its status is 2xx.
    /// - Throws: `S3Error` for an error status or a failed transfer; `HTTPError` `.cancelled` passes through as
    ///   `S3Error` `s3_unavailable` only when not cancelled by the caller (check `Task.isCancelled`).
    func send(
        _ method: String, key: String, query: [(String, String)] = [], headers extra: HTTPHeaders = [:],
        body: [UInt8] = [], payloadHash: String? = nil, what: String,
        onSendProgress: ((Int64) -> Void)? = nil
    ) async throws(S3Error) -> HTTPResponse {
        let (url, host, path) = settings.objectURL(bucket: bucket, key: key)
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: host)
        for field in extra { headers.add(name: field.name, value: field.value) }
        let signer = S3Signer(credentials: settings.credentials, region: settings.region)
        let time = now
        signer.sign(
            method: method, path: path, query: query, headers: &headers,
            payloadHash: payloadHash ?? S3Signer.hexSHA256(body), time: time)
        let queryString = S3Signer.canonicalQuery(query)
        let request = HTTPRequest(
            method: method, url: queryString.isEmpty ? url : url + "?" + queryString, headers: headers, body: body,
            maxSendBytesPerSecond: maxSendBytesPerSecond, connectTimeoutMilliseconds: connectTimeoutMilliseconds,
            timeoutMilliseconds: body.isEmpty ? requestTimeoutMilliseconds : nil, stallTimeoutSeconds: stallTimeoutSeconds)
        let response: HTTPResponse
        do {
            response = try await http.perform(request, onSendProgress: onSendProgress)
        } catch {
            throw S3Error.from(transport: error, what: what)
        }
        guard (200..<300).contains(response.status) else {
            throw S3Error.from(response: response, what: what, bucket: bucket, now: time)
        }
        return response
    }

    /// `PUT` of a whole object (files smaller than a part).
    /// - Parameters:
    ///   - md5: the body's MD5, sent as `Content-MD5` (which the server checks), or `nil`.
    ///   - sha256Hex: the body's SHA-256 in hex, the signed payload hash.
    ///   - checksumSHA256: the body's SHA-256 in base64, sent as `x-amz-checksum-sha256` (S3 verifies it and keeps
    ///     it with the object), or `nil`.
    /// - Returns: what the server says it stored.
    public func putObject(
        key: String, body: [UInt8], md5: [UInt8]?, sha256Hex: String, checksumSHA256: String? = nil,
        contentType: String, onSendProgress: ((Int64) -> Void)? = nil
    ) async throws(S3Error) -> S3Stored {
        var headers: HTTPHeaders = ["Content-Type": contentType]
        Self.addDigests(md5: md5, checksumSHA256: checksumSHA256, to: &headers)
        let response = try await send(
            "PUT", key: key, headers: headers, body: body, payloadHash: sha256Hex,
            what: "PUT \(key)", onSendProgress: onSendProgress)
        return S3Stored(response)
    }

    /// `CreateMultipartUpload` (`POST ?uploads`).
    /// - Parameters:
    ///   - checksumSHA256: whether the upload uses the SHA-256 checksum (`x-amz-checksum-algorithm: SHA256`):
    ///     then every part must carry its `x-amz-checksum-sha256` and the Complete must list them
    ///     (https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html).
    /// - Returns: the UploadId.
    public func createMultipartUpload(key: String, contentType: String, checksumSHA256: Bool = false)
        async throws(S3Error) -> String
    {
        var headers: HTTPHeaders = ["Content-Type": contentType]
        if checksumSHA256 { headers.add(name: "x-amz-checksum-algorithm", value: "SHA256") }
        let response = try await send(
            "POST", key: key, query: [("uploads", "")], headers: headers,
            what: "CreateMultipartUpload \(key)")
        guard let id = S3XML.first("UploadId", in: String(decoding: response.body, as: UTF8.self)), !id.isEmpty else {
            throw S3Error(code: .protocolError, message: "CreateMultipartUpload \(key): the answer has no UploadId")
        }
        return id
    }

    /// `UploadPart` (`PUT ?partNumber=N&uploadId=…`).
    /// - Parameters:
    ///   - md5: the part's MD5 (`Content-MD5`), or `nil`.
    ///   - checksumSHA256: the part's SHA-256 in base64 (`x-amz-checksum-sha256`), for an upload created with
    ///     the SHA-256 checksum; `nil` otherwise.
    /// - Returns: what the server says it stored.
    public func uploadPart(
        key: String, uploadID: String, number: Int, body: [UInt8], md5: [UInt8]?, sha256Hex: String,
        checksumSHA256: String? = nil, onSendProgress: ((Int64) -> Void)? = nil
    ) async throws(S3Error) -> S3Stored {
        var headers = HTTPHeaders()
        Self.addDigests(md5: md5, checksumSHA256: checksumSHA256, to: &headers)
        let response = try await send(
            "PUT", key: key, query: [("partNumber", String(number)), ("uploadId", uploadID)],
            headers: headers, body: body, payloadHash: sha256Hex,
            what: "UploadPart \(number) of \(key)", onSendProgress: onSendProgress)
        return S3Stored(response)
    }

    /// `Content-MD5`, and `x-amz-checksum-sha256` with `x-amz-sdk-checksum-algorithm: SHA256` (the SDKs send the
    /// two together; servers that emulate S3, moto among them, echo the checksum only then).
    private static func addDigests(md5: [UInt8]?, checksumSHA256: String?, to headers: inout HTTPHeaders) {
        if let md5 { headers.add(name: "Content-MD5", value: Base64.encode(md5)) }
        if let checksumSHA256 {
            headers.add(name: checksumHeader, value: checksumSHA256)
            headers.add(name: "x-amz-sdk-checksum-algorithm", value: "SHA256")
        }
    }

    /// `ListParts`, every page (following `NextPartNumberMarker` while `IsTruncated`).
    /// - Returns: the parts by number, and the checksum algorithm the upload was created with (`ChecksumAlgorithm`,
    ///   e.g. `SHA256`) when the server gives it.
    /// - Throws: `no_such_upload` when the upload is gone; `s3_protocol_error` for a page that does not advance.
    public func listParts(key: String, uploadID: String) async throws(S3Error) -> S3PartListing {
        var parts: [Int: S3Part] = [:]
        var algorithm: String?
        var marker: String?
        while true {
            var query = [("uploadId", uploadID)]
            if let marker { query.append(("part-number-marker", marker)) }
            let response = try await send("GET", key: key, query: query, what: "ListParts \(key)")
            let xml = String(decoding: response.body, as: UTF8.self)
            // The upload's own member comes before the first <Part> (a part may carry one of its own).
            let head = xml.range(of: "<Part>").map { String(xml[..<$0.lowerBound]) } ?? xml
            if algorithm == nil, let named = S3XML.first("ChecksumAlgorithm", in: head), !named.isEmpty { algorithm = named }
            for block in S3XML.blocks("Part", in: xml) {
                guard let number = S3XML.all("PartNumber", in: block).first.flatMap({ Int($0) }),
                    let size = S3XML.all("Size", in: block).first.flatMap({ Int64($0) })
                else { continue }
                let etag = Self.unquoted(S3XML.all("ETag", in: block).first ?? "")
                let checksum = S3XML.all("ChecksumSHA256", in: block).first
                parts[number] = S3Part(number: number, etag: etag, size: size, checksumSHA256: checksum)
            }
            guard S3XML.first("IsTruncated", in: xml) == "true" else {
                return S3PartListing(parts: parts, checksumAlgorithm: algorithm)
            }
            guard let next = S3XML.first("NextPartNumberMarker", in: xml), next != marker else {
                throw S3Error(
                    code: .protocolError, message: "ListParts \(key): a truncated page without a new NextPartNumberMarker")
            }
            marker = next
        }
    }

    /// `ListMultipartUploads` (`GET /?uploads&prefix=…` on the bucket), every page (following `NextKeyMarker` and
    /// `NextUploadIdMarker` while `IsTruncated`; S3 returns at most 1 000 uploads a page).
    /// - Returns: the uploads in progress whose key starts with `prefix`, in the server's order.
    /// - Throws: `S3Error`; `s3_protocol_error` for a truncated page whose markers do not advance.
    public func listMultipartUploads(prefix: String) async throws(S3Error) -> [S3MultipartUpload] {
        var uploads: [S3MultipartUpload] = []
        var markers: (key: String, uploadID: String)?
        while true {
            var query = [("uploads", ""), ("prefix", prefix)]
            if let markers { query += [("key-marker", markers.key), ("upload-id-marker", markers.uploadID)] }
            let response = try await send("GET", key: "", query: query, what: "ListMultipartUploads \(prefix)")
            let xml = String(decoding: response.body, as: UTF8.self)
            for block in S3XML.blocks("Upload", in: xml) {
                guard let key = S3XML.all("Key", in: block).first, let id = S3XML.all("UploadId", in: block).first
                else { continue }
                let initiated = S3XML.all("Initiated", in: block).first.flatMap(S3Error.parseISO8601)
                let algorithm = S3XML.all("ChecksumAlgorithm", in: block).first.flatMap { $0.isEmpty ? nil : $0 }
                uploads.append(S3MultipartUpload(key: key, uploadID: id, initiated: initiated, checksumAlgorithm: algorithm))
            }
            guard S3XML.first("IsTruncated", in: xml) == "true" else { return uploads }
            let next = (S3XML.first("NextKeyMarker", in: xml) ?? "", S3XML.first("NextUploadIdMarker", in: xml) ?? "")
            guard !next.0.isEmpty, next.0 != markers?.key || next.1 != markers?.uploadID else {
                throw S3Error(
                    code: .protocolError,
                    message: "ListMultipartUploads \(prefix): a truncated page without new NextKeyMarker/NextUploadIdMarker")
            }
            markers = (next.0, next.1)
        }
    }

    /// `CompleteMultipartUpload` with `parts` in order (1…N, each once), each with its `ChecksumSHA256` (base64)
    /// when the upload was created with the SHA-256 checksum.
    /// - Returns: the object's ETag.
    /// - Throws: also for an `<Error>` in a `200` answer (S3 reports late failures that way).
    public func completeMultipartUpload(
        key: String, uploadID: String, parts: [(number: Int, etag: String, checksumSHA256: String?)]
    ) async throws(S3Error) -> String {
        var xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        for part in parts {
            xml += "<Part><PartNumber>\(part.number)</PartNumber><ETag>\"\(S3XML.escape(part.etag))\"</ETag>"
            if let checksum = part.checksumSHA256 { xml += "<ChecksumSHA256>\(S3XML.escape(checksum))</ChecksumSHA256>" }
            xml += "</Part>"
        }
        xml += "</CompleteMultipartUpload>"
        let body = Array(xml.utf8)
        let md5 = TusChecksumAlgorithm.md5.digest(body)
        let response = try await send(
            "POST", key: key, query: [("uploadId", uploadID)],
            headers: ["Content-Type": "application/xml", "Content-MD5": Base64.encode(md5)], body: body,
            what: "CompleteMultipartUpload \(key)")
        let answer = String(decoding: response.body, as: UTF8.self)
        if answer.contains("<Error>") {
            throw S3Error.from(
                response: HTTPResponse(status: 500, headers: response.headers, body: response.body),
                what: "CompleteMultipartUpload \(key)", bucket: bucket, now: now)
        }
        return Self.unquoted(S3XML.first("ETag", in: answer) ?? "")
    }

    /// `AbortMultipartUpload` (`DELETE ?uploadId=…`). A `NoSuchUpload` answer counts as done.
    public func abortMultipartUpload(key: String, uploadID: String) async throws(S3Error) {
        do {
            _ = try await send("DELETE", key: key, query: [("uploadId", uploadID)], what: "AbortMultipartUpload \(key)")
        } catch let error where error.code == .noSuchUpload {
            return
        }
    }

    /// `HeadObject`: the object's size in bytes.
    public func objectSize(key: String) async throws(S3Error) -> Int64 {
        let response = try await send("HEAD", key: key, what: "HEAD \(key)")
        guard let length = response.headers["Content-Length"].flatMap({ Int64($0) }) else {
            throw S3Error(code: .protocolError, message: "HEAD \(key): no Content-Length")
        }
        return length
    }

    /// The header of a body's SHA-256 checksum, in base64, which S3 verifies before it stores the body.
    nonisolated static let checksumHeader = "x-amz-checksum-sha256"

    /// `"abc"` → `abc`.
    nonisolated static func unquoted(_ etag: String) -> String {
        var text = Substring(etag)
        if text.hasPrefix("W/") { text = text.dropFirst(2) }
        if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 { text = text.dropFirst().dropLast() }
        return String(text)
    }
}
