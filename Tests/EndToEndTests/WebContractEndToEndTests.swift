import Foundation
import Testing
import TrailbookProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// `trailbook-jobs web` from a plain HTTP client, against a real daemon: who gets in (token → cookie, `Host`,
/// same-origin actions), the headers every answer carries, and the event stream's ids and resumption.
@Suite(.serialized)
struct WebContractEndToEndTests {
    static func get(_ web: WebProcess, _ path: String, cookie: String? = nil, host: String? = nil, extra: String = "")
        throws -> RawHTTP.Response
    {
        var request = "GET \(path) HTTP/1.1\r\nHost: \(host ?? "127.0.0.1:\(web.port)")\r\n"
        if let cookie { request += "Cookie: \(cookie)\r\n" }
        return try RawHTTP.send(port: web.port, request + extra + "\r\n")
    }

    static func post(_ web: WebProcess, _ path: String, cookie: String?, headers: [String], body: String) throws
        -> RawHTTP.Response
    {
        var request = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(web.port)\r\nContent-Type: application/json\r\n"
        if let cookie { request += "Cookie: \(cookie)\r\n" }
        for header in headers { request += header + "\r\n" }
        request += "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        return try RawHTTP.send(port: web.port, request)
    }

    @Test func tokenCookieHostHeadersAndActions() throws {
        let harness = try DaemonHarness()
        let web = try WebProcess(harness)

        // Nothing without the session, and every answer carries the protective headers.
        let bare = try Self.get(web, "/")
        #expect(bare.status == 403)
        #expect(bare.body.contains("open the URL"))
        for response in [bare, try Self.get(web, "/api/events"), try Self.get(web, "/app.js")] {
            #expect(response.status == 403)
            #expect(response.header("Content-Security-Policy")?.contains("script-src 'self'") == true)
            #expect(response.header("Content-Security-Policy")?.contains("unsafe-inline") == false)
            #expect(response.header("X-Content-Type-Options") == "nosniff")
            #expect(response.header("Referrer-Policy") == "no-referrer")
        }
        #expect(try Self.get(web, "/?token=" + String(repeating: "0", count: 64)).status == 403)

        // The printed URL's token is traded for the cookie, and the URL loses it.
        let opened = try Self.get(web, "/?token=\(web.token)")
        #expect(opened.status == 303)
        #expect(opened.header("Location") == "/")
        let setCookie = try #require(opened.header("Set-Cookie"))
        #expect(setCookie.contains("HttpOnly"))
        #expect(setCookie.contains("SameSite=Strict"))
        #expect(setCookie.contains("Path=/"))
        #expect(!setCookie.contains(web.token))
        let cookie = String(setCookie.prefix { $0 != ";" })

        let page = try Self.get(web, "/", cookie: cookie)
        #expect(page.status == 200)
        #expect(page.header("Content-Type")?.hasPrefix("text/html") == true)
        #expect(page.body.contains("<script src=\"app.js\" defer></script>"))
        #expect(!page.body.contains("<script>"))  // no inline script
        #expect(
            try Self.get(web, "/app.js", cookie: cookie).header("Content-Type")?.hasPrefix("text/javascript") == true)

        // DNS rebinding: the right cookie under another name is refused.
        #expect(try Self.get(web, "/", cookie: cookie, host: "evil.example:\(web.port)").status == 403)
        #expect(try Self.get(web, "/", cookie: cookie, host: "localhost:\(web.port)").status == 403)
        #expect(try Self.get(web, "/api/jobs", cookie: cookie, host: "127.0.0.1:1").status == 403)

        // The list, as JSON.
        let id = try harness.submitSleep(units: 600, unitMilliseconds: 50)
        let list = try Self.get(web, "/api/jobs", cookie: cookie)
        #expect(list.status == 200)
        #expect(list.header("Content-Type")?.hasPrefix("application/json") == true)
        #expect(list.body.contains(id))
        // A cursor that is no job's sequence: what it must be.
        for bad in ["x", "0", "-3", "1.5"] {
            let refused = try Self.get(web, "/api/jobs?before=\(bad)", cookie: cookie)
            #expect(refused.status == 400, "before=\(bad)")
            #expect(refused.body.contains("must be a job's sequence"), "before=\(bad)")
        }

        // Actions: POST only, same-origin, with the page's token.
        let actionToken = try #require(page.body.firstMatch(of: /name="trailbook-token" content="([0-9a-f]{64})"/)?.1)
        let body = "{\"verb\": \"pause\", \"jobs\": [\"\(id)\"]}"
        #expect(try Self.get(web, "/api/action", cookie: cookie).status == 405)
        let crossSite = try Self.post(
            web, "/api/action", cookie: cookie,
            headers: ["Sec-Fetch-Site: cross-site", "X-Trailbook-Token: \(actionToken)"],
            body: body)
        #expect(crossSite.status == 403)
        #expect(crossSite.body.contains("web_forbidden"))
        let otherOrigin = try Self.post(
            web, "/api/action", cookie: cookie,
            headers: ["Origin: http://evil.example", "X-Trailbook-Token: \(actionToken)"],
            body: body)
        #expect(otherOrigin.status == 403)
        let noToken = try Self.post(
            web, "/api/action", cookie: cookie, headers: ["Sec-Fetch-Site: same-origin"], body: body)
        #expect(noToken.status == 403)
        let noCookie = try Self.post(
            web, "/api/action", cookie: nil,
            headers: ["Sec-Fetch-Site: same-origin", "X-Trailbook-Token: \(actionToken)"],
            body: body)
        #expect(noCookie.status == 403)
        #expect(try harness.show(id)["state"]?.stringValue != "paused")

        let paused = try Self.post(
            web, "/api/action", cookie: cookie,
            headers: ["Sec-Fetch-Site: same-origin", "Origin: \(web.origin)", "X-Trailbook-Token: \(actionToken)"],
            body: body)
        #expect(paused.status == 200)
        #expect(paused.body.contains("\"done\":1"))
        _ = try harness.waitForState(id, "paused")
        // All that match a filter: the two other running sleep jobs are paused, the paused one is left alone.
        let others = [
            try harness.submitSleep(units: 600, unitMilliseconds: 50),
            try harness.submitSleep(units: 600, unitMilliseconds: 50),
        ]
        for other in others { _ = try harness.waitForState(other, "running") }
        let matched = try Self.post(
            web, "/api/action", cookie: cookie,
            headers: ["Sec-Fetch-Site: same-origin", "X-Trailbook-Token: \(actionToken)"],
            body: "{\"verb\": \"pause\", \"match\": {\"state\": \"running\", \"kind\": \"sleep\"}}")
        #expect(matched.status == 200)
        #expect(matched.body.contains("\"done\":2"))
        for other in others { _ = try harness.waitForState(other, "paused") }
        // A bad body is a clear 400, not a crash.
        let bad = try Self.post(
            web, "/api/action", cookie: cookie,
            headers: ["Sec-Fetch-Site: same-origin", "X-Trailbook-Token: \(actionToken)"],
            body: "{\"verb\": \"explode\"}")
        #expect(bad.status == 400)
        #expect(bad.body.contains("bad_request"))
        // The secret never reaches the log, with --debug or without.
        #expect(!web.log().contains(web.token))
    }

    /// The pages go back by the cursor through every job, each once, newest first; the daemon's `list` takes the
    /// cursor (`before`) and refuses a bad one.
    @Test func pagesReachEveryJobByTheCursor() throws {
        let harness = try DaemonHarness()
        let web = try WebProcess(harness)
        let cookie = try web.sessionCookie()
        // 3 000 jobs that wait for hours: a few run, the rest stay queued; their order is their submission's.
        var submitted: [String] = []
        for _ in 0..<3 {
            let jobs: [JSONValue] = (0..<1000).map { _ in
                ["kind": "sleep", "params": ["units": 1000, "unit_ms": 10_000]]
            }
            let reply = try harness.request(["op": "submit_batch", "jobs": .array(jobs)])
            #expect(reply["ok"]?.boolValue == true)
            submitted += (reply["ids"]?.arrayValue ?? []).compactMap(\.stringValue)
        }
        #expect(submitted.count == 3000)

        func pages(_ filter: String) throws -> (ids: [String], sequences: [Int64], pages: Int) {
            var ids: [String] = []
            var sequences: [Int64] = []
            var before: Int64?
            var count = 0
            repeat {
                let path = "/api/jobs?size=250" + filter + (before.map { "&before=\($0)" } ?? "")
                let response = try Self.get(web, path, cookie: cookie)
                #expect(response.status == 200, "\(path): \(response.body)")
                let page = try JSONCoding.decode(JSONValue.self, from: Array(response.body.utf8))
                let jobs = page["jobs"]?.arrayValue ?? []
                ids += jobs.compactMap { $0["id"]?.stringValue }
                sequences += jobs.compactMap { $0["sequence"]?.intValue }
                before = page["next_before"]?.intValue
                if before != nil { #expect(before == sequences.last, "the cursor is the last row's sequence") }
                count += 1
            } while before != nil && count < 100
            return (ids, sequences, count)
        }
        let all = try pages("")
        #expect(all.pages == 12)
        #expect(all.ids == submitted.reversed(), "every job once, newest first")
        #expect(all.sequences.count == 3000 && all.sequences == all.sequences.sorted(by: >))
        // With a filter, the cursor pages through what matches: the queued ones, newest first.
        let queued = try pages("&state=queued&kind=sleep")
        #expect(queued.ids.count > 2900 && Set(queued.ids).count == queued.ids.count)
        #expect(queued.sequences == queued.sequences.sorted(by: >))
        #expect(queued.ids == submitted.reversed().filter(Set(queued.ids).contains))

        // The control protocol's cursor: the newest `limit` before it, oldest first; a bad one refused plainly.
        let middle = all.sequences[1500]
        let listed = try harness.request(["op": "list", "limit": 10, "before": .number(Double(middle))])
        let listedSequences = (listed["jobs"]?.arrayValue ?? []).compactMap { $0["sequence"]?.intValue }
        #expect(listedSequences == Array(all.sequences[1501...1510].reversed()))
        for bad: JSONValue in [0, -1, "7", 2.5] {
            let refused = try harness.request(["op": "list", "before": bad])
            #expect(refused["error"]?["code"]?.stringValue == "bad_request", "before: \(bad)")
            #expect(refused["error"]?["message"]?.stringValue?.contains("\"before\"") == true, "before: \(bad)")
        }
    }

    @Test func badOptionsAreUsageErrors() throws {
        let harness = try DaemonHarness()
        let badPrefix = try harness.cli(["web", "--prefix", "jobs/../x"])
        #expect(badPrefix.status == 2)
        #expect(badPrefix.stderr.contains("--prefix must be a path like /jobs"))
        let web = try WebProcess(harness)
        let taken = try harness.cli(["web", "--port", String(web.port)])
        #expect(taken.status == 2)
        #expect(taken.stderr.contains("cannot listen on 127.0.0.1:\(web.port)"))
        #expect(taken.stderr.contains("choose another --port"))
    }

    @Test func eventIdsAndResumeWithLastEventID() throws {
        let harness = try DaemonHarness()
        let web = try WebProcess(harness)
        let cookie = try web.sessionCookie()

        let stream = try RawHTTP(
            port: web.port, "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:\(web.port)\r\nCookie: \(cookie)\r\n\r\n")
        let head = try stream.head()
        #expect(head.status == 200)
        #expect(head.header("Content-Type")?.hasPrefix("text/event-stream") == true)
        #expect(head.header("Cache-Control") == "no-store")
        let hello = try #require(stream.line(startingWith: "id: "))
        let start = try #require(Int64(hello.dropFirst(4)))

        let id = try harness.submitSleep(units: 20, unitMilliseconds: 20)
        var seqs: [Int64] = []
        var sawEnd = false
        while !sawEnd, let line = stream.line(startingWith: "id: ") {
            seqs.append(try #require(Int64(line.dropFirst(4))))
            let data = try #require(stream.line(startingWith: "data: "))
            #expect(data.contains(id))
            sawEnd = data.contains("\"to\":\"succeeded\"")
        }
        #expect(sawEnd)
        #expect(seqs.count >= 3)
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
        #expect(seqs.first! > start)

        // A browser that comes back with Last-Event-ID gets exactly what followed it.
        let resumed = try RawHTTP(
            port: web.port,
            "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:\(web.port)\r\nCookie: \(cookie)\r\nLast-Event-ID: \(seqs[0])\r\n\r\n"
        )
        #expect(try resumed.head().status == 200)
        var again: [Int64] = []
        while again.count < seqs.count - 1, let line = resumed.line(startingWith: "id: ") {
            again.append(try #require(Int64(line.dropFirst(4))))
        }
        #expect(again == Array(seqs.dropFirst()))
    }

    @Test func prefixReadOnlyAndDaemonDown() throws {
        let harness = try DaemonHarness()
        let web = try WebProcess(harness, arguments: ["--read-only"], prefix: "/tools/jobs")
        let opened = try Self.get(web, "/tools/jobs/?token=\(web.token)")
        #expect(opened.status == 303)
        #expect(opened.header("Location") == "/tools/jobs/")
        #expect(opened.header("Set-Cookie")?.contains("Path=/tools/jobs/") == true)
        let cookie = try web.sessionCookie()
        #expect(try Self.get(web, "/tools/jobs/", cookie: cookie).status == 200)
        #expect(try Self.get(web, "/tools/jobs", cookie: cookie).status == 308)
        #expect(try Self.get(web, "/", cookie: cookie).status == 404)

        let page = try Self.get(web, "/tools/jobs/", cookie: cookie)
        #expect(page.body.contains("name=\"trailbook-read-only\" content=\"true\""))
        let actionToken = try #require(page.body.firstMatch(of: /name="trailbook-token" content="([0-9a-f]{64})"/)?.1)
        let id = try harness.submitSleep(units: 600, unitMilliseconds: 50)
        let refused = try Self.post(
            web, "/tools/jobs/api/action", cookie: cookie,
            headers: ["Sec-Fetch-Site: same-origin", "X-Trailbook-Token: \(actionToken)"],
            body: "{\"verb\": \"cancel\", \"jobs\": [\"\(id)\"]}")
        #expect(refused.status == 403)
        #expect(refused.body.contains("read_only"))
        #expect(try harness.show(id)["state"]?.stringValue != "cancelled")

        // The daemon goes away: the API says so in words, the stream says it is down, then catches up.
        let stream = try RawHTTP(
            port: web.port,
            "GET /tools/jobs/api/events HTTP/1.1\r\nHost: 127.0.0.1:\(web.port)\r\nCookie: \(cookie)\r\n\r\n")
        #expect(try stream.head().status == 200)
        #expect(stream.line(startingWith: "id: ") != nil)
        _ = try harness.stop()
        let down = try Self.get(web, "/tools/jobs/api/jobs", cookie: cookie)
        #expect(down.status == 503)
        #expect(down.body.contains("daemon_unreachable"))
        #expect(down.body.contains("trailbook-jobs daemon"))
        #expect(stream.line(startingWith: "event: daemon") != nil)
        #expect(stream.line(startingWith: "data: ")?.contains("\"up\":false") == true)
        try harness.start()
        #expect(stream.line(startingWith: "event: daemon", within: 15) != nil)
        #expect(stream.line(startingWith: "data: ")?.contains("\"up\":true") == true)
        #expect(try Self.get(web, "/tools/jobs/api/jobs", cookie: cookie).status == 200)

        // Ctrl-C ends it.
        #expect(web.stop(signal: SIGINT) == 130)
    }
}
