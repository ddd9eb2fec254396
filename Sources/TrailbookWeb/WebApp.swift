import TrailbookClient
import TrailbookProtocol

/// The page's routes, under `prefix`: the checks of `WebAccess` first, then the page, its script and style, the
/// JSON API (`JobAPI`) and the event stream (`JobEventStream`).
///
/// | path | method | what |
/// |---|---|---|
/// | `/` | GET | with `?token=`: sets the session cookie and redirects to `/`; else the page |
/// | `/app.js`, `/app.css` | GET | the page's script and style |
/// | `/api/jobs` | GET | a page of the list (`JobAPI.list`) |
/// | `/api/job` | GET | one job (`?id=`) |
/// | `/api/events` | GET | the feed as Server-Sent Events |
/// | `/api/action` | POST | cancel, pause or resume jobs (`JobAPI.act`) |
struct WebApp: Sendable {
    /// The path the page lives under: empty, or `/NAME…` without a trailing slash.
    let prefix: String
    let access: WebAccess
    let api: JobAPI
    /// The daemon's socket, for the event streams.
    let socketPath: String

    /// The answer to `request`.
    func respond(_ request: WebRequest) -> WebResponse {
        if case .refused(let why) = access.checkHost(request) { return .text(403, why + "\n") }
        guard request.path.hasPrefix(prefix + "/") || request.path == prefix else {
            return .text(404, "not here: the page is at \(prefix)/\n")
        }
        let route = request.path == prefix ? "" : String(request.path.dropFirst(prefix.count))
        if route == "" { return .whole(status: 308, headers: [("Location", prefix + "/")], body: []) }
        if route == "/", let token = request.query["token"] {
            guard access.isToken(token) else {
                return .text(403, "this token is not the one 'trailbook-jobs web' printed; open the URL it printed\n")
            }
            let cookie = "\(WebAccess.cookieName)=\(access.session); Path=\(prefix)/; HttpOnly; SameSite=Strict"
            return .whole(status: 303, headers: [("Set-Cookie", cookie), ("Location", prefix + "/")], body: [])
        }
        if case .refused(let why) = access.checkSession(request) {
            return route.hasPrefix("/api/") ? .error(403, code: "web_forbidden", why) : .text(403, why + "\n")
        }
        switch (route, request.method) {
        case ("/api/action", "POST"):
            if case .refused(let why) = access.checkAction(request) { return .error(403, code: "web_forbidden", why) }
            return api.act(request.body)
        case ("/api/action", _):
            return .error(405, code: "bad_request", "an action is a POST from the page")
        case (_, "GET"), (_, "HEAD"): break
        default:
            return .error(405, code: "bad_request", "\(request.method) is not served here; the page reads with GET")
        }
        switch route {
        case "/": return page()
        case "/app.js":
            return .whole(
                status: 200, headers: [("Content-Type", "text/javascript; charset=utf-8")],
                body: Array(WebPage.script.utf8))
        case "/app.css":
            return .whole(
                status: 200, headers: [("Content-Type", "text/css; charset=utf-8")], body: Array(WebPage.style.utf8))
        case "/api/jobs": return api.list(request.query)
        case "/api/job": return api.show(request.query["id"] ?? "")
        case "/api/events":
            let since = (request.header("last-event-id") ?? request.query["since"]).flatMap { Int64($0) }
            return .events(JobEventStream(socketPath: socketPath, since: since))
        default: return .text(404, "no such page: \(route)\n")
        }
    }

    private func page() -> WebResponse {
        let html = WebPage.html(actionToken: access.actionToken, readOnly: api.readOnly)
        return .whole(status: 200, headers: [("Content-Type", "text/html; charset=utf-8")], body: Array(html.utf8))
    }
}
