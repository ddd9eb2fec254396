import CCurl

/// Why an HTTP transfer did not produce a response. HTTP error statuses (4xx, 5xx) are responses, not errors.
public struct HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The stable kind of failure, for callers to decide on retries.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        private enum Code: String { case cancelled, connectionFailed, dns, tls, timedOut, held, other }
        private let code: Code

        /// The task was cancelled or the client was closed; the transfer was aborted.
        public static let cancelled = Kind(code: .cancelled)
        /// The connection was refused, reset or closed early.
        public static let connectionFailed = Kind(code: .connectionFailed)
        /// The host name could not be resolved.
        public static let dns = Kind(code: .dns)
        /// The TLS handshake or certificate verification failed.
        public static let tls = Kind(code: .tls)
        /// A connect, total or stall timeout elapsed.
        public static let timedOut = Kind(code: .timedOut)
        /// Not sent: the server's origin answered `429 Too Many Requests` and its `Retry-After` has not passed
        /// (`HTTPClient`'s per-origin hold). `retryAfterSeconds` says how long is left.
        public static let held = Kind(code: .held)
        /// Anything else (a bad URL, an option curl rejected, out of memory).
        public static let other = Kind(code: .other)

        /// The stable name: `cancelled`, `connectionFailed`, `dns`, `tls`, `timedOut`, `held` or `other`.
        public var description: String { code.rawValue }
    }

    /// The kind of failure.
    public var kind: Kind
    /// curl's detailed message (from `CURLOPT_ERRORBUFFER`, else `curl_easy_strerror`), or the client's own.
    public var message: String
    /// curl's result code (`CURLcode`), if curl reported the failure.
    public var curlCode: Int32?
    /// Bytes of the request body sent on the connection before it failed (curl's `CURLINFO_SIZE_UPLOAD_T`); 0
    /// when none were, or the failure came before the transfer started.
    public var bytesSent: Int64 = 0
    /// For `.held`: seconds until the hold on the origin ends.
    public var retryAfterSeconds: Double?

    public init(kind: Kind, message: String, curlCode: Int32? = nil, retryAfterSeconds: Double? = nil) {
        self.kind = kind
        self.message = message
        self.curlCode = curlCode
        self.retryAfterSeconds = retryAfterSeconds
    }

    public var description: String {
        curlCode.map { "\(kind): \(message) (curl \($0))" } ?? "\(kind): \(message)"
    }

    /// The error for a failed `CURLcode`.
    init(curl code: CURLcode, detail: String) {
        let message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        self.init(kind: Self.kind(of: code), message: message, curlCode: Int32(bitPattern: code.rawValue))
    }

    static func kind(of code: CURLcode) -> Kind {
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .dns
        case CURLE_COULDNT_CONNECT, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE,
            CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_HTTP3, CURLE_WEIRD_SERVER_REPLY:
            return .connectionFailed
        case CURLE_OPERATION_TIMEDOUT:
            return .timedOut
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_CRL_BADFILE, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_ENGINE_NOTFOUND,
            CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_CLIENTCERT:
            return .tls
        case CURLE_ABORTED_BY_CALLBACK:
            return .cancelled
        default:
            return .other
        }
    }
}
