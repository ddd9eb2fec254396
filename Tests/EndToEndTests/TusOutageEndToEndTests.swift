import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// Issue 11 §3: outages waited out politely, against the real tus server behind the fault proxy.
@Suite(.serialized)
struct TusOutageEndToEndTests {
    /// 20 uploads meet 12 s of `503 Retry-After: 3`: they wait it out inside their first attempt (the waits count
    /// towards neither `--stall-timeout 2s` nor `--timeout 8s`), make at most 80 requests in that window, and all
    /// succeed after it.
    @Test func twentyUploadsWaitOutATwelveSecondOutageAndAllSucceed() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        var expected: [String: String] = [:]
        try servers.arm("outage?code=503&seconds=12&retry_after=3")
        var ids: [String] = []
        for index in 0..<20 {
            let path = work.file("p\(index).bin")
            let digest = try UploadEndToEndTests.randomFile(path, bytes: 256 << 10)
            let id = try daemon.submitUpload([
                path, "--to", servers.endpoint, "--stall-timeout", "2s", "--timeout", "8s",
            ])
            expected[id] = digest
            ids.append(id)
        }
        let deadline = Date().addingTimeInterval(30)
        while (try servers.stats()["outage_ends_in"]?.doubleValue ?? 0) > 0, Date() < deadline { usleep(200_000) }
        let injected = try #require(try servers.stats()["injected"]?.intValue)
        print("20 uploads, 12 s of 503 Retry-After: 3: \(injected) requests answered 503")
        #expect(injected >= 4 && injected <= 80, "\(injected) requests in the outage")
        for id in ids {
            let done = try daemon.waitForState(id, "succeeded", timeout: 60)
            #expect(done["attempt"]?.intValue == 1, "waited out within one attempt")
            #expect(done["cancellation"] == .null, "never stopped for a timeout")
            #expect(done["result"]?["sha256"]?.stringValue == expected[id])
            let url = try #require(done["result"]?["url"]?.stringValue)
            #expect(try UploadEndToEndTests.sha256(ofFile: servers.storedPath(url)) == expected[id])
        }
    }

    /// A `429 Retry-After: 2` to one job holds every job's requests to that host for 2 s.
    @Test func a429HoldsEveryJobsRequestsToTheHost() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        var ids: [String] = []
        for index in 0..<3 {
            let path = work.file("h\(index).bin")
            _ = try UploadEndToEndTests.randomFile(path, bytes: 3 << 20)
            ids.append(try daemon.submitUpload([
                path, "--to", servers.endpoint, "--chunk-size", "64KiB", "--max-rate", "1MiB",
            ]))
        }
        for id in ids { try daemon.waitFor(id, "under way") { ($0["progress"]?["completed"]?.intValue ?? 0) > 128 << 10 } }
        try servers.arm("status?code=429&count=1&retry_after=2")
        let deadline = Date().addingTimeInterval(10)
        while (try servers.stats()["injected"]?.intValue ?? 0) < 1, Date() < deadline { usleep(20_000) }
        let held = try #require(try servers.stats()["last_injected_t"]?.doubleValue, "the 429 was sent")
        for id in ids { _ = try daemon.waitForState(id, "succeeded", timeout: 30) }
        let requests = try servers.requests()
        let times = requests.compactMap { $0["t"]?.doubleValue }
        func within(_ from: Double, _ to: Double) -> [String] {
            requests.filter { ($0["t"]?.doubleValue).map { $0 > held + from && $0 < held + to } ?? false }
                .map { "\($0["method"]?.stringValue ?? "") +\(($0["t"]?.doubleValue ?? 0) - held) s" }
        }
        // Until the daemon has read the 429 (milliseconds, more on a loaded machine), each of the 2 other jobs
        // may still send the one request it was about to; after that nothing until the 2 s are over.
        #expect(within(0, 1.95).count <= 2, "\(within(0, 1.95))")
        #expect(within(0.3, 1.95).isEmpty, "requests reached the host while it was held: \(within(0.3, 1.95))")
        #expect(times.contains { $0 >= held + 2 }, "requests went on after the hold")
    }
}
