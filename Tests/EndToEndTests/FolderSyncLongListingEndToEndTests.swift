import Foundation
import Testing
import TrailbookEngine

/// A no-change re-run whose comparison with the destination takes longer than the stall timeout is not a stall:
/// listing the destination and comparing move no byte, but each page of objects listed and each file compared is
/// movement (`JobContext.reportPhase`), and `show` says what the job is doing meanwhile. (Found at 100 000 files
/// to moto: 100 pages of listing took past the 60 s stall timeout and every attempt was stopped.)
@Suite(.serialized)
struct FolderSyncLongListingEndToEndTests {
    @Test func aListingLongerThanTheStallTimeoutIsNotAStall() throws {
        let work = TemporaryDirectory("tbj-long-listing")
        let root = work.file("trip")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let fileCount = 60
        for index in 0..<fileCount {
            try Data("photo \(index)\n".utf8).write(to: URL(fileURLWithPath: root + "/IMG \(index).jpg"))
        }
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let options = ["--to", "s3://photos/long/", "--stall-timeout", "6s", "--max-attempts", "1"]
        let first = try daemon.submitUpload([root] + options)
        try daemon.waitForState(first, "succeeded", timeout: 120)

        // 10 objects a page, each page 1.5 s late: 6 pages, 9 s, past the 6 s stall timeout; each page well within
        // it and within a request's own quiet limit (half the stall timeout, `NetworkQuietLimit`).
        try server.slow("ListObjectsV2", seconds: 1.5, maxKeys: 10)
        let id = try daemon.submitUpload([root] + options)
        let listing = try daemon.waitFor(id, timeout: 60, "the listing's phase") {
            $0["progress"]?["phase"]?["label"]?.stringValue == "listing the destination"
        }
        #expect(listing["progress"]?["phase"]?["unit"]?.stringValue == "objects")
        #expect((listing["progress"]?["phase"]?["count"]?.intValue ?? 0) >= 10)
        let shown = try daemon.cli(["show", id])
        #expect(shown.stdout.contains("listing the destination: ") || shown.stdout.contains("comparing with the"))

        let done = try daemon.waitFor(id, timeout: 120, "the re-run's end") {
            ["succeeded", "failed", "needs_retry", "cancelled"].contains($0["state"]?.stringValue ?? "")
        }
        #expect(done["state"]?.stringValue == "succeeded", "\(done["error"] ?? .null) \(done["last_stop"] ?? .null)")
        #expect(done["result"]?["tree"]?["already_there"]?.intValue == Int64(fileCount))
        #expect(done["progress"]?["phase"] == nil, "the phase ends with the listing")
        let lists = try server.requests().filter { $0.action == "ListObjectsV2" }
        #expect(lists.count >= 7, "the first run's listing and the re-run's 6 pages")
    }

    /// The listing is read in step with the walk (`S3ListingMarch`), whose order differs from S3's where a name
    /// holds a byte below `/` beside a folder of the same start (`a-b.jpg` lists before `a/x.jpg`; the walk meets
    /// `a/x.jpg` first). With pages of 3 keys, so the pages cut across those names, a re-run still finds every
    /// file there and sends none.
    @Test func theListingReadInStepWithTheWalkFindsEveryFile() throws {
        let work = TemporaryDirectory("tbj-march")
        let root = work.file("trip")
        let names = [
            "a.jpg", "a b.jpg", "a-b.jpg", "a+c.jpg", "a/x.jpg", "a/b/c.jpg", "a/b-c.jpg", "a/b.jpg", "a0.jpg",
            "b/ z.jpg", "b/!.jpg", "b/~.jpg", "caf\u{E9}.jpg", ".hidden", "z/z/z/z.jpg",
        ]
        for name in names {
            let path = root + "/" + name
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data("bytes of \(name)\n".utf8).write(to: URL(fileURLWithPath: path))
        }
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        // Something else under the prefix, before, between and after the folder's names, is passed by.
        let other = work.file("other")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        for name in ["a,b.jpg", "a/a.jpg", "aa.jpg", "zz.jpg"] {
            try FileManager.default.createDirectory(
                atPath: ((other + "/" + name) as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data("other \(name)\n".utf8).write(to: URL(fileURLWithPath: other + "/" + name))
        }
        try daemon.waitForState(try daemon.submitUpload([other, "--to", "s3://photos/march/"]), "succeeded", timeout: 120)
        let first = try daemon.submitUpload([root, "--to", "s3://photos/march/"])
        let uploaded = try daemon.waitForState(first, "succeeded", timeout: 120)
        #expect(uploaded["result"]?["tree"]?["uploaded"]?.intValue == Int64(names.count))

        try server.slow("ListObjectsV2", seconds: 0, maxKeys: 3)
        let seen = try server.requests().count
        let id = try daemon.submitUpload([root, "--to", "s3://photos/march/"])
        let done = try daemon.waitForState(id, "succeeded", timeout: 120)
        #expect(done["result"]?["tree"]?["already_there"]?.intValue == Int64(names.count))
        #expect(done["result"]?["tree"]?["uploaded"]?.intValue == 0)
        let requests = try server.requests()[seen...]
        #expect(!requests.contains { ["PutObject", "CreateMultipartUpload"].contains($0.action) })
        #expect(requests.filter { $0.action == "ListObjectsV2" }.count >= 7, "19 keys, 3 a page")
    }

    /// Credentials that may not list the bucket (`AccessDenied` to `ListObjectsV2`) still send only what changed:
    /// each file is asked with `HeadObject` instead (`S3ListingMarch.notListable`), one folder or several.
    @Test func aBucketThatMayNotBeListedIsAskedFileByFile() throws {
        let work = TemporaryDirectory("tbj-not-listable")
        let trip = work.file("trip")
        let more = work.file("more")
        for (folder, letter, count) in [(trip, "f", 6), (more, "g", 3)] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            for index in 0..<count {
                try Data("\(folder) \(index)\n".utf8).write(
                    to: URL(fileURLWithPath: folder + "/\(letter)\(index).jpg"))
            }
        }
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        try daemon.waitForState(try daemon.submitUpload([trip, "--to", "s3://photos/one/"]), "succeeded", timeout: 120)
        try daemon.waitForState(
            try daemon.submitUpload([trip + "/f0.jpg", more, "--to", "s3://photos/two/"]), "succeeded", timeout: 120)

        for (sources, prefix, count) in [([trip], "one", 6), ([trip + "/f0.jpg", more], "two", 4)] {
            try server.arm("code=403&s3_code=AccessDenied&action=ListObjectsV2&count=1")
            let seen = try server.requests().count
            let id = try daemon.submitUpload(sources + ["--to", "s3://photos/\(prefix)/"])
            let done = try daemon.waitForState(id, "succeeded", timeout: 120)
            #expect(done["result"]?["tree"]?["already_there"]?.intValue == Int64(count), "\(prefix)")
            #expect(done["result"]?["tree"]?["uploaded"]?.intValue == 0, "\(prefix)")
            let requests = try server.requests()[seen...]
            #expect(requests.filter { $0.action == "ListObjectsV2" }.count == 1, "\(prefix): refused once, not again")
            #expect(requests.filter { $0.action == "HeadObject" }.count == count, "\(prefix): one HeadObject a file")
            #expect(!requests.contains { ["PutObject", "CreateMultipartUpload"].contains($0.action) }, "\(prefix)")
        }
    }
}
