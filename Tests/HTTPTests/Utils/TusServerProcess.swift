import Foundation
import Testing
import TrailbookHTTP
import TestSupport
import TrailbookLoop

/// The main loop on its thread, shared with every other test target in the process.
enum TestLoop {
    static var started: Void { MainLoopThread.started }
}

/// The package root, found from this file's path.
let packageRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<4 { url.deleteLastPathComponent() }  // Utils, HTTPTests, Tests, root
    return url.path
}()

struct TestSetupError: Error, CustomStringConvertible {
    var description: String
}

/// A real tus server (tuspyserver under uvicorn, 127.0.0.1, a free port) plus the fault-injecting proxy in front
/// of it, each a subprocess, with a fresh storage directory. Call `stop()` when done.
final class TusTestServer: @unchecked Sendable {
    let server: ReadyProcess
    let proxy: ReadyProcess
    let filesDirectory: String

    /// The venv's python, or a failure telling how to make it.
    static func python() throws -> String {
        let python = packageRoot + "/.venv-tus/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw TestSetupError(description: """
                The tus test server is not installed (\(python) is missing). \
                Run Tests/Support/tus-server/setup.sh in \(packageRoot) once, then run the tests again.
                """)
        }
        return python
    }

    init(token: String? = nil, maxSize: Int64? = nil) throws {
        let python = try Self.python()
        filesDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("trailbook-tus-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: filesDirectory, withIntermediateDirectories: true)
        var arguments = ["--files-dir", filesDirectory]
        if let token { arguments += ["--token", token] }
        if let maxSize { arguments += ["--max-size", String(maxSize)] }
        let support = packageRoot + "/Tests/Support/tus-server"
        server = try ReadyProcess(python: python, script: support + "/server.py", arguments: arguments)
        do {
            proxy = try ReadyProcess(
                python: python, script: support + "/proxy.py", arguments: ["--upstream-port", String(server.port)])
        } catch {
            server.stop()
            throw error
        }
    }

    /// The creation endpoint, straight to the server.
    var endpoint: String { "http://127.0.0.1:\(server.port)/files/" }
    /// The creation endpoint through the fault proxy.
    var proxiedEndpoint: String { "http://127.0.0.1:\(proxy.port)/files/" }
    /// The proxy's control URL for `path` (for example `/__fault/status?code=503&count=2`).
    func control(_ path: String) -> String { "http://127.0.0.1:\(proxy.port)\(path)" }

    /// The bytes the server stored for the upload at `url`.
    func storedBytes(of url: String) -> [UInt8]? {
        let id = url.split(separator: "/").last.map(String.init) ?? ""
        return FileManager.default.contents(atPath: filesDirectory + "/" + id).map { [UInt8]($0) }
    }

    func stop() {
        proxy.stop()
        server.stop()
        try? FileManager.default.removeItem(atPath: filesDirectory)
    }
}

/// Deterministic test bytes (an xorshift stream), so failures are reproducible.
func testBytes(count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
    var state = seed
    var out = [UInt8](repeating: 0, count: count)
    var i = 0
    while i < count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        withUnsafeBytes(of: state) { word in
            for b in word where i < count {
                out[i] = b
                i += 1
            }
        }
    }
    return out
}

/// Starts a tus server and proxy, runs `body` on the loop with a fresh `HTTPClient`, then closes the client and
/// stops the processes. Fails (does not skip) when the venv is missing.
func withTusServer(
    token: String? = nil, maxSize: Int64? = nil,
    _ body: @LoopActor @escaping (TusTestServer, HTTPClient) async throws -> Void
) async throws {
    _ = TestLoop.started
    // A missing venv throws, which fails the test with the message saying how to set it up.
    let server = try TusTestServer(token: token, maxSize: maxSize)
    defer { server.stop() }
    try await runOnLoop(server, body)
}

@LoopActor
private func runOnLoop(
    _ server: TusTestServer, _ body: @LoopActor (TusTestServer, HTTPClient) async throws -> Void
) async throws {
    let client = HTTPClient(loop: .main)
    defer { client.close() }
    try await body(server, client)
}

/// Arms a proxy fault (see proxy.py), expecting 200.
@LoopActor
func arm(_ server: TusTestServer, _ client: HTTPClient, _ path: String) async throws {
    let response = try await client.perform(HTTPRequest(method: "POST", url: server.control(path)))
    #expect(response.status == 200, "proxy control \(path)")
}

