import TrailbookProtocol

/// What `WebApp` answers: a whole body, or an event stream that `WebServer` pulls from while the tab is open.
enum WebResponse {
    /// A status, extra header fields (beyond `WebHeaders.common`) and a body.
    case whole(status: Int, headers: [(String, String)], body: [UInt8])
    /// `200` with `text/event-stream`, fed by the stream until the client goes.
    case events(JobEventStream)

    /// A JSON body with `status`.
    static func json(_ status: Int, _ value: JSONValue) -> WebResponse {
        .whole(
            status: status, headers: [("Content-Type", "application/json; charset=utf-8")],
            body: JSONCoding.encode(value))
    }

    /// An error: `{"error": {"code", "message"}}` with `status`. `message` says what went wrong and what to do.
    static func error(_ status: Int, code: String, _ message: String) -> WebResponse {
        json(status, ["error": ["code": .string(code), "message": .string(URLRedaction.text(message))]])
    }

    /// Plain text, for a person who opened a URL by hand (a refused page, say).
    static func text(_ status: Int, _ text: String) -> WebResponse {
        .whole(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Array(text.utf8))
    }
}

/// The header fields every response carries: the page may run only its own script and style, be framed by no one,
/// be sniffed as nothing but what it says, send no referrer, and be stored in no cache.
enum WebHeaders {
    /// The Content-Security-Policy: no inline script or style, nothing from another origin.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        + "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    /// The fields, in order.
    static let common: [(String, String)] = [
        ("Content-Security-Policy", contentSecurityPolicy),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
        ("Cache-Control", "no-store"),
    ]
}
