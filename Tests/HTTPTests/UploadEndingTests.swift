import Testing
import TrailbookHTTP
import TusClient
import S3Client

/// Issue 41 §5 and §7 without I/O: an upload the server finished is told from one it lost, and `PATCH`es that an
/// intermediary cuts off shrink the chunk.
struct UploadEndingTests {
    // MARK: - §5: S3's last step

    /// The digests S3 (moto here, the same formula as AWS) gave a 2-part object of 5 MiB of `a` and 100 `b`s:
    /// `ETag` `16cafe8d…-2` and `x-amz-checksum-sha256` `7n1ZEEGp…` (AWS adds `-2`).
    @Test func theMultipartDigestIsS3sCompositeOfThePartsDigests() {
        var digest = S3MultipartDigest()
        digest.add(part: [UInt8](repeating: UInt8(ascii: "a"), count: 5 << 20))
        digest.add(part: [UInt8](repeating: UInt8(ascii: "b"), count: 100))
        #expect(digest.etag == "16cafe8d6b8c1c55c3d339c8d69326c6-2")
        #expect(digest.checksumSHA256 == "7n1ZEEGpZyRgQtPvGMqYL80UbaFJA89T+2OobG6XQAs=")
        let size = Int64(5 << 20) + 100
        let withChecksum = S3ObjectHead(size: size, etag: "x-2", checksumSHA256: digest.checksumSHA256 + "-2")
        #expect(digest.matches(withChecksum, size: size) == true, "the checksum decides, with AWS's -N suffix")
        #expect(digest.matches(S3ObjectHead(size: size, etag: digest.etag), size: size) == true, "else the ETag")
        #expect(digest.matches(S3ObjectHead(size: size - 1, etag: digest.etag), size: size) == false)
        let older = S3ObjectHead(size: size, etag: "0123456789abcdef0123456789abcdef-2")
        #expect(digest.matches(older, size: size) == false, "another object of the same size")
        let otherChecksum = S3ObjectHead(size: size, etag: digest.etag, checksumSHA256: "AAAA")
        #expect(digest.matches(otherChecksum, size: size) == false)
        #expect(digest.matches(S3ObjectHead(size: size, etag: "kms-style-etag"), size: size) == false)
        #expect(digest.matches(S3ObjectHead(size: size, etag: "0123456789abcdef0123456789abcdef"), size: size) == nil,
            "a single-PUT ETag proves nothing about a multipart upload")
    }

    /// tus's counterpart: a resumed upload whose `HEAD` says the server has every byte is done, with no `PATCH`.
    @Test func aTusUploadWhoseHeadReportsEveryByteSucceedsWithoutSending() {
        let url = "http://h/files/1"
        var upload = TusUpload(length: 30, chunkSize: 10, url: url, sentThrough: 30, confirmedOffset: 20)
        _ = upload.start()
        _ = upload.discovered(TusServerInfo(versions: ["1.0.0"], extensions: ["creation"], maxSize: nil, checksumAlgorithms: []))
        #expect(upload.offsetReported(TusUploadStatus(offset: 30, length: 30)) == .succeed(url: url, bytes: 30, bytesResent: 0))
    }

    // MARK: - §7: requests cut off on the way

    static let url = "http://h/files/1"
    static let info = TusServerInfo(versions: ["1.0.0"], extensions: ["creation"], maxSize: nil, checksumAlgorithms: [])

    /// A connection reset after `sent` bytes of a `PATCH` went out.
    static func cut(_ sent: Int64) -> TusError {
        var error = TusError(
            transport: HTTPError(kind: .connectionFailed, message: "Connection reset by peer"), operation: "PATCH")
        error.bytesSent = sent
        return error
    }

    /// A 4 000-byte upload in 1 000-byte chunks with a floor of 100.
    static func created() -> TusUpload {
        var policy = TusUpload.Policy()
        policy.minChunkSize = 100
        var upload = TusUpload(length: 4_000, chunkSize: 1_000, policy: policy)
        _ = upload.start()
        _ = upload.discovered(info)
        _ = upload.created(url: url)
        return upload
    }

    /// Fails the `PATCH` in flight with a cut after `sent` bytes, waits, and reports `offset` on the `HEAD`.
    static func cutAndHead(_ upload: inout TusUpload, sent: Int64 = 500, offset: Int64) -> TusUpload.Action {
        guard case .wait = upload.failed(cut(sent), random: 0) else { return .fail(TusError(code: .protocolError, message: "no wait")) }
        #expect(upload.backoffElapsed() == .queryOffset(url: url))
        return upload.offsetReported(TusUploadStatus(offset: offset))
    }

    @Test func patchesCutOffWithNothingGainedShrinkTheChunkToTheFloorThenFail() {
        var upload = Self.created()
        #expect(Self.cutAndHead(&upload, offset: 0) == .send(url: Self.url, offset: 0, length: 1_000), "one cut is luck")
        #expect(Self.cutAndHead(&upload, offset: 0) == .send(url: Self.url, offset: 0, length: 250), "two: a quarter")
        #expect(upload.shrinks == [TusUpload.ChunkShrink(from: 1_000, to: 250)])
        #expect(Self.cutAndHead(&upload, offset: 0) == .send(url: Self.url, offset: 0, length: 250))
        #expect(Self.cutAndHead(&upload, offset: 0) == .send(url: Self.url, offset: 0, length: 100), "down to the floor")
        #expect(Self.cutAndHead(&upload, offset: 0) == .send(url: Self.url, offset: 0, length: 100))
        guard case .fail(let error) = Self.cutAndHead(&upload, offset: 0) else {
            Issue.record("expected fail at the floor")
            return
        }
        #expect(error.code == .requestCutOff)
        #expect(error.code.description == "request_cut_off")
        #expect(error.message.contains("2 PATCHes of 100 bytes"), "\(error.message)")
    }

    @Test func aSmallerChunkTheServerAcceptsKeepsItsSizeAndEndsTheCount() {
        var upload = Self.created()
        _ = Self.cutAndHead(&upload, offset: 0)
        _ = Self.cutAndHead(&upload, offset: 0)
        #expect(upload.chunkAccepted(TusUploadStatus(offset: 250)) == .send(url: Self.url, offset: 250, length: 250))
        // One cut after a success is not two in a row.
        #expect(Self.cutAndHead(&upload, offset: 250) == .send(url: Self.url, offset: 250, length: 250))
    }

    @Test func cutsAfterWhichTheServerGainedBytesOrStallsDoNotShrink() {
        var upload = Self.created()
        // An ordinary reset: the server kept what arrived.
        #expect(Self.cutAndHead(&upload, offset: 300) == .send(url: Self.url, offset: 300, length: 1_000))
        #expect(Self.cutAndHead(&upload, offset: 600) == .send(url: Self.url, offset: 600, length: 1_000))
        // A silent network (a stall, issue 41 §6) is an outage, not a size limit.
        for _ in 0..<3 {
            var stall = TusError(
                transport: HTTPError(kind: .timedOut, message: "Operation too slow"), operation: "PATCH")
            stall.bytesSent = 500
            guard case .wait = upload.failed(stall, random: 0) else { Issue.record("expected wait"); return }
            _ = upload.backoffElapsed()
            #expect(upload.offsetReported(TusUploadStatus(offset: 600)) == .send(url: Self.url, offset: 600, length: 1_000))
        }
        #expect(upload.shrinks.isEmpty)
        // A 503 with the body sent is the server's outage, not a cut.
        _ = upload.failed(TusError(status: 503, operation: "PATCH"), random: 0)
        _ = upload.backoffElapsed()
        _ = upload.failed(TusError(status: 503, operation: "PATCH"), random: 0)
        #expect(upload.chunkSize == 1_000)
    }
}
