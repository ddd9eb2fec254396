import Foundation
import TestSupport
import TrailbookEngine

/// The real S3 API server of the tests (moto, Tests/Support/s3-server/server.py, on 127.0.0.1) from the venv that
/// `Tests/Support/s3-server/setup.sh` makes. Construction fails — it never skips — when the venv is missing.
final class S3Server {
    let process: ReadyProcess
    let bucket: String

    static func python() throws -> String {
        let python = TusServers.root + "/.venv-s3/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw HarnessError(
                "The S3 test server is not installed (\(python) is missing). Run Tests/Support/s3-server/setup.sh "
                    + "in \(TusServers.root) once (it makes the .venv-s3 venv with moto), then run the tests again.")
        }
        return python
    }

    /// Starts the server with `bucket` made; `minPartSize` lowers moto's smallest part; `auth` checks signatures.
    init(bucket: String = "photos", minPartSize: Int? = nil, auth: Bool = false) throws {
        var arguments = ["--bucket", bucket, "--verify-checksums"]
        if let minPartSize { arguments += ["--min-part-size", String(minPartSize)] }
        if auth { arguments.append("--auth") }
        process = try ReadyProcess(
            python: try Self.python(), script: TusServers.root + "/Tests/Support/s3-server/server.py",
            arguments: arguments)
        self.bucket = bucket
    }

    var endpoint: String { "http://127.0.0.1:\(process.port)" }

    /// The daemon's variables for this server: a key (any, unless `auth`), the endpoint, and no AWS files of the
    /// user running the tests.
    func environment(accessKey: String = "AKIDTEST", secret: String = "test-secret") -> [String: String] {
        [
            "AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secret, "AWS_ENDPOINT_URL": endpoint,
            "AWS_REGION": "us-east-1", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_PROFILE": "", "AWS_SESSION_TOKEN": "",
        ]
    }

    private func get(_ path: String) throws -> String {
        try TusServers.curl(["http://127.0.0.1:\(process.port)\(path)"])
    }

    /// The S3 requests served so far, oldest first.
    func requests() throws -> [JSONValue] {
        try get("/__log").split(separator: "\n").map { try JSONCoding.decode(JSONValue.self, from: Array($0.utf8)) }
    }

    /// The object's size and SHA-256, or `nil` if there is none.
    func object(_ key: String) throws -> (size: Int64, sha256: String)? {
        // Every byte but unreserved ASCII percent-encoded: keys may hold spaces, `+`, `%`, `#` and non-ASCII.
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")
        let query = key.addingPercentEncoding(withAllowedCharacters: unreserved) ?? key
        let text = try TusServers.curl(["-s", "http://127.0.0.1:\(process.port)/__object?key=\(query)"])
        let value = try JSONCoding.decode(JSONValue.self, from: Array(text.utf8))
        guard let size = value["size"]?.intValue, let sha = value["sha256"]?.stringValue else { return nil }
        return (size, sha)
    }

    /// Multipart uploads in progress.
    func uploads() throws -> Int {
        let value = try JSONCoding.decode(JSONValue.self, from: Array(try get("/__uploads").utf8))
        return value["uploads"]?.arrayValue?.count ?? -1
    }

    /// Arms a fault (see server.py), for example `code=503&count=2&action=UploadPart`.
    func arm(_ fault: String) throws {
        try TusServers.curl(["-X", "POST", "-f", "http://127.0.0.1:\(process.port)/__fault/status?\(fault)"])
    }

    /// Withholds the answers of the next `count` requests of `action` (served, answer never sent) until
    /// `clearFaults`.
    func hold(_ action: String, count: Int) throws {
        try TusServers.curl([
            "-X", "POST", "-f", "http://127.0.0.1:\(process.port)/__fault/hold?action=\(action)&count=\(count)",
        ])
    }

    /// Serves every later request of `action` `seconds` late and, with `maxKeys`, caps its `max-keys` (a slow
    /// server with small pages), until `clearFaults`.
    func slow(_ action: String, seconds: Double, maxKeys: Int? = nil) throws {
        let query = "action=\(action)&seconds=\(seconds)" + (maxKeys.map { "&max_keys=\($0)" } ?? "")
        try TusServers.curl(["-X", "POST", "-f", "http://127.0.0.1:\(process.port)/__fault/slow?\(query)"])
    }

    /// Drops every armed fault.
    func clearFaults() throws {
        try TusServers.curl(["-X", "POST", "-f", "http://127.0.0.1:\(process.port)/__fault/clear"])
    }

    /// Aborts every multipart upload in progress, as a lifecycle rule would.
    func abortAll() throws {
        try TusServers.curl(["-X", "POST", "-f", "http://127.0.0.1:\(process.port)/__abort"])
    }

    /// The key and secret of the IAM user (with `auth`).
    func credentials() throws -> (key: String, secret: String) {
        let value = try JSONCoding.decode(JSONValue.self, from: Array(try get("/__credentials").utf8))
        return (value["access_key_id"]?.stringValue ?? "", value["secret_access_key"]?.stringValue ?? "")
    }
}

extension JSONValue {
    /// The S3 action of a logged request (`UploadPart`, `ListParts`, …).
    var action: String { self["action"]?.stringValue ?? "" }
    /// The HTTP status of a logged request.
    var status: Int64 { self["status"]?.intValue ?? 0 }
    /// The part number of a logged `UploadPart`.
    var partNumber: Int? { self["query"]?["partNumber"]?.stringValue.flatMap { Int($0) } }
}
