/// One HTTP request as `WebApp` sees it: what the C server parsed, copied out of its buffers.
struct WebRequest: Sendable {
    /// `GET`, `POST`, … as sent.
    var method: String
    /// The path without the query, percent-decoded by the server (for example `/jobs/api/list`).
    var path: String
    /// The query's arguments, decoded; the last one wins when a name repeats.
    var query: [String: String]
    /// The header fields by lower-case name.
    var headers: [String: String]
    /// The cookies by name.
    var cookies: [String: String]
    /// The body: empty for a `GET`; at most `WebServer.maxBodyBytes`.
    var body: [UInt8]

    /// The header field `name` (any case), or `nil`.
    func header(_ name: String) -> String? { headers[name.lowercased()] }
}
