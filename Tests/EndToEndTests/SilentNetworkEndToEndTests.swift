import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// Issue 41 §6: a network that falls silent (sockets open, no FIN, no RST, nothing moves) is an outage, waited out
/// like a server that cannot be reached and counted towards `--give-up-after`, not a stalled job: it uses no
/// attempt and no `timeout`. The silent link is Tests/Support/tcp-cut/proxy.py between the daemon and the server.
@Suite(.serialized)
struct SilentNetworkEndToEndTests {
    /// Waits until the proxy holds at least `count` silent connections: the daemon gave up on one and tried again.
    static func waitForSilent(_ proxy: CutProxy, _ count: Int, timeout: Double = 60) throws {
        try S3UploadEndToEndTests.waitUntil("\(count) silent connections", timeout: timeout) {
            try proxy.connections().silent >= count
        }
    }

    /// A tus upload with `--stall-timeout 2s` and a single attempt meets 8 s of silence mid-upload (four stall
    /// timeouts): it waits it out, retrying on new connections, and succeeds in its first attempt once the link
    /// heals, with the source's bytes on the server.
    @Test func aTusUploadWaitsOutASilentNetworkWithinOneAttempt() throws {
        let servers = try TusServers()
        let proxy = try CutProxy(upstreamPort: servers.proxy.port)
        defer { proxy.stop() }
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("quiet.bin"), bytes: 6 << 20)
        let id = try daemon.submitUpload([
            work.file("quiet.bin"), "--to", "http://127.0.0.1:\(proxy.port)/files/", "--chunk-size", "1MiB",
            "--max-rate", "1MiB", "--stall-timeout", "2s", "--max-attempts", "1",
        ])
        try daemon.waitFor(id, timeout: 30, "1 MiB acknowledged") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 1 << 20 }
        try proxy.cut()
        let cutAt = Date()
        // Two connections given up on and a third tried: the daemon noticed the silence and keeps trying.
        try Self.waitForSilent(proxy, 3)
        while Date().timeIntervalSince(cutAt) < 8 { usleep(100_000) }
        let during = try daemon.show(id)
        #expect(during["state"]?.stringValue == "running", "still running after 8 s of silence: \(during)")
        try proxy.heal()
        // The backoff has grown during the silence (up to 60 s, full jitter, as for any outage), and a retry may
        // first meet a connection made during the cut: allow two full waits.
        let done = try daemon.waitForState(id, "succeeded", timeout: 180)
        #expect(done["attempt"]?.intValue == 1, "waited out within its one attempt")
        #expect(done["cancellation"] == .null, "never stopped for a timeout")
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        let url = try #require(done["result"]?["url"]?.stringValue)
        #expect(try UploadEndToEndTests.sha256(ofFile: servers.storedPath(url)) == expected)
    }

    /// A silence that outlasts `--give-up-after 8s` fails the job with `unavailable` (the outage's code, counted
    /// in time), not with `timeout`, and within its first attempt.
    @Test func aTusUploadFailsUnavailableWhenTheSilenceOutlastsGiveUpAfter() throws {
        let servers = try TusServers()
        let proxy = try CutProxy(upstreamPort: servers.proxy.port)
        defer { proxy.stop() }
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("gone.bin"), bytes: 4 << 20)
        let id = try daemon.submitUpload([
            work.file("gone.bin"), "--to", "http://127.0.0.1:\(proxy.port)/files/", "--chunk-size", "1MiB",
            "--max-rate", "1MiB", "--stall-timeout", "4s", "--give-up-after", "8s", "--max-attempts", "3",
        ])
        try daemon.waitFor(id, timeout: 30, "some bytes acknowledged") { ($0["progress"]?["completed"]?.intValue ?? 0) > 0 }
        try proxy.cut()
        let done = try daemon.waitForState(id, "failed", timeout: 60)
        #expect(done["error"]?["code"]?.stringValue == "unavailable", "\(done["error"] ?? .null)")
        #expect(done["attempt"]?.intValue == 1, "no attempt spent on the silence")
    }

    /// The same silence against S3 (moto through the silent link), with 4 parts in flight: waited out, then one
    /// multipart upload completes in the first attempt.
    @Test func anS3UploadWaitsOutASilentNetworkWithinOneAttempt() throws {
        let server = try S3Server()
        let proxy = try CutProxy(upstreamPort: server.process.port)
        defer { proxy.stop() }
        var environment = server.environment()
        environment["AWS_ENDPOINT_URL"] = "http://127.0.0.1:\(proxy.port)"
        let daemon = try DaemonHarness(environment: environment)
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("quiet.bin"), bytes: 30 << 20)
        let id = try daemon.submitUpload([
            work.file("quiet.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB", "--max-rate", "4MiB",
            "--stall-timeout", "2s", "--max-attempts", "1",
        ])
        try daemon.waitFor(id, timeout: 30, "a part stored") { _ in
            (try? S3UploadEndToEndTests.storedParts(server.requests()).count) ?? 0 >= 1
        }
        try proxy.cut()
        let cutAt = Date()
        try Self.waitForSilent(proxy, 6)
        while Date().timeIntervalSince(cutAt) < 8 { usleep(100_000) }
        let during = try daemon.show(id)
        #expect(during["state"]?.stringValue == "running", "still running after 8 s of silence: \(during)")
        try proxy.heal()
        let done = try daemon.waitForState(id, "succeeded", timeout: 180)
        #expect(done["attempt"]?.intValue == 1, "waited out within its one attempt")
        #expect(done["cancellation"] == .null, "never stopped for a timeout")
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        #expect(try server.object("quiet.bin")?.sha256 == expected)
        #expect(S3UploadEndToEndTests.count(try server.requests(), "CreateMultipartUpload") == 1)
    }
}
