import TrailbookHTTP

/// Why a tus request failed, with a stable machine code for the upload job's `error.code`.
///
/// Mapping (tus 1.0, https://tus.io/protocols/resumable-upload): 409 → `offset_mismatch`; 404 and 410 → `gone`;
/// 460 → `checksum_mismatch`; 413 or a length above `Tus-Max-Size` → `too_large`; 401 and 403 → `unauthorized`;
/// 5xx, 423 (locked), 429 and transport failures (reset, refused, DNS, TLS, timeout) → `retryable`; a cancelled
/// task → `cancelled`; any other status or a malformed response → `protocol_error`.
public struct TusError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable error code.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Raw: String {
            case offsetMismatch = "offset_mismatch", gone, checksumMismatch = "checksum_mismatch"
            case tooLarge = "too_large", unauthorized, retryable, cancelled, protocolError = "protocol_error"
            case requestCutOff = "request_cut_off"
        }
        private let raw: Raw

        /// 409: the `Upload-Offset` sent is not the server's offset. Ask `HEAD` and continue from there.
        public static let offsetMismatch = Code(raw: .offsetMismatch)
        /// 404 or 410: the upload does not exist (any more), for example it expired or was terminated.
        public static let gone = Code(raw: .gone)
        /// 460: the chunk's `Upload-Checksum` did not match what the server received.
        public static let checksumMismatch = Code(raw: .checksumMismatch)
        /// 413, or the file is larger than the server's `Tus-Max-Size`.
        public static let tooLarge = Code(raw: .tooLarge)
        /// 401 or 403: credentials missing or refused.
        public static let unauthorized = Code(raw: .unauthorized)
        /// A 5xx, 423 or 429 status or a transport failure: worth retrying after a pause.
        public static let retryable = Code(raw: .retryable)
        /// The task was cancelled and the request aborted.
        public static let cancelled = Code(raw: .cancelled)
        /// An unexpected status or a response missing a required header.
        public static let protocolError = Code(raw: .protocolError)
        /// `PATCH`es kept being cut off mid-body with nothing reaching the server, down to the smallest chunk
        /// (`TusChunkSizer`): something in between (a proxy or gateway) limits request size.
        public static let requestCutOff = Code(raw: .requestCutOff)

        /// The code as shown in `--json` output, for example `too_large`.
        public var description: String { raw.rawValue }
    }

    /// The stable code.
    public var code: Code
    /// The HTTP status, if the server answered.
    public var status: Int?
    /// The transport failure, if the server did not answer.
    public var transport: HTTPError?
    /// A sentence for people.
    public var message: String
    /// For a `PATCH`: bytes of its body handed to the transport before the answer or the failure; `nil` for
    /// other requests.
    public var bytesSent: Int64?
    /// Whether the connection broke while the body of a `PATCH` was going out (some bytes sent, no answer): a
    /// reset while sending, not a server that could not be reached.
    public var resetWhileSending: Bool { transport != nil && code == .retryable && (bytesSent ?? 0) > 0 }
    /// How long the server asked to wait before trying again, in milliseconds: its `Retry-After` on a 429 or 503,
    /// or what is left of a hold on the host after a 429 (`HTTPError.Kind.held`); `nil` if it did not say.
    public var retryAfterMilliseconds: Int?

    public init(
        code: Code, status: Int? = nil, transport: HTTPError? = nil, message: String, retryAfterMilliseconds: Int? = nil
    ) {
        self.code = code
        self.status = status
        self.transport = transport
        self.message = message
        self.retryAfterMilliseconds = retryAfterMilliseconds
    }

    /// Whether retrying the same request later may succeed.
    public var isRetryable: Bool { code == .retryable }

    public var description: String {
        var text = "\(code): \(message)"
        if let status { text += " (HTTP \(status))" }
        return text
    }

    /// The error for a response with an unexpected `status` to `operation` (for example "PATCH").
    public init(status: Int, operation: String) {
        let code: Code
        switch status {
        case 409: code = .offsetMismatch
        case 404, 410: code = .gone
        case 460: code = .checksumMismatch
        case 413: code = .tooLarge
        case 401, 403: code = .unauthorized
        case 423, 429, 500...599: code = .retryable
        default: code = .protocolError
        }
        self.init(code: code, status: status, message: "\(operation) answered \(status)")
    }

    /// The error for a transport failure of `operation` (a request held after a 429 is retryable, after the hold).
    public init(transport error: HTTPError, operation: String) {
        self.init(
            code: error.kind == .cancelled ? .cancelled : .retryable, transport: error,
            message: "\(operation) failed: \(error)",
            retryAfterMilliseconds: error.retryAfterSeconds.map(Self.milliseconds))
    }

    /// The error for `response`, an unexpected answer to `operation`, with its `Retry-After` (on 429 and 503).
    /// - Parameter now: seconds since the Unix epoch, for an HTTP-date `Retry-After`.
    public init(response: HTTPResponse, operation: String, now: Double) {
        self.init(status: response.status, operation: operation)
        if response.status == 429 || response.status == 503 {
            retryAfterMilliseconds = response.retryAfterSeconds(now: now).map(Self.milliseconds)
        }
    }

    private static func milliseconds(_ seconds: Double) -> Int { Int(min(seconds, 1e9) * 1000 + 0.999) }
}
