import Foundation
import Testing
import TrailbookEngine

/// "Send only what changed" for folder uploads to tus (tuspyserver behind the test proxy), counted at the server:
/// a tus server cannot be listed, so the daemon remembers what its jobs uploaded there (the upload memory) and
/// checks each remembered upload with one `HEAD`. A second upload of the same tree creates no upload and sends no
/// byte; after adding 5 files and editing 1, exactly those 6 are sent; `--again` sends all; an upload the server
/// lost is sent again.
@Suite(.serialized)
struct FolderTusSyncEndToEndTests {
    /// What the proxy counted since `before`: uploads created (`POST`), `PATCH` body bytes, `HEAD` requests.
    struct Sent: Equatable {
        var created: Int64
        var bytes: Int64
        var heads: Int64

        init(_ stats: JSONValue) {
            created = stats["requests"]?["POST"]?.intValue ?? 0
            bytes = stats["patch_body_bytes"]?.intValue ?? 0
            heads = stats["requests"]?["HEAD"]?.intValue ?? 0
        }

        static func - (lhs: Sent, rhs: Sent) -> Sent {
            var out = lhs
            out.created -= rhs.created
            out.bytes -= rhs.bytes
            out.heads -= rhs.heads
            return out
        }
    }

    @Test func aSecondUploadToTusSendsOnlyWhatChanged() throws {
        let trip = try FolderUploadEndToEndTests.Trip()
        let tus = try TusServers()
        let daemon = try DaemonHarness()
        var before = Sent(try tus.stats())
        func upload(_ extra: [String] = []) throws -> (done: JSONValue, sent: Sent) {
            let id = try daemon.submitUpload([trip.root, "--to", tus.endpoint, "--chunk-size", "5MiB"] + extra)
            let done = try daemon.waitForFolder(id, "succeeded", timeout: 120)
            let now = Sent(try tus.stats())
            defer { before = now }
            return (done, now - before)
        }
        func sentNames(_ done: JSONValue) -> Set<String> {
            Set(done["result"]?["files"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? [])
        }
        let count = Int64(trip.expected.count)
        let first = try upload()
        let total = try #require(first.done["result"]?["bytes"]?.intValue)
        #expect(first.sent.created == count)
        #expect(first.sent.bytes == total)
        #expect(first.done["result"]?["tree"]?["already_there"]?.intValue == 0)

        // Nothing changed: no upload made, no byte sent, one HEAD per remembered upload.
        let second = try upload()
        #expect(second.sent.created == 0)
        #expect(second.sent.bytes == 0)
        #expect(second.sent.heads == count)
        #expect(second.done["result"]?["files"]?.arrayValue?.count == 0)
        #expect(second.done["result"]?["tree"]?["uploaded"]?.intValue == 0)
        #expect(second.done["result"]?["tree"]?["already_there"]?.intValue == count)
        #expect(second.done["result"]?["tree"]?["already_there_bytes"]?.intValue == total)
        #expect(second.done["result"]?["tree"]?["failed"]?.intValue == 0)

        // 5 new files and 1 edited in place (same size, other bytes): exactly those 6 are sent.
        try FileManager.default.createDirectory(atPath: trip.root + "/day3", withIntermediateDirectories: true)
        for index in 0..<5 { try trip.add("day3/new \(index).jpg", bytes: 100 + index) }
        try trip.add("day1/IMG 0001.jpg", bytes: 1000)
        let third = try upload()
        #expect(third.sent.created == 6)
        #expect(third.sent.bytes == (0..<5).reduce(1000) { $0 + 100 + Int64($1) })
        #expect(sentNames(third.done) == Set((0..<5).map { "day3/new \($0).jpg" } + ["day1/IMG 0001.jpg"]))
        #expect(third.done["result"]?["tree"]?["uploaded"]?.intValue == 6)
        #expect(third.done["result"]?["tree"]?["already_there"]?.intValue == Int64(trip.expected.count - 6))
        for file in third.done["result"]?["files"]?.arrayValue ?? [] {
            let name = Array((file["name"]?.stringValue ?? "").utf8)
            let url = try #require(file["url"]?.stringValue)
            #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(tus.storedPath(url))) == trip.expected[name])
        }

        // An upload the server lost (deleted behind the daemon's back) is sent again; the rest stay.
        let onePart = try #require(
            first.done["result"]?["files"]?.arrayValue?.first { $0["name"]?.stringValue == "part.bin" })
        let lostURL = try #require(onePart["url"]?.stringValue)
        try FileManager.default.removeItem(atPath: tus.storedPath(lostURL))
        try FileManager.default.removeItem(atPath: tus.storedPath(lostURL) + ".info")
        let fourth = try upload()
        #expect(sentNames(fourth.done) == ["part.bin"])
        #expect(fourth.sent.created == 1)
        #expect(fourth.sent.bytes == 5 << 20)

        let again = try upload(["--again"])
        #expect(again.sent.created == Int64(trip.expected.count))
        #expect(again.done["result"]?["files"]?.arrayValue?.count == trip.expected.count)
        #expect(again.done["result"]?["tree"]?["already_there"]?.intValue == 0)
    }
}
