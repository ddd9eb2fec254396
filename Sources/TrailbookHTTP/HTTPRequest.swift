/// One HTTP request for `HTTPClient`: everything it sends, and the limits of the transfer.
///
/// The body is in memory. Large uploads are sent in chunks the caller reads from disk on the thread pool
/// (`EventLoop.runOnPool`), so no file I/O ever blocks the loop.
public struct HTTPRequest: Sendable {
    /// The method, for example `"GET"`, `"PATCH"`. Sent as written.
    public var method: String
    /// The absolute `http://` or `https://` URL.
    public var url: String
    /// Header fields to send. `HTTPClient` adds `Content-Length` for bodies and suppresses `Expect: 100-continue`.
    public var headers: HTTPHeaders
    /// The body in bytes; empty for none.
    public var body: [UInt8]
    /// Upper bound on the upload rate in bytes per second (`CURLOPT_MAX_SEND_SPEED_LARGE`); `nil` for no limit.
    public var maxSendBytesPerSecond: Int64?
    /// Time allowed to connect (DNS, TCP and TLS), in milliseconds. Default 10 000: a server that does not accept
    /// in 10 s is treated as down.
    public var connectTimeoutMilliseconds: Int
    /// Time allowed for the whole transfer, in milliseconds; `nil` for none. No default: a rate-limited chunk may
    /// legitimately take long; use `stallTimeoutSeconds` to catch dead transfers instead.
    public var timeoutMilliseconds: Int?
    /// Abort when no byte moved either way for this many seconds, counted from the last byte (and curl's own
    /// `CURLOPT_LOW_SPEED_TIME` at 1 byte/s, an average); fails with `HTTPError.Kind.timedOut`. Default 60.
    public var stallTimeoutSeconds: Int?
    /// A PEM file of CA certificates to verify `https` servers with (`CURLOPT_CAINFO`); `nil` for the system's.
    public var caBundlePath: String?

    /// Makes a request with the given method, URL, headers and body and default limits.
    public init(
        method: String, url: String, headers: HTTPHeaders = [:], body: [UInt8] = [],
        maxSendBytesPerSecond: Int64? = nil, connectTimeoutMilliseconds: Int = 10_000,
        timeoutMilliseconds: Int? = nil, stallTimeoutSeconds: Int? = 60, caBundlePath: String? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.maxSendBytesPerSecond = maxSendBytesPerSecond
        self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        self.timeoutMilliseconds = timeoutMilliseconds
        self.stallTimeoutSeconds = stallTimeoutSeconds
        self.caBundlePath = caBundlePath
    }
}

/// The final response to an `HTTPRequest` (interim `1xx` responses are skipped).
public struct HTTPResponse: Sendable {
    /// The status code, for example 204.
    public var status: Int
    /// The header fields of the final response; look them up case-insensitively.
    public var headers: HTTPHeaders
    /// The body; empty for `HEAD` and for responses without one.
    public var body: [UInt8]
    /// Bytes of the request body sent on the connection (curl's `CURLINFO_SIZE_UPLOAD_T`).
    public var bytesSent: Int64 = 0

    public init(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
