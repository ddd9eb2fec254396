import TrailbookHTTP
import TrailbookLoop

/// A tus 1.0 client (https://tus.io/protocols/resumable-upload): discovery, creation, offset queries, chunk
/// uploads with optional checksums, and termination, each one HTTP request on an `HTTPClient`.
///
/// It decides nothing about retries: every failure is a `TusError` with a stable code, and the caller (the upload
/// job, helped by `TusUpload`) decides what to do next. Loop-confined like the `HTTPClient` it uses.
public final class TusClient {
    /// Settings that apply to every request.
    public struct Options: Sendable {
        /// Extra header fields sent with every request, for example `Authorization: Bearer …`.
        public var headers: HTTPHeaders
        /// A PEM CA bundle for `https` endpoints; `nil` for the system's.
        public var caBundlePath: String?
        /// Limit on the upload rate of `PATCH` bodies in bytes per second; `nil` for none.
        public var maxSendBytesPerSecond: Int64?
        /// Time allowed for requests without a large body (OPTIONS, POST, HEAD, DELETE), in milliseconds.
        /// Default 30 000.
        public var requestTimeoutMilliseconds: Int
        /// A `PATCH` is aborted when no byte moved for this many seconds. Default 60.
        public var stallTimeoutSeconds: Int
        /// Time allowed to connect (TCP and TLS), in milliseconds. Default 10 000.
        public var connectTimeoutMilliseconds: Int

        public init(
            headers: HTTPHeaders = [:], caBundlePath: String? = nil, maxSendBytesPerSecond: Int64? = nil,
            requestTimeoutMilliseconds: Int = 30_000, stallTimeoutSeconds: Int = 60,
            connectTimeoutMilliseconds: Int = 10_000
        ) {
            self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
            self.headers = headers
            self.caBundlePath = caBundlePath
            self.maxSendBytesPerSecond = maxSendBytesPerSecond
            self.requestTimeoutMilliseconds = requestTimeoutMilliseconds
            self.stallTimeoutSeconds = stallTimeoutSeconds
        }
    }

    /// The protocol version this client speaks, sent as `Tus-Resumable`.
    public static let version = "1.0.0"

    /// The HTTP client requests go through.
    public let http: HTTPClient
    /// The creation endpoint, for example `https://host/files/`.
    public let endpoint: String
    /// Settings for every request.
    public var options: Options
    /// What the last `discover()` learned; `create` refuses lengths above its `maxSize`.
    public private(set) var serverInfo: TusServerInfo?

    /// Makes a client for the tus endpoint `endpoint` (the URL uploads are created at).
    public init(http: HTTPClient, endpoint: String, options: Options = Options()) {
        self.http = http
        self.endpoint = endpoint
        self.options = options
    }

    /// Asks the server which versions, extensions, size limit and checksum algorithms it supports (`OPTIONS`).
    /// - Throws: `TusError`.
    public func discover(isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> TusServerInfo {
        let response = try await send("OPTIONS", endpoint, headers: [:], expecting: [200, 204])
        let info = TusServerInfo(headers: response.headers)
        serverInfo = info
        return info
    }

    /// Creates an upload of `length` bytes (`POST`, creation extension).
    ///
    /// - Parameters:
    ///   - length: the file's size in bytes (`Upload-Length`).
    ///   - metadata: `Upload-Metadata` pairs, for example `[("filename", "IMG_1.jpg"), ("filetype", "image/jpeg")]`;
    ///     values are base64-encoded here (their UTF-8 bytes). Keys must not contain spaces or commas.
    ///   - binaryMetadata: more pairs whose values are bytes, sent exactly (tus metadata values are base64 of
    ///     bytes): a file name that is not UTF-8 keeps its bytes.
    /// - Returns: the upload's absolute URL.
    /// - Throws: `TusError`; `too_large` without sending anything when `length` exceeds a discovered
    ///   `Tus-Max-Size`.
    public func create(
        length: Int64, metadata: [(String, String)] = [], binaryMetadata: [(String, [UInt8])] = [],
        isolation: isolated (any Actor)? = #isolation
    )
        async throws(TusError) -> TusCreatedUpload
    {
        if let max = serverInfo?.maxSize, length > max {
            throw TusError(code: .tooLarge, message: "\(length) bytes exceed the server's Tus-Max-Size of \(max)")
        }
        var headers: HTTPHeaders = ["Upload-Length": String(length)]
        let pairs = binaryMetadata + metadata.map { ($0.0, Array($0.1.utf8)) }
        if !pairs.isEmpty {
            let value = pairs.map { key, value in "\(key) \(Base64.encode(value))" }
            headers.add(name: "Upload-Metadata", value: value.joined(separator: ","))
        }
        let response = try await send("POST", endpoint, headers: headers, expecting: [201])
        guard let location = response.headers["Location"], !location.isEmpty else {
            throw TusError(code: .protocolError, status: response.status, message: "POST answered without a Location")
        }
        return TusCreatedUpload(url: Self.resolve(location, against: endpoint), expires: response.headers["Upload-Expires"])
    }

    /// Asks the server how much of the upload at `url` it has (`HEAD`).
    /// - Throws: `TusError`; `gone` for an upload that does not exist or expired.
    public func status(of url: String, isolation: isolated (any Actor)? = #isolation) async throws(TusError) -> TusUploadStatus {
        let response = try await send("HEAD", url, headers: [:], expecting: [200, 204])
        return try Self.uploadStatus(response, operation: "HEAD")
    }

    /// Sends `chunk` as the bytes at `offset` of the upload at `url` (`PATCH`).
    ///
    /// - Parameters:
    ///   - chunk: the bytes, read by the caller (on the thread pool).
    ///   - url: the upload URL.
    ///   - offset: where `chunk` starts in the file; must equal the server's offset (else `offset_mismatch`).
    ///   - checksum: when not `nil`, sends `Upload-Checksum` with the chunk's digest, computed on the thread pool.
    ///   - onSendProgress: bytes of this chunk sent so far, on the loop thread, as they go out.
    /// - Returns: the server's new offset (and expiry).
    /// - Throws: `TusError`.
    public func upload(
        _ chunk: [UInt8], to url: String, at offset: Int64, checksum: TusChecksumAlgorithm? = nil,
        onSendProgress: ((Int64) -> Void)? = nil, isolation: isolated (any Actor)? = #isolation
    ) async throws(TusError) -> TusUploadStatus {
        var headers: HTTPHeaders = [
            "Upload-Offset": String(offset), "Content-Type": "application/offset+octet-stream",
        ]
        if let checksum {
            let value: String
            do {
                value = try await http.loop.runOnPool { checksum.headerValue(for: chunk) }
            } catch {
                throw TusError(code: .cancelled, message: "checksum computation cancelled")
            }
            headers.add(name: "Upload-Checksum", value: value)
        }
        let response: HTTPResponse
        do {
            response = try await send(
                "PATCH", url, headers: headers, body: chunk, expecting: [200, 204], onSendProgress: onSendProgress)
        } catch {
            var error = error
            if error.resetWhileSending, let sent = error.bytesSent {
                error.message = "the connection was reset while sending the PATCH at offset \(offset) (\(sent) of "
                    + "\(chunk.count) bytes sent; \(error.transport.map { "\($0)" } ?? ""))"
            }
            throw error
        }
        let status = try Self.uploadStatus(response, operation: "PATCH")
        guard status.offset >= offset, status.offset <= offset + Int64(chunk.count) else {
            throw TusError(
                code: .protocolError, status: response.status,
                message: "PATCH at \(offset) of \(chunk.count) bytes answered Upload-Offset \(status.offset)")
        }
        return status
    }

    /// Asks whether the server verifies `Upload-Checksum`: a `PATCH` of no bytes at `offset` whose checksum
    /// (the `algorithm` digest of one zero byte) cannot match the empty body. A server that verifies answers 460
    /// (`checksum_mismatch`); one that ignores checksums answers 204 and stores nothing, since there is nothing.
    /// - Returns: the server's offset when it accepted the probe (it does not verify).
    /// - Throws: `TusError`; `checksum_mismatch` when the server verifies.
    public func probeChecksum(
        _ url: String, at offset: Int64, algorithm: TusChecksumAlgorithm,
        isolation: isolated (any Actor)? = #isolation
    ) async throws(TusError) -> TusUploadStatus {
        let headers: HTTPHeaders = [
            "Upload-Offset": String(offset), "Content-Type": "application/offset+octet-stream",
            "Upload-Checksum": algorithm.headerValue(for: [0]),
        ]
        let response = try await send("PATCH", url, headers: headers, body: [], expecting: [200, 204])
        return try Self.uploadStatus(response, operation: "PATCH")
    }

    /// Deletes the upload at `url` on the server (`DELETE`, termination extension). An upload already gone is
    /// not an error.
    /// - Throws: `TusError`.
    public func terminate(_ url: String, isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        do {
            _ = try await send("DELETE", url, headers: [:], expecting: [200, 204])
        } catch where error.code == .gone {
            return
        }
    }

    // MARK: plumbing

    private func send(
        _ method: String, _ url: String, headers: HTTPHeaders, body: [UInt8] = [], expecting: Set<Int>,
        onSendProgress: ((Int64) -> Void)? = nil, isolation: isolated (any Actor)? = #isolation
    ) async throws(TusError) -> HTTPResponse {
        var all = options.headers
        all.replaceOrAdd(name: "Tus-Resumable", value: Self.version)
        for (name, value) in headers { all.replaceOrAdd(name: name, value: value) }
        let isPatch = method == "PATCH"
        let request = HTTPRequest(
            method: method, url: url, headers: all, body: body,
            maxSendBytesPerSecond: isPatch ? options.maxSendBytesPerSecond : nil,
            connectTimeoutMilliseconds: options.connectTimeoutMilliseconds,
            timeoutMilliseconds: isPatch ? nil : options.requestTimeoutMilliseconds,
            stallTimeoutSeconds: options.stallTimeoutSeconds, caBundlePath: options.caBundlePath)
        let response: HTTPResponse
        do {
            response = try await http.perform(request, onSendProgress: onSendProgress)
        } catch {
            var failure = TusError(transport: error, operation: method)
            if isPatch { failure.bytesSent = error.bytesSent }
            throw failure
        }
        guard expecting.contains(response.status) else {
            var failure = TusError(response: response, operation: method, now: HTTPClock.unix())
            if isPatch { failure.bytesSent = response.bytesSent }
            throw failure
        }
        return response
    }

    private static func uploadStatus(_ response: HTTPResponse, operation: String) throws(TusError) -> TusUploadStatus {
        guard let offset = response.headers["Upload-Offset"].flatMap({ Int64($0) }), offset >= 0 else {
            throw TusError(
                code: .protocolError, status: response.status, message: "\(operation) answered without Upload-Offset")
        }
        return TusUploadStatus(
            offset: offset, length: response.headers["Upload-Length"].flatMap { Int64($0) },
            expires: response.headers["Upload-Expires"])
    }

    /// `location` made absolute against `base` (RFC 3986 §5.2, for the forms servers send: absolute URLs,
    /// absolute paths and relative paths).
    static func resolve(_ location: String, against base: String) -> String {
        if location.hasPrefix("http://") || location.hasPrefix("https://") { return location }
        let scheme = base.hasPrefix("https://") ? "https" : "http"
        guard base.hasPrefix(scheme + "://") else { return location }
        let afterScheme = base.dropFirst(scheme.count + 3)
        let authorityEnd = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        let origin = base[..<authorityEnd]
        if location.hasPrefix("//") { return scheme + ":" + location }
        if location.hasPrefix("/") { return origin + location }
        let path = base[authorityEnd...].split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let directory = path.lastIndex(of: "/").map { path[...$0] } ?? "/"
        return origin + directory + location
    }
}
