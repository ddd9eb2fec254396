import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// The upload job to a `file://` directory, driven through the real daemon and CLI.
@Suite(.serialized)
struct UploadEndToEndTests {
    /// Writes `bytes` of random data to `path` and returns its SHA-256 (hex).
    static func randomFile(_ path: String, bytes: Int) throws -> String {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        let digest = SHA256()
        var remaining = bytes
        while remaining > 0 {
            let block = try randomBytes(min(remaining, 1 << 20))
            digest.update(block)
            try handle.write(contentsOf: block)
            remaining -= block.count
        }
        return digest.hexDigest
    }

    /// `count` random bytes from the kernel (`/dev/urandom`, one read per call): a word-by-word generator took
    /// seconds per 100 MiB in a debug build.
    static func randomBytes(_ count: Int) throws -> Data {
        guard let urandom = FileHandle(forReadingAtPath: "/dev/urandom") else { throw HarnessError("cannot open /dev/urandom") }
        defer { try? urandom.close() }
        var data = Data()
        while data.count < count {
            guard let more = try urandom.read(upToCount: count - data.count), !more.isEmpty else {
                throw HarnessError("/dev/urandom ended")
            }
            data += more
        }
        return data
    }

    static func sha256(ofFile path: String) throws -> String {
        SHA256.hexDigest(of: try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test func a200MiBFileArrivesWithTheSameSHA256() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        let expected = try Self.randomFile(work.file("big.bin"), bytes: 200 << 20)
        let result = try daemon.cli(["submit", "upload", work.file("big.bin"), "--to", "file://" + work.file("out"), "--wait", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let job = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
        #expect(job["state"]?.stringValue == "succeeded")
        #expect(job["result"]?["sha256"]?.stringValue == expected)
        #expect(job["result"]?["bytes"]?.intValue == 200 << 20)
        #expect(job["progress"]?["completed"]?.intValue == 200 << 20)
        #expect(job["progress"]?["unit"]?.stringValue == "bytes")
        #expect(try Self.sha256(ofFile: work.file("out/big.bin")) == expected)
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.file("out")) == ["big.bin"], "no .part left")
    }

    /// A file name that is not UTF-8 (Latin-1 `caf\xe9.jpg`) was refused as `source_missing` (issue 10, item 4):
    /// it uploads under its exact bytes, given relative on the command line; params and result carry it as
    /// `{"base64", "text"}`; `show` displays it escaped.
    @Test func aNameThatIsNotUTF8UploadsWithItsExactBytes() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        let name = TemporaryDirectory.latin1Name
        let content = Array("not utf-8 in the name, only in the bytes".utf8)
        try work.create(name, contents: content)
        // The shell passes the byte 0xE9 as it is (printf '\351'); the path is relative to the working directory.
        let result = try DaemonHarness.run(
            "/bin/sh",
            ["-c", "cd \"$1\" && exec \"$0\" submit upload \"$(printf 'caf\\351.jpg')\" --to out --wait --json", Binary.path, work.file("")],
            environment: daemon.environment)
        #expect(result.status == 0, "\(result.stderr)")
        let job = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
        #expect(job["state"]?.stringValue == "succeeded")
        let expected: JSONValue = ["base64": "Y2Fm6S5qcGc=", "text": "caf\\xe9.jpg"]
        #expect(job["result"]?["files"]?.arrayValue?.first?["name"] == expected)
        let source = job["params"]?["files"]?.arrayValue?.first?["base64"]?.stringValue.flatMap { Data(base64Encoded: $0) }
        #expect(source.map { Array($0).reversed().starts(with: ([UInt8(ascii: "/")] + name.bytes).reversed()) } == true)
        // The copy has the same name, byte for byte, and the same content.
        let copy = BytePath.join(BytePath(work.file("out")), name)
        var info = stat()
        #expect(copy.withCString { stat($0, &info) } == 0)
        #expect(Int(info.st_size) == content.count)
        #expect(job["result"]?["sha256"]?.stringValue == SHA256.hexDigest(of: Data(content)))
        // `show` prints the JSON: the text form, no U+FFFD.
        let shown = try daemon.cli(["show", job["id"]?.stringValue ?? ""])
        #expect(shown.stdout.contains(#""text":"caf\\xe9.jpg""#), "\(shown.stdout)")
        #expect(!shown.stdout.contains("\u{FFFD}"))
    }

    /// `--each` names a refused entry as it was typed, byte for byte: `caf\xe9.jpg`, not `caf\u{FFFD}.jpg` (the
    /// label was the argument decoded as a Swift `String`, which repairs the byte).
    @Test func eachNamesARefusedEntryThatIsNotUTF8AsTyped() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        try work.create("good.jpg", contents: Array("ok".utf8))
        let result = try DaemonHarness.run(
            "/bin/sh",
            ["-c", "cd \"$1\" && exec \"$0\" submit upload good.jpg \"$(printf 'caf\\351.jpg')\" --to out --each", Binary.path, work.file("")],
            environment: daemon.environment)
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("caf\\xe9.jpg: job 1 of the batch"), "\(result.stderr)")
        #expect(result.stderr.contains("[source_missing]"), "\(result.stderr)")
        #expect(!result.stderr.contains("\u{FFFD}"), "\(result.stderr)")
    }

    /// Without `--chunk-size` a directory upload syncs and checkpoints every 64 MiB or every second, whichever
    /// comes first (issue 14): at 4 MiB/s that is about every 4 MiB, so a `kill -9` after 2.5 s re-sends at most
    /// one second's worth plus the piece under way, far below 64 MiB.
    @Test func withoutAChunkSizeCheckpointsFollowTimeAndAKill9ResendsAboutOneSecond() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        let size = 16 << 20
        let expected = try Self.randomFile(work.file("clip.bin"), bytes: size)
        let id = try daemon.submitUpload([work.file("clip.bin"), "--to", "file://" + work.file("out"), "--max-rate", "4MiB"])
        #expect(try daemon.show(id)["params"]?["chunk_size"] == nil, "no chunk size stored: bytes and time decide")
        try daemon.waitFor(id, timeout: 20, "10 MiB") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 10 << 20 }
        try daemon.crash()
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        let resent = try #require(done["result"]?["bytes_resent"]?.intValue)
        #expect(resent <= 5 << 20, "re-sent \(resent) bytes: more than a second's worth at 4 MiB/s and a piece")
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        #expect(try Self.sha256(ofFile: work.file("out/clip.bin")) == expected)
    }

    @Test func kill9HalfWayThenRestartResendsAtMostOneChunk() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        let size = 64 << 20
        let chunk = 4 << 20
        let expected = try Self.randomFile(work.file("photo.bin"), bytes: size)
        let id = try daemon.submitUpload([work.file("photo.bin"), "--to", "file://" + work.file("out"), "--max-rate", "20MiB", "--chunk-size", "4MiB"])
        try daemon.waitFor(id, timeout: 10, "half way") { ($0["progress"]?["completed"]?.intValue ?? 0) >= Int64(size / 2) }
        try daemon.crash()
        #expect(
            FileManager.default.fileExists(atPath: work.file("out/photo.bin.\(id.prefix(8)).part")), "the .part survives a crash")
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        let resent = try #require(done["result"]?["bytes_resent"]?.intValue)
        #expect(resent <= Int64(chunk), "re-sent \(resent) bytes, more than one chunk")
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        #expect(try Self.sha256(ofFile: work.file("out/photo.bin")) == expected)
    }

    /// A `kill -9` while the second file is copied, with the checkpoint still at the first (its end is saved with
    /// the next chunk's worth of files, and a 64 MiB chunk gives no sync within the second): the second file's
    /// `.part` is truncated on the resume and its bytes count in `bytes_resent`. They used to be counted only for
    /// the file the checkpoint named, so the job said 0.
    @Test func aLaterFilesPartLeftByACrashCountsAsResent() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        _ = try Self.randomFile(work.file("small.bin"), bytes: 1 << 20)
        let big = try Self.randomFile(work.file("big.bin"), bytes: 32 << 20)
        let id = try daemon.submitUpload(
            [work.file("small.bin"), work.file("big.bin"), "--to", "file://" + work.file("out"), "--max-rate", "8MiB",
             "--chunk-size", "64MiB"])
        try daemon.waitFor(id, "6 MiB of big.bin") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 7 << 20 }
        try daemon.crash()
        let part = work.file("out/big.bin.\(id.prefix(8)).part")
        let left = try #require(try FileManager.default.attributesOfItem(atPath: part)[.size] as? Int)
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        let resent = try #require(done["result"]?["bytes_resent"]?.intValue)
        #expect(resent >= Int64(left), "re-sent \(resent) bytes; big.bin's .part held \(left)")
        let files = done["result"]?["files"]?.arrayValue ?? []
        #expect(files.last?["bytes_resent"]?.intValue ?? 0 >= Int64(left), "\(files)")
        #expect(try Self.sha256(ofFile: work.file("out/big.bin")) == big)
    }

    /// Issue 11 §9: a `kill -9` between the rename that finishes a file and the checkpoint that records it. The
    /// crash is made at a chunk of big.bin; then the test does what the daemon would have done next (writes the
    /// rest of the bytes into the same .part and renames it into place) before restarting it. The finished file
    /// must be taken as it is: same inode (not rewritten), nothing re-sent, its SHA-256 read back.
    @Test func aFileFinishedJustBeforeACrashIsNotCopiedAgain() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        let size = 24 << 20 + 512 << 10
        let big = try Self.randomFile(work.file("big.bin"), bytes: size)
        let small = try Self.randomFile(work.file("small.bin"), bytes: 100_000)
        let id = try daemon.submitUpload([
            work.file("big.bin"), work.file("small.bin"), "--to", "file://" + work.file("out"), "--max-rate", "8MiB",
            "--chunk-size", "1MiB",
        ])
        try daemon.waitFor(id, "a few chunks") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 4 << 20 }
        try daemon.crash()
        let part = work.file("out/big.bin.\(id.prefix(8)).part")
        let handle = try #require(FileHandle(forWritingAtPath: part))
        try handle.write(contentsOf: try Data(contentsOf: URL(fileURLWithPath: work.file("big.bin"))))
        try handle.synchronize()
        try handle.close()
        #expect(rename(part, work.file("out/big.bin")) == 0)
        let inode = try #require(try FileManager.default.attributesOfItem(atPath: work.file("out/big.bin"))[.systemFileNumber] as? UInt64)

        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        #expect(done["result"]?["bytes_resent"]?.intValue == 0, "nothing copied again")
        let files = done["result"]?["files"]?.arrayValue ?? []
        #expect(files.map { $0["sha256"]?.stringValue } == [big, small])
        #expect(files.first?["bytes"]?.intValue == Int64(size))
        let after = try FileManager.default.attributesOfItem(atPath: work.file("out/big.bin"))[.systemFileNumber] as? UInt64
        #expect(after == inode, "big.bin was not written again")
        #expect(try Self.sha256(ofFile: work.file("out/big.bin")) == big)
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.file("out")).sorted() == ["big.bin", "small.bin"])
    }

    /// Issue 11 §8: the same file to the same place while the first job has not ended is refused, naming the
    /// first job, unless --allow-duplicate; once the first has ended it is accepted again.
    @Test func aSecondSubmitOfTheSameFileToTheSamePlaceIsRefusedAsDuplicate() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        _ = try Self.randomFile(work.file("a.bin"), bytes: 8 << 20)
        _ = try Self.randomFile(work.file("b.bin"), bytes: 1 << 10)
        let first = try daemon.submitUpload([work.file("a.bin"), "--to", "file://" + work.file("out"), "--max-rate", "1MiB"])
        // The same place written differently (a plain path with a trailing slash), with another file beside it.
        let again = try daemon.cli(["submit", "upload", work.file("b.bin"), work.file("a.bin"), "--to", work.file("out") + "/"])
        #expect(again.status == 2, "\(again.stderr)")
        #expect(again.stderr.contains("[duplicate_upload]"), "\(again.stderr)")
        #expect(again.stderr.contains(first), "names the first job: \(again.stderr)")
        #expect(again.stderr.contains(work.file("a.bin")), "\(again.stderr)")
        #expect(!again.stderr.contains("b.bin"), "\(again.stderr)")
        let other = try daemon.cli(["submit", "upload", work.file("b.bin"), "--to", work.file("out")])
        #expect(other.status == 0, "another file to the same place is no duplicate: \(other.stderr)")
        try FileManager.default.createDirectory(atPath: work.file("out2"), withIntermediateDirectories: true)
        let elsewhere = try daemon.cli(["submit", "upload", work.file("a.bin"), "--to", work.file("out2")])
        #expect(elsewhere.status == 0, "the same file to another place is no duplicate: \(elsewhere.stderr)")
        let allowed = try daemon.cli([
            "submit", "upload", work.file("a.bin"), "--to", "file://" + work.file("out"), "--allow-duplicate", "--max-rate", "1MiB", "--json",
        ])
        #expect(allowed.status == 0, "\(allowed.stderr)")
        let allowedID = try #require(try JSONCoding.decode(JSONValue.self, from: Array(allowed.stdout.utf8))["id"]?.stringValue)
        #expect(try daemon.cli(["cancel", first]).status == 0)
        #expect(try daemon.cli(["cancel", allowedID]).status == 0)
        let afterEnd = try daemon.cli(["submit", "upload", work.file("a.bin"), "--to", "file://" + work.file("out")])
        #expect(afterEnd.status == 0, "accepted once the others ended: \(afterEnd.stderr)")
        let jobs = try daemon.request(["op": "list"])["jobs"]?.arrayValue ?? []
        #expect(jobs.count == 5, "first, other, elsewhere, allowed, afterEnd; the refused one was never queued")
    }

    /// Something else cuts the job's `.part` file to nothing mid-copy (found by a helper: the copy went on past the
    /// cut, leaving a hole of zeros, and the job ended `succeeded` with a hash of neither file). The chunk end's
    /// check refuses it, retryably; the next attempt finds the `.part` shorter than its checkpoint, starts the file
    /// again, and the result's SHA-256 is the source's and the destination's.
    @Test func aPartFileCutShortMidCopyIsCopiedAgainNotClaimed() throws {
        let daemon = try DaemonHarness(arguments: ["--retry-base", "0.2s"])
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        let expected = try Self.randomFile(work.file("a.bin"), bytes: 24 << 20)
        let id = try daemon.submitUpload([work.file("a.bin"), "--to", "file://" + work.file("out"), "--max-rate", "8MiB"])
        try daemon.waitFor(id, "some bytes") { ($0["progress"]?["completed"]?.intValue ?? 0) > 2 << 20 }
        let part = try #require(try FileManager.default.contentsOfDirectory(atPath: work.file("out")).first { $0.hasSuffix(".part") })
        #expect(truncate(work.file("out/" + part), 0) == 0)
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        #expect(done["attempt"]?.intValue == 2, "the cut attempt ended needs_retry: \(done)")
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        #expect(try Self.sha256(ofFile: work.file("out/a.bin")) == expected)
        #expect(daemon.log().contains("something else changed the partial file"), "the refusal is in the log")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.file("out")) == ["a.bin"])
    }

    @Test func cancelMidUploadRemovesThePartWithin100Milliseconds() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        _ = try Self.randomFile(work.file("a.bin"), bytes: 32 << 20)
        let id = try daemon.submitUpload([work.file("a.bin"), "--to", "file://" + work.file("out"), "--max-rate", "8MiB"])
        try daemon.waitFor(id, "some bytes") { ($0["progress"]?["completed"]?.intValue ?? 0) > 1 << 20 }
        let started = Date()
        let job = try daemon.job(["op": "cancel", "job": .string(id)])
        let elapsed = Date().timeIntervalSince(started)
        #expect(job["state"]?.stringValue == "cancelled")
        #expect(job["cancellation"]?["reason"]?.stringValue == "user_stop")
        #expect(elapsed < 0.1, "cancel took \(elapsed) s")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.file("out")).isEmpty, "no .part left")
        #expect(!FileManager.default.fileExists(atPath: work.file("out/a.bin")))
    }

    /// Issue 11 §9: finished files are checkpointed in batches, so when `cancel` comes the checkpoint may still
    /// name an earlier file; every `.part` the job wrote goes, not only the checkpoint's.
    @Test func cancelRemovesThePartOfAFileTheCheckpointHasNotReachedYet() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        let small = try Self.randomFile(work.file("small.bin"), bytes: 64 << 10)
        _ = try Self.randomFile(work.file("big.bin"), bytes: 12 << 20)
        let id = try daemon.submitUpload([
            work.file("small.bin"), work.file("big.bin"), "--to", "file://" + work.file("out"), "--max-rate", "1MiB",
        ])
        let part = work.file("out/big.bin.\(id.prefix(8)).part")
        // Past small.bin and into big.bin (1.5 s at 1 MiB/s), well before the 8 MiB chunk's checkpoint.
        try daemon.waitFor(id, "big.bin under way") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 1_536 << 10 }
        #expect(FileManager.default.fileExists(atPath: part), "big.bin is being written to its .part")
        let job = try daemon.job(["op": "cancel", "job": .string(id)])
        #expect(job["state"]?.stringValue == "cancelled")
        #expect(!FileManager.default.fileExists(atPath: part), "no big.bin .part left")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.file("out")) == ["small.bin"], "only the finished file")
        #expect(try Self.sha256(ofFile: work.file("out/small.bin")) == small)
    }

    /// A stop that keeps the upload — a pause, a SIGTERM, a deadline — syncs and checkpoints what is copied: the
    /// next attempt resumes there. With a chunk larger than the file there is no periodic sync to fall back on: the
    /// checkpoint used to stay at the last one (here the start), so a pause re-sent everything copied, and under a
    /// deadline shorter than a chunk's copy no attempt got past the first one's start.
    @Test func aPauseASigtermAndADeadlineKeepWhatIsCopied() throws {
        let daemon = try DaemonHarness(arguments: ["--retry-base", "100ms"])
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        let expected = try Self.randomFile(work.file("clip.bin"), bytes: 40 << 20)
        let id = try daemon.submitUpload(
            [work.file("clip.bin"), "--to", "file://" + work.file("out"), "--max-rate", "16MiB", "--chunk-size", "64MiB"])
        try daemon.waitFor(id, "8 MiB") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 8 << 20 }
        _ = try daemon.job(["op": "pause", "job": .string(id)])
        _ = try daemon.job(["op": "resume", "job": .string(id)])
        try daemon.waitFor(id, "20 MiB") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 20 << 20 }
        _ = try daemon.stop(signal: SIGTERM)
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        // What a stop loses is the piece under way when it came (a rate-limited piece is at most 1 MiB), per stop.
        let resent = try #require(done["result"]?["bytes_resent"]?.intValue)
        #expect(resent <= 2 << 20, "re-sent \(resent) bytes after a pause and a SIGTERM")
        #expect(try Self.sha256(ofFile: work.file("out/clip.bin")) == expected)

        // 0.9 s a try at 16 MiB/s is about 14 MiB: each attempt must go on from the last one's bytes.
        try FileManager.default.createDirectory(atPath: work.file("out2"), withIntermediateDirectories: true)
        let timed = try daemon.submitUpload(
            [work.file("clip.bin"), "--to", "file://" + work.file("out2"), "--max-rate", "16MiB", "--chunk-size", "64MiB",
             "--timeout", "900ms", "--max-attempts", "6"])
        let ended = try daemon.waitFor(timed, timeout: 60, "its end") {
            ["succeeded", "failed"].contains($0["state"]?.stringValue ?? "")
        }
        #expect(ended["state"]?.stringValue == "succeeded", "\(ended)")
        #expect((ended["attempt"]?.intValue ?? 0) >= 3, "the deadline stopped it on the way: \(ended)")
        #expect(try Self.sha256(ofFile: work.file("out2/clip.bin")) == expected)
    }

    @Test func sigtermDuringUploadsRequeuesThemAndTheyFinishAfterRestart() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        let first = try Self.randomFile(work.file("one.bin"), bytes: 24 << 20)
        let second = try Self.randomFile(work.file("two.bin"), bytes: 24 << 20)
        let id = try daemon.submitUpload([work.file("one.bin"), work.file("two.bin"), "--to", "file://" + work.file("out"), "--max-rate", "16MiB", "--chunk-size", "2MiB"])
        try daemon.waitFor(id, "progress") { ($0["progress"]?["completed"]?.intValue ?? 0) > 8 << 20 }
        let (status, seconds) = try daemon.stop(signal: SIGTERM)
        #expect(status == 0)
        #expect(seconds < 2)
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        #expect(done["cancellation"]?.isNull == true, "a succeeded job is not a stopped one")
        #expect(done["last_stop"]?["reason"]?.stringValue == "resource_reclaim")
        #expect((done["result"]?["bytes_resent"]?.intValue ?? .max) <= 2 << 20)
        #expect(try Self.sha256(ofFile: work.file("out/one.bin")) == first)
        #expect(try Self.sha256(ofFile: work.file("out/two.bin")) == second)
        let files = done["result"]?["files"]?.arrayValue ?? []
        #expect(files.count == 2)
    }

    @Test func aSourceChangedBetweenAttemptsFailsWithSourceChanged() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        _ = try Self.randomFile(work.file("c.bin"), bytes: 16 << 20)
        let id = try daemon.submitUpload([work.file("c.bin"), "--to", "file://" + work.file("out"), "--max-rate", "8MiB", "--chunk-size", "1MiB"])
        try daemon.waitFor(id, "progress") { ($0["progress"]?["completed"]?.intValue ?? 0) > 2 << 20 }
        #expect(try daemon.cli(["pause", id]).status == 0)
        _ = try Self.randomFile(work.file("c.bin"), bytes: 16 << 20)
        #expect(try daemon.cli(["resume", id]).status == 0)
        let failed = try daemon.waitForState(id, "failed", timeout: 20)
        #expect(failed["error"]?["code"]?.stringValue == "source_changed")
        #expect(!FileManager.default.fileExists(atPath: work.file("out/c.bin")), "no silently corrupt copy")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.file("out")).isEmpty, "a failed job leaves no .part")
    }

    /// Two jobs uploading different files of the same name to one directory, one paused half way: the second is
    /// refused (`duplicate_upload`: its copy would replace the first's); with `--allow-duplicate` each writes its
    /// own .part, each result's SHA-256 is its own source's, and the final file is the one renamed last, whole.
    @Test func sameNameUploadsNeverMixTheirBytes() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        for folder in ["a", "b", "out"] {
            try FileManager.default.createDirectory(atPath: work.file(folder), withIntermediateDirectories: true)
        }
        let first = try Self.randomFile(work.file("a/n.bin"), bytes: 12 << 20)
        let second = try Self.randomFile(work.file("b/n.bin"), bytes: 12 << 20)
        let paused = try daemon.submitUpload([work.file("a/n.bin"), "--to", work.file("out"), "--max-rate", "8MiB", "--chunk-size", "1MiB"])
        try daemon.waitFor(paused, "some bytes") { ($0["progress"]?["completed"]?.intValue ?? 0) > 3 << 20 }
        #expect(try daemon.cli(["pause", paused]).status == 0)
        let refused = try daemon.cli(["submit", "upload", work.file("b/n.bin"), "--to", work.file("out"), "--wait", "--json"])
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.contains("a file named n.bin") && refused.stderr.contains(paused), "\(refused.stderr)")
        let other = try daemon.cli(["submit", "upload", work.file("b/n.bin"), "--to", work.file("out"), "--allow-duplicate", "--wait", "--json"])
        #expect(other.status == 0, "\(other.stderr)")
        #expect(try Self.sha256(ofFile: work.file("out/n.bin")) == second)
        #expect(try daemon.cli(["resume", paused]).status == 0)
        let done = try daemon.waitForState(paused, "succeeded", timeout: 20)
        #expect(done["result"]?["sha256"]?.stringValue == first)
        #expect(try Self.sha256(ofFile: work.file("out/n.bin")) == first, "the job renamed last wins, whole")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.file("out")) == ["n.bin"])
    }

    /// An in-place rewrite of the same size with the mtime put back (`touch -r`) is still caught, by the ctime.
    @Test func aRewriteWithTheMtimePutBackIsStillCaught() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        _ = try Self.randomFile(work.file("d.bin"), bytes: 16 << 20)
        let id = try daemon.submitUpload([work.file("d.bin"), "--to", work.file("out"), "--max-rate", "8MiB", "--chunk-size", "1MiB"])
        try daemon.waitFor(id, "progress") { ($0["progress"]?["completed"]?.intValue ?? 0) > 2 << 20 }
        #expect(try daemon.cli(["pause", id]).status == 0)
        #expect(try DaemonHarness.run("/usr/bin/touch", ["-r", work.file("d.bin"), work.file("ref")]).status == 0)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: work.file("d.bin")))
        try handle.write(contentsOf: Data(repeating: 0x5A, count: 4096))
        try handle.close()
        #expect(try DaemonHarness.run("/usr/bin/touch", ["-r", work.file("ref"), work.file("d.bin")]).status == 0)
        #expect(try daemon.cli(["resume", id]).status == 0)
        let failed = try daemon.waitForState(id, "failed", timeout: 20)
        #expect(failed["error"]?["code"]?.stringValue == "source_changed")
    }

    @Test func waitExitsWithTheJobsOutcome() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        _ = try Self.randomFile(work.file("w.bin"), bytes: 1 << 20)
        let ok = try daemon.cli(["submit", "upload", work.file("w.bin"), "--to", work.file("out"), "--wait"])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stdout.contains("succeeded"))
        let watched = try daemon.cli(["submit", "upload", work.file("w.bin"), "--to", work.file("out"), "--watch"])
        #expect(watched.status == 0, "\(watched.stderr)")
        #expect(watched.stdout.contains("succeeded"))
        // A job that ends failed (here: past its deadline on its only attempt) makes --wait exit 1.
        let failed = try daemon.cli([
            "submit", "upload", work.file("w.bin"), "--to", work.file("out"), "--max-rate", "64KiB", "--timeout", "300ms",
            "--max-attempts", "1", "--wait",
        ])
        #expect(failed.status == 1, "\(failed.stdout) \(failed.stderr)")
        #expect(failed.stdout.contains("failed"))
    }

    /// Sources and destinations that cannot work: refused at submit with a clear code (exit 2), nothing queued.
    @Test func badSourcesAndDestinationsAreRefusedAtSubmit() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        _ = try Self.randomFile(work.file("ok.bin"), bytes: 1024)
        _ = FileManager.default.createFile(atPath: work.file("not-a-dir"), contents: Data([1]))
        mkfifo(work.file("fifo"), 0o600)
        try FileManager.default.createDirectory(atPath: work.file("sub"), withIntermediateDirectories: true)
        _ = try Self.randomFile(work.file("sub/ok.bin"), bytes: 10)
        let cases: [(arguments: [String], code: String)] = [
            ([work.file("missing.bin"), "--to", work.file("out")], "source_missing"),
            // A folder uploaded into itself, or into a folder inside it (issue 35).
            ([work.file("out"), "--to", work.file("out")], "bad_destination"),
            ([work.path, "--to", work.file("out")], "bad_destination"),
            ([work.file("fifo"), "--to", work.file("out")], "source_not_regular"),
            ([work.file("ok.bin"), "--to", work.file("nowhere")], "destination_missing"),
            ([work.file("ok.bin"), "--to", work.file("not-a-dir")], "destination_not_directory"),
            ([work.file("ok.bin"), "--to", "ftp://example.invalid/x"], "bad_destination"),
            ([work.file("ok.bin"), "--to", "http://[::1"], "bad_destination"),
            ([work.file("ok.bin"), "--to", "http://127.0.0.1:65536/files/"], "bad_destination"),
            ([work.file("ok.bin"), work.file("sub/ok.bin"), "--to", work.file("out")], "duplicate_name"),
            ([work.file("ok.bin"), "--to", work.file("out"), "--chunk-size", "1"], "invalid_params"),
        ]
        for (arguments, code) in cases {
            let result = try daemon.cli(["submit", "upload"] + arguments)
            #expect(result.status == 2, "\(arguments): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains(code), "\(arguments): \(result.stderr)")
        }
        let jobs = try daemon.request(["op": "list"])["jobs"]?.arrayValue ?? []
        #expect(jobs.isEmpty, "nothing was queued")
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
    }
}
