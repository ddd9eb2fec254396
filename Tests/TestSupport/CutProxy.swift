import Foundation

/// A TCP proxy on 127.0.0.1 that can cut the network silently (Tests/Support/tcp-cut/proxy.py, Python's standard
/// library only): after `cut()` the open connections stay open and never carry another byte either way, with no
/// FIN or RST, as when a cable is pulled or a firewall starts dropping packets; connections made during the cut
/// are accepted and never answered. `heal()` lets new connections through again.
public final class CutProxy: @unchecked Sendable {
    private let process: ReadyProcess

    /// The port clients connect to.
    public var port: Int { process.port }

    /// Starts the proxy in front of the Unix socket at `unixSocket` (a `PostgresServer`'s `socketPath`).
    /// - Throws: `ReadyProcess.StartError` if it does not start (no `python3`).
    public init(unixSocket: String) throws {
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { root.deleteLastPathComponent() }  // CutProxy.swift, TestSupport, Tests
        process = try ReadyProcess(
            python: "/usr/bin/python3", script: root.path + "/Tests/Support/tcp-cut/proxy.py",
            arguments: ["--upstream-unix", unixSocket])
    }

    /// Starts the proxy in front of the TCP port `upstreamPort` on 127.0.0.1 (an HTTP server's).
    /// - Throws: `ReadyProcess.StartError` if it does not start (no `python3`).
    public init(upstreamPort: Int) throws {
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { root.deleteLastPathComponent() }  // CutProxy.swift, TestSupport, Tests
        process = try ReadyProcess(
            python: "/usr/bin/python3", script: root.path + "/Tests/Support/tcp-cut/proxy.py",
            arguments: ["--upstream-port", String(upstreamPort)])
    }

    /// Cuts every open connection and every new one until `heal()`.
    public func cut() throws { try expect("cut") }

    /// Forwards connections made from now on (the cut ones stay silent).
    public func heal() throws { try expect("heal") }

    /// How many connections are forwarded and how many are cut.
    public func connections() throws -> (forwarding: Int, silent: Int) {
        let words = try process.command("stats").split(separator: " ")
        guard words.count == 4, let forwarding = Int(words[2]), let silent = Int(words[3]) else {
            throw ReadyProcess.StartError(description: "proxy.py answered stats with \(words)")
        }
        return (forwarding, silent)
    }

    /// Stops the proxy.
    public func stop() { process.stop() }

    private func expect(_ command: String) throws {
        let answer = try process.command(command)
        guard answer == "OK \(command)" else {
            throw ReadyProcess.StartError(description: "proxy.py answered \(command) with \(answer)")
        }
    }
}
