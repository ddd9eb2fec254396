#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Who may use the page. The port is open to every local user (the daemon's socket is not), so every request
/// must show it comes from the person who started `web`:
///
/// - the URL printed once holds `token`; opening it sets the `HttpOnly; SameSite=Strict` cookie `session`, which
///   every later request (the page, its script, the event stream, the API) must carry;
/// - the `Host` must be the bound address, so a page of another site whose name resolves to 127.0.0.1 (DNS
///   rebinding) is refused;
/// - an action must be a `POST` from the page itself: `Sec-Fetch-Site: same-origin` (or, from a browser that does
///   not send it, an `Origin` equal to ours) and the header `X-Trailbook-Token` equal to `actionToken`, which the page
///   carries in a `<meta>` element (the cookie alone would ride along on a cross-site form).
struct WebAccess: Sendable {
    /// Why a request is refused, or that it is let in.
    enum Verdict: Equatable, Sendable {
        case allowed
        /// 403, with what to do.
        case refused(String)
    }

    /// The secret in the printed URL: 32 random bytes, hex.
    let token: String
    /// The cookie's value: 32 other random bytes, hex.
    let session: String
    /// The header value actions carry: 32 more random bytes, hex.
    let actionToken: String
    /// The `Host` values accepted: `127.0.0.1:PORT` (and `127.0.0.1` alone on port 80).
    let hosts: Set<String>
    /// `http://127.0.0.1:PORT`: the `Origin` of our own page.
    let origin: String
    /// The cookie's name.
    static let cookieName = "trailbook_session"

    /// Fresh random secrets for a server bound to 127.0.0.1 on `port`.
    init(port: Int) {
        token = Self.randomHex()
        session = Self.randomHex()
        actionToken = Self.randomHex()
        origin = "http://127.0.0.1:\(port)"
        hosts = port == 80 ? ["127.0.0.1:80", "127.0.0.1"] : ["127.0.0.1:\(port)"]
    }

    /// 32 bytes from the system's generator (`getrandom`), as 64 hex digits.
    static func randomHex() -> String {
        var generator = SystemRandomNumberGenerator()
        var text = ""
        for _ in 0..<4 {
            let word = generator.next() as UInt64
            let digits = String(word, radix: 16)
            text += String(repeating: "0", count: 16 - digits.count) + digits
        }
        return text
    }

    /// Whether `request` names our address in `Host`.
    func checkHost(_ request: WebRequest) -> Verdict {
        guard let host = request.header("host"), hosts.contains(host) else {
            return .refused(
                "this server answers only to Host \(origin.dropFirst(7)); open the URL that 'trailbook-jobs web' printed"
            )
        }
        return .allowed
    }

    /// Whether `request` carries the session cookie.
    func checkSession(_ request: WebRequest) -> Verdict {
        guard let value = request.cookies[Self.cookieName], Self.equal(value, session) else {
            return .refused(
                "no valid session: open the URL with ?token=… that 'trailbook-jobs web' printed when it started "
                    + "(start it again for a new one)")
        }
        return .allowed
    }

    /// Whether `request` is an action from our own page (see the type's notes); the session is checked apart.
    func checkAction(_ request: WebRequest) -> Verdict {
        if let site = request.header("sec-fetch-site") {
            guard site == "same-origin" else {
                return .refused("actions come only from the page itself (Sec-Fetch-Site: \(site))")
            }
        } else {
            guard let from = request.header("origin"), from == origin else {
                return .refused("actions come only from the page itself (no Origin \(origin))")
            }
        }
        if let from = request.header("origin"), from != origin {
            return .refused("actions come only from the page itself (Origin \(from))")
        }
        guard let given = request.header("x-trailbook-token"), Self.equal(given, actionToken) else {
            return .refused("an action needs the page's token (X-Trailbook-Token): reload the page")
        }
        return .allowed
    }

    /// Whether `given` is the URL token.
    func isToken(_ given: String) -> Bool { Self.equal(given, token) }

    /// Compares in time independent of where the strings differ.
    static func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}
