import Foundation
import Testing
import TestSupport
import TrailbookEngine
import TrailbookSQLite

/// `s3://` uploads against a real S3 API server (moto, Tests/Support/s3-server), through the real daemon and CLI.
/// Needs `Tests/Support/s3-server/setup.sh` to have run once; fails with that advice otherwise.
@Suite(.serialized)
struct S3UploadEndToEndTests {
    /// Requests of `action`.
    static func count(_ requests: [JSONValue], _ action: String) -> Int {
        requests.filter { $0.action == action }.count
    }

    /// Part numbers of the `UploadPart` requests the server stored (2xx), in order.
    static func storedParts(_ requests: [JSONValue]) -> [Int] {
        requests.filter { $0.action == "UploadPart" && $0.status == 200 }.compactMap(\.partNumber)
    }

    @Test func aLargeFileGoesUpInPartsAndASmallOneInOnePut() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let big = try UploadEndToEndTests.randomFile(work.file("big.bin"), bytes: 12 << 20)
        let small = try UploadEndToEndTests.randomFile(work.file("small.jpg"), bytes: 1000)
        let id = try daemon.submitUpload([
            work.file("big.bin"), work.file("small.jpg"), "--to", "s3://photos/trip/", "--chunk-size", "5MiB",
        ])
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        let files = try #require(done["result"]?["files"]?.arrayValue)
        #expect(files.map { $0["sha256"]?.stringValue } == [big, small])
        #expect(files.map { $0["path"]?.stringValue } == ["s3://photos/trip/big.bin", "s3://photos/trip/small.jpg"])
        #expect(done["progress"]?["completed"]?.intValue == Int64((12 << 20) + 1000))
        #expect(try server.object("trip/big.bin")?.sha256 == big)
        #expect(try server.object("trip/small.jpg")?.sha256 == small)
        let requests = try server.requests()
        #expect(Self.count(requests, "CreateMultipartUpload") == 1)
        // 12 MiB in 5 MiB parts: 5, 5, 2.
        #expect(requests.filter { $0.action == "UploadPart" }.compactMap { $0["length"]?.intValue }.sorted()
            == [2 << 20, 5 << 20, 5 << 20])
        #expect(requests.first { $0.action == "CompleteMultipartUpload" }?["parts"]?.arrayValue?.compactMap(\.intValue)
            == [1, 2, 3])
        #expect(Self.count(requests, "PutObject") == 1, "the small file in one PUT")
        // SHA-256 checksums by default: the upload is created with them, every body carries its own (which the test
        // server, like S3, checks: a 200 means it matched) and the Complete lists each part's.
        #expect(requests.first { $0.action == "CreateMultipartUpload" }?["checksum_algorithm"]?.stringValue == "SHA256")
        let bodies = requests.filter { $0.action == "UploadPart" || $0.action == "PutObject" }
        #expect(bodies.count == 4 && bodies.allSatisfy { $0["checksum_sha256"]?.stringValue?.count == 44 && $0.status == 200 })
        #expect(bodies.allSatisfy { $0["content_md5"] == nil }, "no MD5 besides the SHA-256")
        #expect(requests.first { $0.action == "CompleteMultipartUpload" }?["part_checksums"]?.intValue == 3)
        #expect(try server.uploads() == 0)
        // No secret in what the daemon shows or logs.
        let shown = try daemon.cli(["show", id]).stdout
        #expect(!shown.contains("test-secret") && !daemon.log().contains("test-secret"))
    }

    /// `--checksum md5` is for providers without S3's additional checksums: only `Content-MD5` goes out. And the
    /// test server's check of `x-amz-checksum-sha256` is real: a body that does not match is refused.
    @Test func md5OnlySendsNoSHA256ChecksumAndAWrongChecksumIsRefused() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let big = try UploadEndToEndTests.randomFile(work.file("big.bin"), bytes: 11 << 20)
        let small = try UploadEndToEndTests.randomFile(work.file("small.jpg"), bytes: 1000)
        let id = try daemon.submitUpload([
            work.file("big.bin"), work.file("small.jpg"), "--to", "s3://photos/md5/", "--chunk-size", "5MiB",
            "--checksum", "md5",
        ])
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        #expect(done["result"]?["files"]?.arrayValue?.map { $0["sha256"]?.stringValue } == [big, small])
        #expect(try server.object("md5/big.bin")?.sha256 == big)
        let requests = try server.requests()
        #expect(requests.count > 5 && requests.allSatisfy { $0["checksum_sha256"] == nil && $0["checksum_algorithm"] == nil })
        let bodies = requests.filter { $0.action == "UploadPart" || $0.action == "PutObject" }
        #expect(bodies.count == 4 && bodies.allSatisfy { $0["content_md5"]?.stringValue?.count == 24 })
        #expect(requests.first { $0.action == "CompleteMultipartUpload" }?["part_checksums"]?.intValue == 0)
        #expect(try daemon.cli(["submit", "upload", work.file("small.jpg"), "--to", "s3://photos/x/", "--checksum", "crc"])
            .status == 2)

        let refused = try TusServers.curl([
            "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", "--data-binary", "not these bytes",
            "-H", "x-amz-checksum-sha256: \(String(repeating: "A", count: 43))=", server.endpoint + "/photos/wrong.bin",
        ])
        #expect(refused == "400")
        #expect(try server.requests().last?["status"]?.intValue == 400)
        #expect(try server.object("wrong.bin") == nil)
    }

    /// Submits an upload of a new random file `name` of `parts` parts of 4 KiB (40 KiB/s) to `destination` and
    /// pauses it once the server stored `stored` parts. Returns the job's ID and the file's SHA-256.
    static func pausedUpload(
        _ name: String, parts: Int, afterStoring stored: Int, to destination: String, server: S3Server,
        daemon: DaemonHarness, work: TemporaryDirectory
    ) throws -> (id: String, sha256: String) {
        let expected = try UploadEndToEndTests.randomFile(work.file(name), bytes: parts * 4096)
        let id = try daemon.submitUpload([
            work.file(name), "--to", destination, "--chunk-size", "4KiB", "--min-part-size", "4KiB", "--max-rate", "40KiB",
        ])
        let deadline = Date().addingTimeInterval(30)
        while try storedParts(server.requests()).count < stored && Date() < deadline { usleep(20_000) }
        #expect(try daemon.cli(["pause", id]).status == 0)
        return (id, expected)
    }

    /// On resume, a listed part is kept only when its `ChecksumSHA256` is the source's: the part whose listed
    /// checksum differs is sent again, the others (checksums equal) are not.
    @Test func aListedPartWhoseChecksumDiffersIsSentAgainOnResume() throws {
        let server = try S3Server(minPartSize: 4096)
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let (id, expected) = try Self.pausedUpload(
            "c.bin", parts: 60, afterStoring: 10, to: "s3://photos/c/", server: server, daemon: daemon, work: work)
        let before = try server.requests()
        let had = Set(Self.storedParts(before))
        #expect(had.isSuperset(of: [1, 2, 3]) && had.count < 60)
        try TusServers.curl(["-X", "POST", "-f", server.endpoint + "/__fault/listed_checksum?part=3"])
        #expect(try daemon.cli(["resume", id]).status == 0)
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        let after = Array(try server.requests().dropFirst(before.count))
        #expect(Self.count(after, "ListParts") == 1)
        let sent = Self.storedParts(after)
        #expect(sent.filter { had.contains($0) } == [3], "only the part whose checksum differs went again")
        #expect(had.union(sent) == Set(1...60))
        #expect(daemon.log().contains("part 3 on the server"))
        #expect(after.first { $0.action == "CompleteMultipartUpload" }?["part_checksums"]?.intValue == 60)
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        #expect(try server.object("c/c.bin")?.sha256 == expected)
    }

    /// The tus tests' fault proxy in front of the S3 server: a part damaged on the way is refused by the server's
    /// SHA-256 check (`BadDigest`) and sent again; a part whose connection is reset mid-body is sent again. Both
    /// uploads end with the source's bytes, in one multipart upload each.
    @Test func partsDamagedOrCutOffOnTheWayAreSentAgain() throws {
        let server = try S3Server()
        let proxy = try ReadyProcess(
            python: try S3Server.python(), script: TusServers.root + "/Tests/Support/tus-server/proxy.py",
            arguments: ["--upstream-port", String(server.process.port)])
        let proxied = "http://127.0.0.1:\(proxy.port)"
        var environment = server.environment()
        environment["AWS_ENDPOINT_URL"] = proxied
        let daemon = try DaemonHarness(environment: environment)
        let work = TemporaryDirectory()
        for (name, fault) in [("damaged", "corrupt?count=1&method=PUT"), ("cut", "drop?after=1048576&count=1&method=PUT")] {
            let expected = try UploadEndToEndTests.randomFile(work.file(name + ".bin"), bytes: 12 << 20)
            try TusServers.curl(["-X", "POST", "-f", proxied + "/__fault/" + fault])
            let before = try server.requests().count
            let id = try daemon.submitUpload([
                work.file(name + ".bin"), "--to", "s3://photos/\(name)/", "--chunk-size", "5MiB",
            ])
            let done = try daemon.waitForState(id, "succeeded", timeout: 60)
            #expect(done["result"]?["sha256"]?.stringValue == expected)
            #expect(try server.object("\(name)/\(name).bin")?.sha256 == expected)
            let requests = Array(try server.requests().dropFirst(before))
            #expect(Self.count(requests, "CreateMultipartUpload") == 1)
            #expect(Set(Self.storedParts(requests)) == [1, 2, 3])
            if name == "damaged" {
                let refused = requests.filter { $0.action == "UploadPart" && $0.status == 400 }
                #expect(refused.count == 1, "the damaged part was refused by its checksum: \(requests)")
                #expect(Self.storedParts(requests).count == 3)
            }
        }
        // Through the proxy: 3 parts of each file, and one of each sent twice (refused; cut off).
        let proxyLog = try TusServers.curl([proxied + "/__log"]).split(separator: "\n")
        let partRequests = proxyLog.filter { $0.contains("\"method\": \"PUT\"") && $0.contains("partNumber=") }
        #expect(partRequests.count == 8, "\(partRequests.count) UploadPart requests through the proxy")
        #expect(try server.uploads() == 0)
    }

    /// A saved plan that disagrees with the upload it resumes (one written by another version, which knew no
    /// checksums) follows the upload: ListParts names its checksum algorithm, and the rest of the parts and the
    /// Complete carry SHA-256 checksums as S3 requires (the test server refuses them otherwise, as S3 does).
    @Test func aResumeFollowsTheChecksumAlgorithmTheUploadWasCreatedWith() throws {
        let server = try S3Server(minPartSize: 4096)
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let (id, expected) = try Self.pausedUpload(
            "p.bin", parts: 40, afterStoring: 5, to: "s3://photos/p/", server: server, daemon: daemon, work: work)
        _ = try daemon.stop()
        let store = try Database(path: daemon.statePath + "/jobs.sqlite3")
        let saved = try #require(try store.query("SELECT checkpoint FROM jobs WHERE id = ?", [.text(id)]).first?.text(0))
        #expect(saved.contains("\"checksum_sha256\":true"))
        try store.query(
            "UPDATE jobs SET checkpoint = ? WHERE id = ?",
            [.text(saved.replacingOccurrences(of: "\"checksum_sha256\":true", with: "\"checksum_sha256\":false")), .text(id)])
        try daemon.start()
        #expect(try daemon.cli(["resume", id]).status == 0)
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        #expect(daemon.log().contains("was created with checksum algorithm SHA256"))
        let requests = try server.requests()
        #expect(!requests.contains { $0.status == 400 }, "no part or Complete refused")
        #expect(requests.first { $0.action == "CompleteMultipartUpload" }?["part_checksums"]?.intValue == 40)
        #expect(try server.object("p/p.bin")?.sha256 == expected)
    }

    @Test func kill9After1000AcknowledgedPartsResumesTheSameUploadSendingOnlyMissingParts() throws {
        let server = try S3Server(minPartSize: 4096)
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let parts = 1_200
        let size = parts * 4096 - 100
        let expected = try UploadEndToEndTests.randomFile(work.file("many.bin"), bytes: size)
        let id = try daemon.submitUpload([
            work.file("many.bin"), "--to", "s3://photos/", "--chunk-size", "4KiB", "--min-part-size", "4KiB",
            "--max-rate", "640KiB",
        ])
        let deadline = Date().addingTimeInterval(60)
        while try Self.storedParts(server.requests()).count < 1_008 {
            #expect(Date() < deadline, "1008 parts acknowledged within 60 s")
            if Date() > deadline { return }
            usleep(20_000)
        }
        try daemon.crash()
        usleep(200_000)
        let before = try server.requests()
        let had = Set(Self.storedParts(before))
        #expect(had.count >= 1_008 && had.count < parts, "killed mid-upload with \(had.count) parts stored")
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        let after = Array(try server.requests().dropFirst(before.count))
        #expect(Self.count(after, "CreateMultipartUpload") == 0, "the saved UploadId was reused")
        let pages = after.filter { $0.action == "ListParts" }
        #expect(pages.count == 2, "two ListParts pages of at most 1000 parts")
        #expect(pages.last?["query"]?["part-number-marker"]?.stringValue == "1000")
        let sent = Self.storedParts(after)
        #expect(Set(sent).isDisjoint(with: had), "no part the server had was sent again")
        #expect(had.union(sent) == Set(1...parts))
        #expect(after.first { $0.action == "CompleteMultipartUpload" }?["parts"]?.arrayValue?.compactMap(\.intValue)
            == (1...parts).map { Int64($0) })
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        #expect(try server.object("many.bin")?.sha256 == expected)
        #expect(try server.uploads() == 0, "no multipart upload left")
    }

    @Test func sixtyMiBInFiveMiBPartsInterruptedThreeTimesIsExactlyTwelveParts() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("v.mov"), bytes: 60 << 20)
        let id = try daemon.submitUpload([
            work.file("v.mov"), "--to", "s3://photos/v/", "--chunk-size", "5MiB", "--max-rate", "16MiB",
            "--parts-in-flight", "2",
        ])
        for (round, stored) in [2, 5, 8].enumerated() {
            let deadline = Date().addingTimeInterval(60)
            while Set(try Self.storedParts(server.requests())).count < stored {
                guard Date() < deadline else { throw HarnessError("round \(round): \(stored) parts not stored in 60 s") }
                usleep(20_000)
            }
            if round == 1 { _ = try daemon.stop(signal: SIGTERM) } else { try daemon.crash() }
            try daemon.start()
        }
        let done = try daemon.waitForState(id, "succeeded", timeout: 90)
        let requests = try server.requests()
        #expect(Self.count(requests, "CreateMultipartUpload") == 1)
        let lengths = requests.filter { $0.action == "UploadPart" }.compactMap { $0["length"]?.intValue }
        #expect(Set(lengths) == [5_242_880], "every part sent is 5 242 880 bytes")
        #expect(requests.first { $0.action == "CompleteMultipartUpload" }?["parts"]?.arrayValue?.compactMap(\.intValue)
            == Array(Int64(1)...12))
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        let object = try #require(try server.object("v/v.mov"))
        #expect(object.size == 60 << 20 && object.sha256 == expected)
        #expect(try server.uploads() == 0)
    }

    /// Parts that went out before a `kill -9` and never landed are sent again on resume and count in
    /// `bytes_resent` (in full: each was handed to the transport before, `s3_parts_sent`); parts the server lists
    /// do not.
    @Test func kill9WithPartsPartWayOutCountsThemInBytesResent() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("r.mov"), bytes: 30 << 20)
        let id = try daemon.submitUpload([
            work.file("r.mov"), "--to", "s3://photos/r/", "--chunk-size", "5MiB", "--max-rate", "8MiB",
            "--parts-in-flight", "2",
        ])
        // Parts 1-4 acknowledged and more than 5 MiB in flight: parts 5 and 6 both part-way out (at 4 MiB/s each,
        // neither can be whole for another 0.6 s).
        try daemon.waitFor(id, timeout: 30, "parts 5 and 6 part-way out") { job in
            job["progress"]?["completed"]?.intValue == Int64(20 << 20)
                && (job["progress"]?["in_flight"]?.intValue ?? 0) > Int64(5 << 20)
        }
        try daemon.crash()
        #expect(Set(Self.storedParts(try server.requests())) == Set(1...4))
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        #expect(done["result"]?["bytes_resent"]?.intValue == Int64(10 << 20), "parts 5 and 6 went out twice")
        #expect(done["result"]?["files"]?.arrayValue?.first?["bytes_resent"]?.intValue == Int64(10 << 20))
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        #expect(try server.object("r/r.mov")?.sha256 == expected)
        #expect(Self.count(try server.requests(), "CreateMultipartUpload") == 1)
    }

    @Test func cancelMidUploadAbortsItAndLeavesNoObject() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("c.bin"), bytes: 40 << 20)
        let id = try daemon.submitUpload([
            work.file("c.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB", "--max-rate", "8MiB",
        ])
        try daemon.waitFor(id, "two parts stored") { _ in (try? Self.storedParts(server.requests()).count) ?? 0 >= 2 }
        let job = try daemon.job(["op": "cancel", "job": .string(id)])
        #expect(job["state"]?.stringValue == "cancelled")
        try Self.waitUntil("the multipart upload is aborted") { try server.uploads() == 0 }
        #expect(try server.object("c.bin") == nil, "no object")
        let requests = try server.requests()
        #expect(Self.count(requests, "AbortMultipartUpload") >= 1)
        #expect(requests.last { $0.action == "ListParts" }?.status == 404, "aborted until ListParts says NoSuchUpload")
    }

    /// The keys of the `PutObject` requests in `requests` whose answers were sent with `status` (not withheld).
    static func putKeys(_ requests: [JSONValue], status: Int64 = 200) -> [String] {
        requests.filter { $0.action == "PutObject" && $0.status == status && $0["held"]?.boolValue != true }
            .compactMap { $0["path"]?.stringValue }
    }

    /// `count` files of `bytes` random bytes each, `f00.bin`, `f01.bin`, …: their paths and SHA-256s.
    static func smallFiles(_ work: TemporaryDirectory, count: Int, bytes: Int) throws -> [(path: String, sha256: String)] {
        try (0..<count).map { i in
            let name = work.file(String(format: "f%02d.bin", i))
            return (name, try UploadEndToEndTests.randomFile(name, bytes: bytes))
        }
    }

    @Test func smallFilesGoSeveralAtOnceAndLandOutOfOrderYetTheResultIsInOrder() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let files = try Self.smallFiles(work, count: 12, bytes: 3000)
        // The first file's answer is withheld: the others must go past it, three at a time beside it.
        try server.hold("PutObject", count: 1)
        let id = try daemon.submitUpload(files.map(\.path) + ["--to", "s3://photos/s/", "--parts-in-flight", "4"])
        try Self.waitUntil("the 11 other files are stored while the first one's answer is withheld") {
            Self.putKeys(try server.requests()).count == 11
        }
        let running = try daemon.waitFor(id, "the landed files counted") { $0["progress"]?["completed"]?.intValue == Int64(11 * 3000) }
        #expect(running["state"]?.stringValue == "running", "the first file is still in flight")
        try server.clearFaults()
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        let result = try #require(done["result"]?["files"]?.arrayValue)
        #expect(result.map { $0["sha256"]?.stringValue } == files.map(\.sha256), "every file, in the order given")
        #expect(result.map { $0["path"]?.stringValue } == (0..<12).map { String(format: "s3://photos/s/f%02d.bin", $0) })
        #expect(done["progress"]?["completed"]?.intValue == Int64(12 * 3000))
        for (i, file) in files.enumerated() {
            #expect(try server.object(String(format: "s/f%02d.bin", i))?.sha256 == file.sha256)
        }
        let requests = try server.requests()
        #expect(Self.count(requests, "PutObject") >= 12)
        #expect(Self.count(requests, "HeadObject") == 0, "an ETag equal to the checked Content-MD5 needs no HEAD")
    }

    @Test func kill9AmidManySmallFilesResendsOnlyTheOnesNotRecorded() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let files = try Self.smallFiles(work, count: 40, bytes: 2000)
        // Three answers withheld: three files stay in flight while the fourth slot carries the rest past them.
        try server.hold("PutObject", count: 3)
        let id = try daemon.submitUpload(files.map(\.path) + ["--to", "s3://photos/k/", "--parts-in-flight", "4"])
        try Self.waitUntil("20 files landed past the three withheld ones") {
            Self.putKeys(try server.requests()).count >= 20
        }
        try daemon.crash()
        let before = try server.requests()
        let held = Set(before.filter { $0["held"]?.boolValue == true }.compactMap { $0["path"]?.stringValue })
        let landed = Set(Self.putKeys(before))
        #expect(held.count == 3 && landed.count >= 20 && landed.count < 40)
        // The first file that landed (long recorded: 19 more landed after it) is moved away meanwhile, as a user
        // may do with a file already uploaded: the resume does not need it.
        let first = try #require(Self.putKeys(before).first)
        let moved = work.file(String(first.split(separator: "/").last!))
        try FileManager.default.moveItem(atPath: moved, toPath: moved + ".elsewhere")
        try server.clearFaults()
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        let after = Array(try server.requests().dropFirst(before.count))
        let resent = Set(after.filter { $0.action == "PutObject" }.compactMap { $0["path"]?.stringValue })
        #expect(held.isSubset(of: resent), "the files whose answers never came are sent again")
        // At most the one file in the fourth slot can have landed without its record saved before the kill.
        #expect(resent.intersection(landed).count <= 1, "files recorded as landed are not sent again: \(resent.intersection(landed))")
        let result = try #require(done["result"]?["files"]?.arrayValue)
        #expect(result.map { $0["sha256"]?.stringValue } == files.map(\.sha256), "every file once, in order")
        for (i, file) in files.enumerated() {
            #expect(try server.object(String(format: "k/f%02d.bin", i))?.sha256 == file.sha256)
        }
        #expect(try server.uploads() == 0)
    }

    @Test func cancelWithSeveralFilesInFlightEndsAtOnceAndSendsNoMore() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let files = try Self.smallFiles(work, count: 20, bytes: 2000)
        _ = try UploadEndToEndTests.randomFile(work.file("z-big.bin"), bytes: 12 << 20)
        // Four answers withheld: four files in flight, none can finish.
        try server.hold("PutObject", count: 4)
        let id = try daemon.submitUpload(
            files.map(\.path) + [work.file("z-big.bin"), "--to", "s3://photos/c/", "--parts-in-flight", "4",
                "--chunk-size", "5MiB"])
        try Self.waitUntil("four files in flight") {
            try server.requests().filter { $0["held"]?.boolValue == true }.count == 4
        }
        let job = try daemon.job(["op": "cancel", "job": .string(id)])
        #expect(job["state"]?.stringValue == "cancelled")
        let seen = try server.requests().count
        try server.clearFaults()
        usleep(300_000)
        let later = Array(try server.requests().dropFirst(seen))
        #expect(later.filter { $0.action == "PutObject" || $0.action == "CreateMultipartUpload" }.isEmpty,
            "nothing sent after the cancel")
        #expect(Self.count(try server.requests(), "CreateMultipartUpload") == 0, "the big file never started")
        #expect(try server.uploads() == 0)
        #expect(try server.object("c/z-big.bin") == nil)
    }

    @Test func smallFilesAroundALargeOneKeepTheirOrder() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let first = try Self.smallFiles(work, count: 5, bytes: 1500)
        let big = try UploadEndToEndTests.randomFile(work.file("m-big.bin"), bytes: 11 << 20)
        let last = try (0..<5).map { i in
            let name = work.file("z\(i).bin")
            return (path: name, sha256: try UploadEndToEndTests.randomFile(name, bytes: 1500))
        }
        let id = try daemon.submitUpload(
            first.map(\.path) + [work.file("m-big.bin")] + last.map(\.path)
                + ["--to", "s3://photos/o/", "--chunk-size", "5MiB"])
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        let result = try #require(done["result"]?["files"]?.arrayValue)
        #expect(result.map { $0["sha256"]?.stringValue } == first.map(\.sha256) + [big] + last.map(\.sha256))
        let requests = try server.requests()
        let create = try #require(requests.firstIndex { $0.action == "CreateMultipartUpload" })
        let complete = try #require(requests.firstIndex { $0.action == "CompleteMultipartUpload" })
        let puts = requests.indices.filter { requests[$0].action == "PutObject" }
        #expect(puts.filter { $0 < create }.count == 5 && puts.filter { $0 > complete }.count == 5,
            "the large file goes alone, between the small ones before and after it")
        #expect(try server.object("o/m-big.bin")?.sha256 == big)
    }

    /// Polls `condition` every 20 ms for up to `timeout` seconds.
    static func waitUntil(_ what: String, timeout: Double = 15, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while try !condition() {
            guard Date() < deadline else { throw HarnessError("timed out waiting until \(what)") }
            usleep(20_000)
        }
    }

    @Test func anAbortTheServerRefusesIsRetriedAcrossARestart() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("r.bin"), bytes: 30 << 20)
        let id = try daemon.submitUpload([
            work.file("r.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB", "--max-rate", "8MiB",
        ])
        try daemon.waitFor(id, "a part stored") { _ in (try? Self.storedParts(server.requests()).count) ?? 0 >= 1 }
        try server.arm("code=503&count=1000&action=AbortMultipartUpload&s3_code=ServiceUnavailable")
        #expect(try daemon.job(["op": "cancel", "job": .string(id)])["state"]?.stringValue == "cancelled")
        try Self.waitUntil("an abort was refused") { Self.count(try server.requests(), "AbortMultipartUpload") >= 1 }
        try daemon.crash()
        #expect(try server.uploads() == 1, "still there while the server refuses")
        try server.clearFaults()
        try daemon.start()
        try Self.waitUntil("the restarted daemon aborted it", timeout: 30) { try server.uploads() == 0 }
        #expect(try server.object("r.bin") == nil)
        #expect(try server.requests().last { $0.action == "ListParts" }?.status == 404)
    }

    @Test func aSourceChangedMidUploadFailsAndTheUploadIsAborted() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("m.bin"), bytes: 30 << 20)
        let id = try daemon.submitUpload([
            work.file("m.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB", "--max-rate", "8MiB",
        ])
        try daemon.waitFor(id, "a part stored") { _ in (try? Self.storedParts(server.requests()).count) ?? 0 >= 1 }
        let handle = try #require(FileHandle(forWritingAtPath: work.file("m.bin")))
        try handle.seek(toOffset: 1)
        try handle.write(contentsOf: Data([0x42]))
        try handle.close()
        let failed = try daemon.waitForState(id, "failed")
        #expect(failed["error"]?["code"]?.stringValue == "source_changed")
        try Self.waitUntil("the multipart upload is aborted") { try server.uploads() == 0 }
        #expect(try server.object("m.bin") == nil)
    }

    @Test func anUploadGoneOnTheServerIsCreatedAgainWithAWarning() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        // 8 parts: with 4 in flight sharing the rate, the first 4 land together, so a 4-part file would be done by
        // the time one part is seen stored (CI once saw it succeed before the kill).
        let expected = try UploadEndToEndTests.randomFile(work.file("g.bin"), bytes: 40 << 20)
        let id = try daemon.submitUpload([
            work.file("g.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB", "--max-rate", "8MiB",
        ])
        try daemon.waitFor(id, "a part stored") { _ in (try? Self.storedParts(server.requests()).count) ?? 0 >= 1 }
        try daemon.crash()
        try server.abortAll()
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        #expect(try server.object("g.bin")?.sha256 == expected)
        #expect(Self.count(try server.requests(), "CreateMultipartUpload") == 2)
        #expect(daemon.log().contains("NoSuchUpload"), "announced in the job's log")
        // Every part that had gone out before the kill (the stored ones, lost with the upload, and those in flight)
        // went to the new upload again, whole: at least the 4 that landed together.
        let resent = done["result"]?["bytes_resent"]?.intValue ?? 0
        #expect(resent >= 20 << 20 && resent <= 40 << 20 && resent % (5 << 20) == 0, "bytes_resent \(resent)")
    }

    @Test func slowDownAndServerErrorsAreRetriedWithBackoff() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("s.bin"), bytes: 11 << 20)
        try server.arm("code=503&count=2&action=UploadPart&s3_code=SlowDown&retry_after=1")
        try server.arm("code=500&count=1&action=CompleteMultipartUpload&s3_code=InternalError")
        let started = Date()
        let id = try daemon.submitUpload([work.file("s.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB"])
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        #expect(Date().timeIntervalSince(started) >= 1, "waited the Retry-After second")
        #expect(done["attempt"]?.intValue == 1, "retried within the attempt")
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        let requests = try server.requests()
        #expect(requests.filter { $0["fault"]?.boolValue == true }.count == 3)
        #expect(Self.count(requests, "CompleteMultipartUpload") == 2)
    }

    @Test func wrongSecretMissingBucketAndSkewedClockFailAtOnceWithTheirCodes() throws {
        let server = try S3Server(auth: true)
        let (key, secret) = try server.credentials()
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("w.bin"), bytes: 6 << 20)

        let wrong = try DaemonHarness(environment: server.environment(accessKey: key, secret: secret + "x"))
        let a = try wrong.submitUpload([work.file("w.bin"), "--to", "s3://photos/"])
        let failed = try wrong.waitForState(a, "failed")
        #expect(failed["error"]?["code"]?.stringValue == "signature_does_not_match")
        #expect(try server.requests().count == 1, "one request, no retry storm")
        #expect(!wrong.log().contains(secret))
        _ = try wrong.stop()

        let daemon = try DaemonHarness(environment: server.environment(accessKey: key, secret: secret))
        let b = try daemon.submitUpload([work.file("w.bin"), "--to", "s3://no-such-bucket/"])
        #expect(try daemon.waitForState(b, "failed")["error"]?["code"]?.stringValue == "no_such_bucket")
        #expect(try server.requests().count == 2)

        // The server's answer to a skewed clock, injected (S3FaultEndToEndTests skews the daemon's clock instead).
        try server.arm("code=403&count=1&s3_code=RequestTimeTooSkewed")
        let c = try daemon.submitUpload([work.file("w.bin"), "--to", "s3://photos/"])
        let skewed = try daemon.waitForState(c, "failed")
        #expect(skewed["error"]?["code"]?.stringValue == "request_time_too_skewed")
        #expect(skewed["error"]?["message"]?.stringValue?.contains("clock") == true)
        #expect(try server.requests().count == 3)
    }

    @Test func malformedDestinationsAndFilesBeyondTheLimitsAreRefusedAtSubmit() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("x.bin"), bytes: 100)
        for bad in ["s3://", "s3://UPPER/", "s3://ab/", "s3://bucket/prefix-without-slash", "s3:/bucket/", "s3://bu..cket/"] {
            let result = try daemon.cli(["submit", "upload", work.file("x.bin"), "--to", bad])
            #expect(result.status != 0, "\(bad) refused")
            #expect(result.stderr.contains("bad_destination"), "\(bad): \(result.stderr)")
        }
        // 6 GiB (sparse) in at most 1 part would need a part above S3's 5 GiB.
        let huge = work.file("huge.bin")
        _ = FileManager.default.createFile(atPath: huge, contents: nil)
        #expect(truncate(huge, 6 << 30) == 0)
        let result = try daemon.cli(["submit", "upload", huge, "--to", "s3://photos/", "--max-parts", "1"])
        #expect(result.status != 0 && result.stderr.contains("too_large"), "\(result.stderr)")
        let options = try daemon.cli(["submit", "upload", work.file("x.bin"), "--to", "file:///tmp", "--region", "x"])
        #expect(options.status != 0 && options.stderr.contains("s3://"), "\(options.stderr)")
    }
}
