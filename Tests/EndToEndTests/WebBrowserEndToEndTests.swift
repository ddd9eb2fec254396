import Foundation
import Testing
import TrailbookProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// The page of `trailbook-jobs web` in a real browser: headless Chromium (Debian's `chromium` and
/// `chromium-driver`, driven by selenium), against a real daemon and a real `web` process.
@Suite(.serialized)
struct WebBrowserEndToEndTests {
    /// A daemon, `web` and a browser on its page.
    final class Setup {
        let harness: DaemonHarness
        let web: WebProcess
        let browser: BrowserSession

        init(webArguments: [String] = [], concurrency: Int = 4, environment: [String: String] = [:]) throws {
            harness = try DaemonHarness(arguments: ["--concurrency", String(concurrency)], environment: environment)
            web = try WebProcess(harness, arguments: webArguments + ["--debug"])
            browser = try BrowserSession()
            try browser.open(web.url)
            try browser.wait("return document.getElementById('daemon').textContent === 'daemon running'", timeout: 20)
        }

        /// A job's row as the page shows it: `{state, value}` (the bar's value), or null.
        func row(_ id: String) throws -> JSONValue {
            try browser.eval(
                """
                const tr = document.querySelector('tr[data-job="\(id)"]');
                return tr ? {state: tr.dataset.state, value: tr.querySelector('progress').value,
                             rows: document.querySelectorAll('tr[data-job="\(id)"]').length} : null;
                """)
        }

        /// A PNG of the page in .build (a test artefact, not committed).
        func screenshot(_ name: String) throws {
            let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent(".build/web-screenshots")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try browser.screenshot(directory.appendingPathComponent(name + ".png").path)
        }
    }

    @Test func barAdvancesWithoutReloadThenCancelFromThePage() throws {
        let setup = try Setup()
        let id = try setup.harness.submitSleep(units: 400, unitMilliseconds: 50)
        // A marker in the page's window: a reload would lose it.
        try setup.browser.eval("window.notReloaded = true;")
        let first =
            try setup.browser.wait(
                "const tr = document.querySelector('tr[data-job=\"\(id)\"]'); return tr && tr.dataset.state === 'running' && tr.querySelector('progress').value > 0 && tr.querySelector('progress').value",
                timeout: 15
            ).doubleValue ?? 0
        try setup.browser.wait(
            "const tr = document.querySelector('tr[data-job=\"\(id)\"]'); return tr.querySelector('progress').value > \(first)",
            timeout: 10)
        #expect(try setup.browser.eval("return window.notReloaded === true").boolValue == true)
        try setup.screenshot("running-job")

        // Paused live updates: the daemon's job moves on, the page's bar stays; resumed, it catches up.
        try setup.browser.click("#live")
        let frozen = try setup.row(id)["value"]?.doubleValue ?? 0
        _ = try setup.harness.waitFor(id, timeout: 15, "progress past the frozen bar") {
            ($0["progress"]?["fraction"]?.doubleValue ?? 0) > frozen + 0.05
        }
        #expect(try setup.row(id)["value"]?.doubleValue == frozen)
        try setup.browser.click("#live")
        try setup.browser.wait(
            "return document.querySelector('tr[data-job=\"\(id)\"]').querySelector('progress').value > \(frozen + 0.05)",
            timeout: 5)

        // Select it, press Cancel, confirm.
        try setup.browser.click("tr[data-job=\"\(id)\"] input[type=checkbox]")
        try setup.browser.click("button[data-verb=cancel][data-scope=selection]")
        let question = try setup.browser.answerDialog(accept: true)
        #expect(question.contains("Cancel 1 job"))
        try setup.browser.wait("return document.querySelector('tr[data-job=\"\(id)\"]').dataset.state === 'cancelled'")
        let job = try setup.harness.show(id)
        #expect(job["state"]?.stringValue == "cancelled")
        #expect(job["cancellation"]?["reason"]?.stringValue == "user_stop")
        // The clean-up ran: the engine logged nothing about a pending or failed one.
        #expect(!setup.harness.log().contains("clean-up"))
        #expect(
            try setup.browser.eval("return document.getElementById('notice').textContent").stringValue
                == "cancel: 1 done")
    }

    @Test func cancelATusUploadFromThePageDeletesItOnTheServer() throws {
        let servers = try TusServers()
        let setup = try Setup()
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("trip.mov"), bytes: 64 << 20)
        let id = try setup.harness.submitUpload([
            work.file("trip.mov"), "--to", servers.endpoint, "--max-rate", "4MiB", "--chunk-size", "2MiB",
        ])
        try setup.browser.wait(
            "const tr = document.querySelector('tr[data-job=\"\(id)\"]'); "
                + "return tr && tr.dataset.state === 'running' && tr.querySelector('progress').value > 0", timeout: 20)
        #expect(
            try setup.browser.eval("return document.querySelector('tr[data-job=\"\(id)\"] td.name').textContent")
                .stringValue == "trip.mov")
        let patch = try #require(
            try servers.requests().first { $0["method"]?.stringValue == "PATCH" }?["path"]?.stringValue)
        let url = "http://127.0.0.1:\(servers.proxy.port)\(patch)"

        try setup.browser.click("tr[data-job=\"\(id)\"] input[type=checkbox]")
        try setup.browser.click("button[data-verb=cancel][data-scope=selection]")
        #expect(try setup.browser.answerDialog(accept: true).contains("Cancel 1 job"))
        try setup.browser.wait("return document.querySelector('tr[data-job=\"\(id)\"]').dataset.state === 'cancelled'")
        let job = try setup.harness.show(id)
        #expect(job["state"]?.stringValue == "cancelled")
        #expect(job["cancellation"]?["reason"]?.stringValue == "user_stop")
        // The clean-up: the upload is deleted on the tus server.
        #expect([404, 410].contains(try servers.headStatus(url)), "the server no longer has the upload")
        #expect(try servers.methods().last == "DELETE")
        #expect(!FileManager.default.fileExists(atPath: servers.storedPath(url)))
    }

    @Test func daemonRestartedMidWatchResumesWithoutDuplicates() throws {
        let setup = try Setup()
        let id = try setup.harness.submitSleep(units: 600, unitMilliseconds: 50)
        try setup.browser.wait(
            "const tr = document.querySelector('tr[data-job=\"\(id)\"]'); return tr && tr.dataset.state === 'running'",
            timeout: 15)
        try setup.browser.eval("window.notReloaded = true;")
        try setup.harness.crash()
        try setup.browser.wait("return document.getElementById('daemon').className.includes('down')", timeout: 10)
        #expect(
            try setup.browser.eval("return document.getElementById('daemon').textContent").stringValue?.contains(
                "not reachable") == true)
        try setup.harness.start()
        try setup.browser.wait("return document.getElementById('daemon').textContent === 'daemon running'", timeout: 15)
        // The job runs again after the restart and its bar moves on the same page, in one row.
        try setup.browser.wait(
            "const tr = document.querySelector('tr[data-job=\"\(id)\"]'); return tr && tr.dataset.state === 'running' && tr.querySelector('progress').value > 0",
            timeout: 20)
        let before = try setup.row(id)["value"]?.doubleValue ?? 0
        try setup.browser.wait(
            "return document.querySelector('tr[data-job=\"\(id)\"]').querySelector('progress').value > \(before)",
            timeout: 10)
        #expect(try setup.row(id)["rows"]?.doubleValue == 1)
        #expect(try setup.browser.eval("return document.querySelectorAll('#jobs tbody tr').length").doubleValue == 1)
        #expect(try setup.browser.eval("return window.notReloaded === true").boolValue == true)
    }

    @Test func thousandJobsOfABatchAppearWithinASecond() throws {
        let setup = try Setup(concurrency: 2)
        // The page notes (every 5 ms, on the machine's clock) when it shows all 1 000: the driver's round trips,
        // slow on a loaded machine, are not counted.
        try setup.browser.eval(
            """
            const n = (s) => Number(document.querySelector('#counts li[data-state="' + s + '"] b').textContent);
            window.appearedAt = null;
            const timer = setInterval(() => {
              if (n('queued') + n('running') === 1000 && document.querySelectorAll('#jobs tbody tr').length === 100) {
                window.appearedAt = Date.now(); clearInterval(timer);
              }
            }, 5);
            """)
        let jobs: [JSONValue] = (0..<1000).map { _ in ["kind": "sleep", "params": ["units": 1000, "unit_ms": 1000]] }
        let reply = try setup.harness.request(["op": "submit_batch", "jobs": .array(jobs)])
        let answered = Date().timeIntervalSince1970
        #expect(reply["ok"]?.boolValue == true)
        let appeared = try setup.browser.wait("return window.appearedAt", timeout: 10).doubleValue ?? 0
        let seconds = appeared / 1000 - answered
        #expect(seconds < 1.0, "the batch took \(seconds) s to appear")
        print(
            "WebBrowserEndToEndTests: 1 000 jobs of a batch counted and listed on the page \(Int(seconds * 1000)) ms after the reply"
        )
        // The first page is the newest 100; the next one is there.
        #expect(try setup.browser.eval("return document.getElementById('next').disabled").boolValue == false)
        try setup.screenshot("thousand-jobs")

        // Older goes back 100 at a time by the cursor to the oldest job, each once; Newer comes back.
        let newestFirst = Array((reply["ids"]?.arrayValue ?? []).compactMap(\.stringValue).reversed())
        #expect(newestFirst.count == 1000)
        func showsPage(_ number: Int) throws {
            let expected = newestFirst[(number - 1) * 100..<number * 100].joined(separator: ",")
            try setup.browser.wait(
                """
                const ids = [...document.querySelectorAll('#jobs tbody tr')].map((tr) => tr.dataset.job).join(',');
                return document.getElementById('pageno').textContent === 'page \(number)' && ids === '\(expected)';
                """, timeout: 10)
        }
        for number in 2...10 {
            try setup.browser.click("#next")
            try showsPage(number)
        }
        try setup.browser.wait("return document.getElementById('next').disabled", timeout: 10)
        try setup.browser.click("#prev")
        try showsPage(9)
    }

    /// A folder upload's first run compares its files with the destination before it copies a byte: the row
    /// says so as `show` does ("comparing with the destination: 64 files"), and the count grows. The daemon
    /// writes the file list 64 entries a page and waits 0.5 s after each (test knobs), so the step lasts.
    @Test func aFolderBeingComparedShowsItsPhaseInItsRow() throws {
        let setup = try Setup(environment: [
            "TRAILBOOK_JOBS_TEST_FILE_LIST_PAGE": "64", "TRAILBOOK_JOBS_TEST_LISTING_PAUSE": "0.5",
        ])
        let source = TemporaryDirectory("tbj-web-trip")
        let destination = TemporaryDirectory("tbj-web-to")
        for number in 0..<300 {
            try source.create(BytePath(String(format: "%03d.bin", number)), contents: Array(repeating: 7, count: 512))
        }
        let id = try setup.harness.submitUpload([source.path, "--to", "file://\(destination.path)"])
        let cell = "const td = document.querySelector('tr[data-job=\"\(id)\"] td.name'); return td && td.textContent"
        let first =
            try setup.browser.wait("\(cell).startsWith('comparing with the destination: ') && td.textContent", timeout: 20)
            .stringValue ?? ""
        #expect(first.hasSuffix(" files"), "\(first)")
        let count = { (text: String) in Int(text.split(separator: " ").dropLast().last ?? "") ?? -1 }
        let later =
            try setup.browser.wait(
                "\(cell).startsWith('comparing') && td.textContent !== '\(first)' && td.textContent", timeout: 20
            ).stringValue ?? ""
        #expect(count(later) > count(first), "\(first) then \(later)")
        try setup.screenshot("folder-phase")
        _ = try setup.harness.waitForState(id, "succeeded", timeout: 60)
        try setup.browser.wait(
            "const tr = document.querySelector('tr[data-job=\"\(id)\"]'); return tr.dataset.state === 'succeeded' "
                + "&& !tr.querySelector('td.name').textContent.startsWith('comparing')", timeout: 10)
    }

    @Test func hostileFileNameShowsAsText() throws {
        let setup = try Setup()
        let source = TemporaryDirectory("tbj-web")
        let destination = TemporaryDirectory("tbj-web-to")
        let name = "<img src=x onerror=alert(1)>\u{202E}gnp.exe"
        try source.create(BytePath(name), contents: Array(repeating: 7, count: 4096))
        let id = try setup.harness.submitUpload([source.file(name), "--to", "file://\(destination.path)"])
        _ = try setup.harness.waitForState(id, "succeeded")
        try setup.browser.wait("return document.querySelector('tr[data-job=\"\(id)\"] a.job') !== null", timeout: 10)
        try setup.browser.click("tr[data-job=\"\(id)\"] a.job")
        let params =
            try setup.browser.wait(
                "const p = document.getElementById('detail-params').textContent; return p.includes('onerror') && p",
                timeout: 10
            ).stringValue ?? ""
        #expect(params.contains("<img src=x onerror=alert(1)>\\u202egnp.exe"))
        #expect(!params.contains("\u{202E}"))
        #expect(try setup.browser.eval("return document.querySelectorAll('img').length").doubleValue == 0)
        #expect(try setup.browser.noDialog())
    }

    @Test func refusedWithoutTokenFromAnotherHostOrSiteAndWhenReadOnly() throws {
        let setup = try Setup(webArguments: ["--read-only"])
        let id = try setup.harness.submitSleep(units: 600, unitMilliseconds: 50)
        try setup.browser.wait("return document.querySelector('tr[data-job=\"\(id)\"]') !== null", timeout: 10)
        // Read-only: no action buttons, and the API refuses one sent from the page anyway.
        #expect(
            try setup.browser.eval("return getComputedStyle(document.querySelector('.actions')).display").stringValue
                == "none")
        let status =
            try setup.browser.wait(
                """
                if (!window.actionStatus) {
                  window.actionStatus = 'pending';
                  const token = document.querySelector('meta[name="trailbook-token"]').content;
                  fetch('api/action', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Trailbook-Token': token},
                    body: JSON.stringify({verb: 'cancel', jobs: ['\(id)']})})
                    .then(async (r) => { window.actionStatus = r.status + ' ' + (await r.text()); });
                }
                return window.actionStatus !== 'pending' && window.actionStatus;
                """
            ).stringValue ?? ""
        #expect(status.hasPrefix("403"))
        #expect(status.contains("read_only"))

        // Cross-site: a form on another origin posting to the page's API is refused, and the job runs on.
        try setup.browser.open(
            "data:text/html,<form method=post action='\(setup.web.origin)/api/action'><input name=verb value=cancel></form>"
        )
        try setup.browser.eval("document.forms[0].submit();")
        try setup.browser.wait(
            "return document.body && document.body.textContent.includes('no valid session')", timeout: 10)
        #expect(setup.web.log().contains("POST /api/action 403"))
        #expect(try setup.harness.show(id)["state"]?.stringValue == "running")

        // Another Host naming the same port (DNS rebinding), and the page without the token, are refused.
        try setup.browser.open("http://localhost:\(setup.web.port)/")
        #expect(
            try setup.browser.eval("return document.body.textContent").stringValue?.contains("answers only to Host")
                == true)
        try setup.browser.open("http://127.0.0.1:\(setup.web.port)/api/jobs")  // the cookie is there: allowed
        #expect(try setup.browser.eval("return document.body.textContent").stringValue?.contains("\"jobs\"") == true)
        try setup.browser.run(["op": "clear_cookies"])
        try setup.browser.open("http://127.0.0.1:\(setup.web.port)/")
        #expect(
            try setup.browser.eval("return document.body.textContent").stringValue?.contains("no valid session") == true
        )
    }
}
