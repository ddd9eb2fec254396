import Testing

import S3Client
@testable import TrailbookEngine
@testable import TrailbookProtocol
@testable import UploadJob

/// The s3:// destination's submit-time rules: the URL, the part plan, the options.
struct S3UploadTests {
    @Test func s3DestinationsParseIntoBucketAndPrefix() throws {
        #expect(try UploadDestination(parsing: "s3://photos/trip/2026/") == .s3(bucket: "photos", prefix: "trip/2026/"))
        #expect(try UploadDestination(parsing: "s3://photos/") == .s3(bucket: "photos", prefix: ""))
        #expect(try UploadDestination(parsing: "s3://photos") == .s3(bucket: "photos", prefix: ""))
        #expect(try UploadDestination(parsing: "S3://my.bucket-1/a b/") == .s3(bucket: "my.bucket-1", prefix: "a b/"))
        for bad in [
            "s3://", "s3:/photos/", "s3://ab/", "s3://Photos/", "s3://-photos/", "s3://photos-/", "s3://ph..otos/",
            "s3://photos/prefix", "s3://photos//", "s3://photos/a//b/", "s3://photos/a?b/", "s3://photos/a\u{1}/",
            "s3://" + String(repeating: "a", count: 64) + "/",
        ] {
            #expect(throws: JobError.self, "\(bad)") { try UploadDestination(parsing: bad) }
            do {
                _ = try UploadDestination(parsing: bad)
            } catch {
                #expect(error.code == "bad_destination")
            }
        }
    }

    @Test func partsArePlannedWithinS3sLimits() throws {
        let mib: Int64 = 1 << 20
        func plan(_ size: Int64, chunk: Int64 = 8 << 20, maxParts: Int = 10_000) throws -> S3PartPlan {
            try S3PartPlan.plan(size: size, preferred: chunk, minPartSize: 5 * mib, maxParts: maxParts, name: "f")
        }
        #expect(try plan(60 * mib, chunk: 5 * mib) == S3PartPlan(size: 60 * mib, partSize: 5_242_880))
        #expect(try plan(60 * mib, chunk: 5 * mib).count == 12)
        #expect(try plan(1 * mib, chunk: 4 << 10).partSize == 5 * mib, "never below the minimum part")
        #expect(try plan(1 * mib).isSinglePut)
        #expect(try plan(0).count == 1)
        #expect(try plan(100 << 30).partSize == 10_737_419)
        #expect(try plan(100 << 30).count == 10_000)
        #expect(try plan(5 << 40).partSize == 549_755_814)
        #expect(try plan(100 << 30, maxParts: 1_000).partSize == 107_374_183)
        let last = try plan(12 * mib, chunk: 5 * mib)
        #expect(last.range(ofPart: 3) == (offset: 10 * mib, length: 2 * mib))
        #expect(throws: JobError.self) { try plan((5 << 40) + 1) }
        #expect(throws: JobError.self) { try plan(6 << 30, maxParts: 1) }
    }

    /// What the server says it stored is checked against what was sent: an MD5 ETag against the MD5, an echoed
    /// SHA-256 checksum against the checksum; a match of either proves the bytes (no HEAD needed), a mismatch is
    /// `bad_digest` (retried). A plan saved before checksums existed decodes without them.
    @Test func storedDigestsAreCheckedAgainstWhatWasSent() throws {
        let bytes = Array("hello".utf8)
        // SHA-256("hello") and MD5("hello").
        let sha256Base64 = "LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ="
        let md5Hex = "5d41402abc4b2a76b9719d911017c592"
        let withSHA256 = S3Piece(bytes: bytes, withMD5: false)
        #expect(withSHA256.sha256Base64 == sha256Base64 && withSHA256.md5 == nil)
        let withMD5 = S3Piece(bytes: bytes, withMD5: true)
        #expect(withMD5.md5Hex == md5Hex)

        func check(_ stored: S3Stored, _ piece: S3Piece, _ checksum: String?) throws(S3Error) -> Bool {
            try S3UploadRun.check(stored, piece: piece, checksum: checksum, what: "PUT k")
        }
        #expect(try check(S3Stored(etag: md5Hex), withMD5, nil))
        #expect(try !check(S3Stored(etag: "abc-2"), withMD5, nil), "another ETag form proves nothing")
        #expect(try check(S3Stored(etag: md5Hex, checksumSHA256: sha256Base64), withSHA256, sha256Base64))
        #expect(try !check(S3Stored(etag: md5Hex), withSHA256, sha256Base64), "no echo, no MD5: not proven")
        #expect(throws: S3Error.self) { try check(S3Stored(etag: String(repeating: "0", count: 32)), withMD5, nil) }
        #expect(throws: S3Error.self) {
            try check(S3Stored(etag: "x", checksumSHA256: "AAAA" + sha256Base64.dropFirst(4)), withSHA256, sha256Base64)
        }

        let old = try JSONValueDecoder.decode(S3PartPlan.self, from: ["size": 10, "part_size": 5])
        #expect(old == S3PartPlan(size: 10, partSize: 5, checksumSHA256: false))
        let mib: Int64 = 1 << 20
        let plan = try S3PartPlan.plan(
            size: 60 * mib, preferred: 5 * mib, minPartSize: 5 * mib, maxParts: 10_000, name: "f", checksumSHA256: true)
        #expect(plan.checksumSHA256)
    }

    @Test func s3OptionsRoundTripAndAreChecked() throws {
        let params = UploadJob.Params(
            files: ["/a"], to: "s3://b/", s3: S3Options(endpoint: "http://127.0.0.1:9000", pathStyle: true, partsInFlight: 8))
        let json = String(decoding: JSONCoding.encode(params), as: UTF8.self)
        #expect(json.contains("\"s3\":{") && json.contains("\"parts_in_flight\":8") && json.contains("\"path_style\":true"))
        #expect(try JSONCoding.decode(UploadJob.Params.self, from: Array(json.utf8)) == params)
        let plain = String(decoding: JSONCoding.encode(UploadJob.Params(files: ["/a"], to: "file:///d")), as: UTF8.self)
        #expect(!plain.contains("s3"), "file:// params look as before")
        #expect(throws: JobError.self) { try S3Options(maxParts: 0).check() }
        #expect(throws: JobError.self) { try S3Options(minPartSize: 10).check() }
        #expect(throws: JobError.self) { try S3Options(partsInFlight: 33).check() }
        #expect(throws: JobError.self) { try S3Options(region: "eu west").check() }
        try S3Options(maxParts: 1_000, minPartSize: 5 << 20, partsInFlight: 4).check()
    }

    @Test func twoSourcesOfOneNameAndOverlongKeysAreRefused() throws {
        #expect(throws: JobError.self) { try S3UploadRun.names(of: ["/a/x.jpg", "/b/x.jpg"], prefix: "p/") }
        #expect(throws: JobError.self) {
            try S3UploadRun.names(of: [BytePath("/a/" + String(repeating: "n", count: 200))], prefix: String(repeating: "p/", count: 420))
        }
        #expect(try S3UploadRun.names(of: ["/a/x.jpg", "/b/y.jpg"], prefix: "p/") == ["x.jpg", "y.jpg"])
        // caf\xe9.jpg in Latin-1: S3 keys are UTF-8, so it is refused with bad_name, not mangled.
        let latin1 = BytePath(bytes: Array("/a/caf".utf8) + [0xE9] + Array(".jpg".utf8))
        #expect(throws: JobError.self) { try S3UploadRun.names(of: [latin1], prefix: "") }
    }

    @Test func filesLandingOutOfOrderAreRecordedInOrder() throws {
        let source = SourceIdentity(size: 10, modifiedNanoseconds: 1, inode: 2, device: 3)
        func file(_ i: Int) -> UploadedFile {
            UploadedFile(name: BytePath("f\(i)"), path: BytePath("s3://b/f\(i)"), bytes: 10, sha256: "\(i)", bytesResent: 0)
        }
        var checkpoint = UploadCheckpoint(sources: Array(repeating: source, count: 5))
        checkpoint.s3Plan = S3PartPlan(size: 10, partSize: 10)
        checkpoint.land(2, file(2))
        checkpoint.land(1, file(1))
        #expect(checkpoint.fileIndex == 0 && checkpoint.finished.isEmpty && checkpoint.landedAhead(2))
        #expect(checkpoint.s3Plan != nil, "the file at file_index keeps its state while later ones land")
        // Saved and read back (a resume) it is the same.
        let saved = try JSONCoding.convert(JSONCoding.value(of: checkpoint), to: UploadCheckpoint.self)
        #expect(saved == checkpoint)
        try saved.check(fileCount: 5)
        checkpoint.land(0, file(0))
        #expect(checkpoint.fileIndex == 3 && checkpoint.finished.map(\.sha256) == ["0", "1", "2"])
        #expect(checkpoint.finishedAhead == nil && checkpoint.s3Plan == nil)
        checkpoint.land(4, file(4))
        checkpoint.land(3, file(3))
        #expect(checkpoint.fileIndex == 5 && checkpoint.finished.map(\.sha256) == ["0", "1", "2", "3", "4"])
        // A checkpoint whose files ahead are not ahead is refused.
        var bad = UploadCheckpoint(sources: Array(repeating: source, count: 2))
        bad.finishedAhead = [.init(index: 0, file: file(0))]
        #expect(throws: JobError.self) { try bad.check(fileCount: 2) }
    }

    /// Checkpoint saves of a job of many files: after every file up to 64 landed, then once 1/64 of those landed
    /// are unsaved (or 64 MiB of them), so the saves of n files write O(n) entries in all, not O(n²).
    @Test func checkpointSavesThinOutAsFilesLandSoTheirTotalIsLinear() {
        #expect(UploadCheckpoint.saveIsDue(unsavedFiles: 1, unsavedBytes: 10, landed: 1))
        #expect(UploadCheckpoint.saveIsDue(unsavedFiles: 1, unsavedBytes: 10, landed: 127))
        #expect(!UploadCheckpoint.saveIsDue(unsavedFiles: 1, unsavedBytes: 10, landed: 128))
        #expect(UploadCheckpoint.saveIsDue(unsavedFiles: 2, unsavedBytes: 10, landed: 128))
        #expect(UploadCheckpoint.saveIsDue(unsavedFiles: 1, unsavedBytes: 64 << 20, landed: 10_000))
        // Simulated: 20 000 files of 4 KiB, each landing in turn.
        var (saves, entriesWritten, unsaved, worstUnsaved) = (0, 0, 0, 0)
        for landed in 1...20_000 {
            unsaved += 1
            worstUnsaved = max(worstUnsaved, unsaved)
            if UploadCheckpoint.saveIsDue(unsavedFiles: unsaved, unsavedBytes: Int64(unsaved) * 4096, landed: landed) {
                saves += 1
                entriesWritten += landed
                unsaved = 0
            }
        }
        // Per-file saves would write 200 010 000 entries.
        #expect(entriesWritten < 20_000 * 130, "\(entriesWritten) entries in \(saves) saves")
        #expect(worstUnsaved <= 20_000 / 64 + 1, "a crash sends at most 1/64 of the landed files again")
    }

    /// The cadence the s3 and tus destinations share counts the files landed since the last save, whoever saved.
    @Test func landedFilesCadenceCountsSinceTheLastSave() {
        var cadence = LandedFilesCadence()
        #expect(!cadence.hasUnsaved)
        let first = cadence.landed(bytes: 10, landed: 1)
        #expect(first, "early files are saved one by one")
        cadence.saved()
        let oneOf200 = cadence.landed(bytes: 10, landed: 200)
        #expect(!oneOf200, "1 of 200 landed is below 1/64")
        #expect(cadence.hasUnsaved)
        let twoOf201 = cadence.landed(bytes: 10, landed: 201)
        let threeOf202 = cadence.landed(bytes: 10, landed: 202)
        #expect(!twoOf201)
        #expect(threeOf202, "3 unsaved of 202 landed reach 1/64")
        cadence.saved()
        #expect(!cadence.hasUnsaved)
        let bigOne = cadence.landed(bytes: 64 << 20, landed: 10_000)
        #expect(bigOne, "64 MiB unsaved is due whatever the count")
    }
}
