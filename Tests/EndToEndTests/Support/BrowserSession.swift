import Foundation
import TrailbookProtocol

/// Headless Chromium driven by selenium (Tests/Support/browser/driver.py in the venv that setup.sh makes), one
/// command at a time: open a URL, run script in the page, wait for a condition, click, answer a confirm().
final class BrowserSession {
    private let driver: ReadyProcess

    /// The venv's python, made by Tests/Support/browser/setup.sh.
    static var python: String {
        ProcessInfo.processInfo.environment["BROWSER_VENV"].map { $0 + "/bin/python" }
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(".venv-browser/bin/python")
            .path
    }

    /// Starts the browser.
    /// - Throws: `HarnessError` saying how to set it up when chromium, chromedriver or the venv is missing.
    init() throws {
        for needed in ["/usr/bin/chromium", "/usr/bin/chromedriver", Self.python]
        where !FileManager.default.isExecutableFile(atPath: needed) {
            throw HarnessError("\(needed) is missing: run scripts/install-deps.sh and Tests/Support/browser/setup.sh")
        }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Support/browser/driver.py").path
        driver = try ReadyProcess(python: Self.python, script: script, arguments: [])
    }

    /// Closes the browser (chromium and chromedriver would outlive a killed driver), then stops the driver.
    deinit {
        _ = try? driver.command("{\"op\": \"quit\"}")
        driver.stop()
    }

    /// Runs `command` and returns its value.
    /// - Throws: `HarnessError` with the driver's error.
    @discardableResult
    func run(_ command: JSONValue) throws -> JSONValue {
        let line = try driver.command(String(decoding: JSONCoding.encode(command), as: UTF8.self))
        let reply = try JSONCoding.decode(JSONValue.self, from: Array(line.utf8))
        guard reply["ok"]?.boolValue == true else {
            throw HarnessError("browser: \(reply["error"]?.stringValue ?? line)")
        }
        return reply["value"] ?? .null
    }

    /// Opens `url` and waits for the document.
    func open(_ url: String) throws { try run(["op": "open", "url": .string(url)]) }

    /// The value of the function body `js` run in the page.
    @discardableResult
    func eval(_ js: String) throws -> JSONValue { try run(["op": "eval", "js": .string(js)]) }

    /// Runs `js` every 20 ms until it returns something truthy, at most `timeout` seconds; that value.
    @discardableResult
    func wait(_ js: String, timeout: Double = 10) throws -> JSONValue {
        try run(["op": "wait", "js": .string(js), "timeout": .number(timeout)])
    }

    /// Clicks the first element matching `css`.
    func click(_ css: String) throws { try run(["op": "click", "css": .string(css)]) }

    /// Accepts (or dismisses) the open confirm(); its text.
    func answerDialog(accept: Bool) throws -> String {
        try run(["op": "alert", "accept": .bool(accept)]).stringValue ?? ""
    }

    /// Whether no alert or confirm() is open.
    func noDialog() throws -> Bool { try run(["op": "no_alert"]).boolValue == true }

    /// Saves a PNG of the window at `path`.
    func screenshot(_ path: String) throws { try run(["op": "screenshot", "path": .string(path)]) }
}
