import Foundation
import Testing
import TrailbookEngine

/// A folder of small files to tus goes several files at a time (issue 35: at most 4 uploads in flight, the cap
/// S3's single `PUT`s have), and a `kill -9` with several in flight resumes each of them on its own upload from
/// the server's offset. The proxy's hold fault keeps `PATCH`es waiting until 4 are there at once (after the first
/// file's, which goes alone: it learns the server's options): a daemon that sends one file at a time never gets
/// there.
@Suite(.serialized)
struct FolderTusSeveralFilesEndToEndTests {
    /// A tree of `count` small files (1–3 KiB) in 3 folders; returns its root and each file's SHA-256 by name.
    static func tree(_ work: TemporaryDirectory, count: Int) throws -> (root: String, expected: [String: String]) {
        let root = work.file("tree")
        var expected: [String: String] = [:]
        for index in 0..<count {
            let name = "d\(index % 3)/f \(index).bin"
            try FileManager.default.createDirectory(atPath: root + "/d\(index % 3)", withIntermediateDirectories: true)
            expected[name] = try UploadEndToEndTests.randomFile(root + "/" + name, bytes: 1_024 + index * 64)
        }
        return (root, expected)
    }

    /// Checks the result names every file once, each stored with the right bytes; returns the upload ids named.
    static func checkStored(_ done: JSONValue, _ expected: [String: String], at tus: TusServers) throws -> Set<String> {
        let files = try #require(done["result"]?["files"]?.arrayValue)
        #expect(files.count == expected.count)
        var named: Set<String> = []
        for file in files {
            let name = file["name"]?.stringValue ?? ""
            let url = try #require(file["url"]?.stringValue)
            named.insert(String(url.split(separator: "/").last ?? ""))
            #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(tus.storedPath(url))) == expected[name], "\(name)")
        }
        #expect(named.count == expected.count)
        return named
    }

    @Test func smallFilesOverlapAtTheServer() throws {
        let work = TemporaryDirectory("tbj-tus-several")
        let (root, expected) = try Self.tree(work, count: 30)
        let tus = try TusServers()
        // 4 PATCHes must wait at the proxy together, or after 20 s they go on alone (and the check below fails).
        try tus.arm("hold?count=4&method=PATCH&seconds=20&skip=1")
        let daemon = try DaemonHarness()
        let id = try daemon.submitUpload([root, "--to", tus.endpoint, "--chunk-size", "1MiB"])
        let done = try daemon.waitForFolder(id, "succeeded", timeout: 120)
        _ = try Self.checkStored(done, expected, at: tus)
        let stats = try tus.stats()
        let most = stats["max_in_flight"]?["PATCH"]?.intValue ?? 0
        #expect(most == 4, "PATCHes in flight at once: \(most)")
        #expect(stats["held_together"]?.intValue == 4, "the held PATCHes went on only at the hold's timeout")
        #expect(stats["requests"]?["POST"]?.intValue == Int64(expected.count))
    }

    @Test func killWithSeveralFilesInFlightResumesEachUpload() throws {
        let work = TemporaryDirectory("tbj-tus-several-kill")
        let (root, expected) = try Self.tree(work, count: 40)
        let tus = try TusServers()
        try tus.arm("hold?count=4&method=PATCH&seconds=600&skip=1&release=0")
        let daemon = try DaemonHarness()
        let id = try daemon.submitUpload([root, "--to", tus.endpoint, "--chunk-size", "1MiB"])
        // Four files in flight: each created (POST answered, remembered) and its PATCH held at the proxy.
        try S3UploadEndToEndTests.waitUntil("4 PATCHes held at the proxy", timeout: 60) {
            try tus.stats()["holding"]?.intValue == 4
        }
        try daemon.crash()
        try tus.arm("reset")  // the held PATCHes are dropped: nothing of them reaches the server
        try daemon.start()
        let done = try daemon.waitForFolder(id, "succeeded", timeout: 120)
        let named = try Self.checkStored(done, expected, at: tus)
        let stats = try tus.stats()
        // Each file in flight went on on its own upload (a HEAD for its offset, then its PATCH): no second POST
        // for any file, and no upload on the server that the result does not name.
        #expect(stats["requests"]?["POST"]?.intValue == Int64(expected.count))
        #expect((stats["requests"]?["HEAD"]?.intValue ?? 0) >= 4)
        let stored = try FileManager.default.contentsOfDirectory(atPath: tus.files.path)
            .filter { $0.hasSuffix(".info") }.map { String($0.dropLast(5)) }
        #expect(Set(stored) == named, "uploads on the server that the result does not name")
        #expect((stats["max_in_flight"]?["PATCH"]?.intValue ?? 0) <= 4)
    }
}
