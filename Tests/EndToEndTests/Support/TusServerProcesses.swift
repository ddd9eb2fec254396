import Foundation
import TestSupport
import TrailbookEngine

/// The real tus server (tuspyserver under uvicorn on 127.0.0.1) with the fault-injecting proxy in front, from
/// the venv that `Tests/Support/tus-server/setup.sh` makes. Construction fails — it never skips — when the venv
/// is missing, with a message naming setup.sh.
final class TusServers {
    let files = TemporaryDirectory("tbj-tus")
    let server: ReadyProcess
    let proxy: ReadyProcess

    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }  // Support, EndToEndTests, Tests, root
        return url.path
    }()

    static func python() throws -> String {
        let python = root + "/.venv-tus/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw HarnessError(
                "The tus test server is not installed (\(python) is missing). Run Tests/Support/tus-server/setup.sh "
                    + "in \(root) once (it makes the .venv-tus venv with tuspyserver), then run the tests again.")
        }
        return python
    }

    private let secrets = TemporaryDirectory("tbj-tok")
    /// The file the server reads its bearer token from on every request, when made with `tokenFile: true`.
    var tokenFile: String { secrets.file("token") }

    init(token: String? = nil, tokenFile: Bool = false, maxSize: Int64? = nil) throws {
        let python = try Self.python()
        var arguments = ["--files-dir", files.path]
        if let token { arguments += ["--token", token] }
        if tokenFile { arguments += ["--token-file", secrets.file("token")] }
        if let maxSize { arguments += ["--max-size", String(maxSize)] }
        let support = Self.root + "/Tests/Support/tus-server"
        server = try ReadyProcess(python: python, script: support + "/server.py", arguments: arguments)
        proxy = try ReadyProcess(
            python: python, script: support + "/proxy.py", arguments: ["--upstream-port", String(server.port)])
    }

    /// The creation endpoint through the fault proxy.
    var endpoint: String { "http://127.0.0.1:\(proxy.port)/files/" }
    /// The creation endpoint straight to the server.
    var directEndpoint: String { "http://127.0.0.1:\(server.port)/files/" }

    /// `curl` with `arguments`; returns its stdout.
    @discardableResult
    static func curl(_ arguments: [String]) throws -> String {
        let result = try DaemonHarness.run("/usr/bin/curl", ["-sS", "--max-time", "10"] + arguments)
        guard result.status == 0 else { throw HarnessError("curl \(arguments) failed: \(result.stderr)") }
        return result.stdout
    }

    /// Arms a proxy fault (see proxy.py), for example `status?code=503&count=2&method=PATCH`.
    func arm(_ fault: String) throws {
        try Self.curl(["-X", "POST", "-f", "http://127.0.0.1:\(proxy.port)/__fault/\(fault)"])
    }

    /// The proxy's log of tus requests (control requests left out): the last ones (method, path, headers,
    /// header names in lower case), oldest first.
    func requests() throws -> [JSONValue] {
        let text = try Self.curl(["http://127.0.0.1:\(proxy.port)/__log"])
        return try text.split(separator: "\n").map { try JSONCoding.decode(JSONValue.self, from: Array($0.utf8)) }
            .filter { !($0["path"]?.stringValue ?? "").hasPrefix("/__") }
    }

    /// The proxy's totals since it started: `patch_body_bytes` (PATCH body bytes it read from clients) and
    /// `requests` (per method).
    func stats() throws -> JSONValue {
        try JSONCoding.decode(JSONValue.self, from: Array(Self.curl(["http://127.0.0.1:\(proxy.port)/__stats"]).utf8))
    }

    /// The methods of the logged requests, in order.
    func methods() throws -> [String] { try requests().compactMap { $0["method"]?.stringValue } }

    /// The HTTP status of `HEAD url` straight to the server (with `Tus-Resumable`).
    func headStatus(_ url: String) throws -> Int {
        let direct = url.replacingOccurrences(of: ":\(proxy.port)/", with: ":\(server.port)/")
        let out = try Self.curl(["-I", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Tus-Resumable: 1.0.0", direct])
        return Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// The path of the bytes the server stored for the upload at `url`.
    func storedPath(_ url: String) -> String {
        files.file(url.split(separator: "/").last.map(String.init) ?? "")
    }
}
