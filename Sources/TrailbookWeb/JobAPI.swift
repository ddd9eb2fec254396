import TrailbookClient
import TrailbookProtocol

/// The page's JSON API over the daemon's control socket: one connection per request, opened and closed here, so
/// the daemon sees a client like any other.
struct JobAPI: Sendable {
    /// The daemon's socket.
    let socketPath: String
    /// `--read-only`: actions are refused (`read_only`).
    let readOnly: Bool
    /// Rows per page when the page does not say: 100.
    static let defaultPageSize = 100
    /// The most rows a page may ask for: 500.
    static let maxPageSize = 500
    /// The most jobs an action on "all that match" touches: the daemon's largest `list`, 100 000.
    static let maxMatched = 100_000

    /// `GET api/jobs?state=S,…&kind=K&before=SEQ&size=M`: one page of the jobs, newest first: the `size` newest
    /// that match the filters and were submitted before the job whose `sequence` is `SEQ` (without `before`, the
    /// newest). With it: the counts of unfinished jobs by state, the daemon's kinds, and `next_before`, the cursor of
    /// the next older page (the `sequence` of this page's last row; `null` when no older job matches). The daemon
    /// reads each page by its cursor down an index: the 1 000th page answers as fast as the first.
    func list(_ query: [String: String]) -> WebResponse {
        let size = min(max(Int(query["size"] ?? "") ?? Self.defaultPageSize, 1), Self.maxPageSize)
        var before: Int64?
        if let text = query["before"], !text.isEmpty {
            guard let cursor = Int64(text), cursor >= 1 else {
                return .error(
                    400, code: "bad_request",
                    "\"before\" must be a job's sequence (a whole number, 1 or more: the next_before of the page "
                        + "before), not \(TerminalText.escape(String(text.prefix(32))))")
            }
            before = cursor
        }
        // One more than a page: whether an older page follows.
        let limit = size + 1
        var request: [String: JSONValue] = ["op": "list", "limit": .number(Double(limit))]
        let states = (query["state"] ?? "").split(separator: ",").map(String.init)
        if !states.isEmpty { request["states"] = .array(states.map { .string($0) }) }
        if let kind = query["kind"], !kind.isEmpty { request["kind"] = .string(kind) }
        if let before { request["before"] = .number(Double(before)) }
        do {
            let client = try DaemonClient(socketPath: socketPath)
            let ping = try client.request(["op": "ping"])
            let reply = try client.request(.object(request))
            if let refused = Self.refusal(reply) { return refused }
            let jobs = reply["jobs"]?.arrayValue ?? []
            let newestFirst = Array(jobs.reversed().prefix(size))
            let nextBefore = jobs.count > size ? newestFirst.last?["sequence"] : nil
            return .json(
                200,
                [
                    "jobs": .array(newestFirst.map(WebDisplay.job)), "counts": reply["counts"] ?? [:],
                    "before": before.map { .number(Double($0)) } ?? .null, "size": .number(Double(size)),
                    "next_before": nextBefore ?? .null,
                    "kinds": ping["kinds"] ?? [], "read_only": .bool(readOnly),
                    // The feed's seq before the list was read: the counts hold every event up to it.
                    "feed_seq": ping["feed_seq"] ?? .null,
                ])
        } catch {
            return Self.unreachable(error)
        }
    }

    /// `GET api/job?id=ID`: the job as `show` gives it (secrets redacted by the daemon), escaped for the page.
    func show(_ id: String) -> WebResponse {
        guard !id.isEmpty else { return .error(400, code: "bad_request", "api/job needs ?id=JOB") }
        do {
            let reply = try DaemonClient(socketPath: socketPath).request(["op": "show", "job": .string(id)])
            if let refused = Self.refusal(reply) { return refused }
            return .json(200, ["job": WebDisplay.job(reply["job"] ?? .null)])
        } catch {
            return Self.unreachable(error)
        }
    }

    /// What an action may do.
    enum Verb: String {
        case cancel, pause, resume
    }

    /// `POST api/action` with `{"verb": "cancel"|"pause"|"resume", "jobs": [ID, …]}`, or with `"match": {"state":
    /// "S,…", "kind": "K"}` instead of `jobs` for every unfinished job the filter matches. Answers `{"done": N,
    /// "failed": [{"job", "code", "message"}, …]}`: one job refused (already ended, say) does not stop the others.
    func act(_ body: [UInt8]) -> WebResponse {
        guard !readOnly else {
            return .error(
                403, code: "read_only",
                "this page is read-only (started with --read-only); use the CLI, or start 'web' without it")
        }
        guard let request = try? JSONCoding.decode(JSONValue.self, from: body),
            let verb = request["verb"]?.stringValue.flatMap(Verb.init(rawValue:))
        else {
            return .error(
                400, code: "bad_request", "an action is {\"verb\": \"cancel\"|\"pause\"|\"resume\", \"jobs\": [ID, …]}")
        }
        do {
            let client = try DaemonClient(socketPath: socketPath)
            var ids = (request["jobs"]?.arrayValue ?? []).compactMap(\.stringValue)
            if let match = request["match"] {
                var list: [String: JSONValue] = ["op": "list", "limit": .number(Double(Self.maxMatched))]
                let states = (match["state"]?.stringValue ?? "").split(separator: ",").map {
                    JSONValue.string(String($0))
                }
                if !states.isEmpty { list["states"] = .array(states) }
                if let kind = match["kind"]?.stringValue, !kind.isEmpty { list["kind"] = .string(kind) }
                let reply = try client.request(.object(list))
                if let refused = Self.refusal(reply) { return refused }
                ids = (reply["jobs"]?.arrayValue ?? []).compactMap { job in
                    let state = job["state"]?.stringValue.flatMap(JobState.init(rawValue:))
                    return state?.isTerminal == false ? job["id"]?.stringValue : nil
                }
            }
            var done = 0
            var failed: [JSONValue] = []
            for id in ids {
                let reply = try client.request(["op": .string(verb.rawValue), "job": .string(id)])
                if reply["ok"]?.boolValue == true {
                    done += 1
                } else {
                    failed.append([
                        "job": .string(id), "code": reply["error"]?["code"] ?? "bad_reply",
                        "message": WebDisplay.escaped(reply["error"]?["message"] ?? ""),
                    ])
                }
            }
            return .json(200, ["done": .number(Double(done)), "failed": .array(failed)])
        } catch {
            return Self.unreachable(error)
        }
    }

    /// The daemon's error reply as a response (404 for `no_such_job`, 400 for other refusals), or `nil` if it
    /// answered `ok`.
    static func refusal(_ reply: JSONValue) -> WebResponse? {
        guard reply["ok"]?.boolValue != true else { return nil }
        let code = reply["error"]?["code"]?.stringValue ?? "bad_reply"
        let message = reply["error"]?["message"]?.stringValue ?? "unexpected reply from the daemon"
        return .error(code == "no_such_job" ? 404 : 400, code: code, TerminalText.escape(message))
    }

    /// 503 with why the daemon could not be asked.
    static func unreachable(_ error: any Error) -> WebResponse {
        .error(503, code: "daemon_unreachable", "\(error)")
    }
}
