import Testing
import TrailbookHTTP
import TusClient

/// `TusUpload` without I/O: events in, actions out.
struct TusUploadTests {
    let info = TusServerInfo(versions: ["1.0.0"], extensions: ["creation"], maxSize: nil, checksumAlgorithms: [])
    let url = "http://h/files/1"

    /// A 30-byte upload in 10-byte chunks, created at `url` (the first `send` issued), on a server with `info`.
    func created(_ info: TusServerInfo? = nil) -> TusUpload {
        var upload = TusUpload(length: 30, chunkSize: 10)
        _ = upload.start()
        _ = upload.discovered(info ?? self.info)
        _ = upload.created(url: url)
        return upload
    }

    @Test func happyPathCreatesThenSendsChunksThenSucceeds() {
        var upload = TusUpload(length: 25, chunkSize: 10)
        #expect(upload.start() == .discover)
        #expect(upload.discovered(info) == .create(length: 25))
        #expect(upload.created(url: url) == .send(url: url, offset: 0, length: 10))
        #expect(upload.chunkAccepted(TusUploadStatus(offset: 10)) == .send(url: url, offset: 10, length: 10))
        #expect(upload.chunkAccepted(TusUploadStatus(offset: 20)) == .send(url: url, offset: 20, length: 5))
        #expect(upload.chunkAccepted(TusUploadStatus(offset: 25)) == .succeed(url: url, bytes: 25, bytesResent: 0))
    }

    @Test func tooLargeFailsBeforeAnythingIsSent() {
        var upload = TusUpload(length: 2000, chunkSize: 10)
        _ = upload.start()
        var small = info
        small.maxSize = 1000
        guard case .fail(let error) = upload.discovered(small) else { Issue.record("expected fail"); return }
        #expect(error.code == .tooLarge)
    }

    @Test func checkpointResumesWithHeadAndCountsResentBytes() {
        var upload = TusUpload(length: 30, chunkSize: 10, url: url, sentThrough: 20)
        _ = upload.start()
        #expect(upload.discovered(info) == .queryOffset(url: url))
        #expect(upload.offsetReported(TusUploadStatus(offset: 14, length: 30)) == .send(url: url, offset: 14, length: 10))
        #expect(upload.bytesResent == 0, "counted when handed to the transport, not when planned")
        _ = upload.chunkAccepted(TusUploadStatus(offset: 24))
        #expect(upload.bytesResent == 6)
    }

    @Test func offsetMismatchAsksHead() {
        var upload = TusUpload(length: 30, chunkSize: 10)
        _ = upload.start()
        _ = upload.discovered(info)
        _ = upload.created(url: url)
        #expect(upload.failed(TusError(status: 409, operation: "PATCH")) == .queryOffset(url: url))
        #expect(upload.offsetReported(TusUploadStatus(offset: 10)) == .send(url: url, offset: 10, length: 10))
    }

    @Test func goneRecreatesOnceThenFails() {
        var upload = TusUpload(length: 30, chunkSize: 10)
        _ = upload.start()
        _ = upload.discovered(info)
        _ = upload.created(url: url)
        _ = upload.chunkAccepted(TusUploadStatus(offset: 10))
        #expect(upload.failed(TusError(status: 410, operation: "PATCH")) == .create(length: 30))
        #expect(upload.url == nil)
        #expect(upload.created(url: url + "b") == .send(url: url + "b", offset: 0, length: 10))
        #expect(upload.failed(TusError(status: 503, operation: "PATCH"), random: 1) == .wait(milliseconds: 500))
        #expect(upload.bytesResent == 10, "the 503's body went out in full, and bytes 0..<10 a second time")
        #expect(upload.backoffElapsed() == .queryOffset(url: url + "b"))
        _ = upload.offsetReported(TusUploadStatus(offset: 0))
        guard case .fail(let error) = upload.failed(TusError(status: 404, operation: "PATCH")) else {
            Issue.record("expected fail")
            return
        }
        #expect(error.code == .gone)
    }

    /// Issue 11 §5: a persistent 460 costs at most 4 PATCHes of the chunk, with a growing wait before each
    /// resend, then the job fails with `checksum_mismatch` (it used to give up for now and start again).
    @Test func checksumMismatchResendsTheSameChunkAfterAWaitFourPatchesAtMostThenFails() {
        var upload = created()
        let send = TusUpload.Action.send(url: url, offset: 0, length: 10)
        var waits: [Int] = []
        for _ in 0..<3 {
            guard case .wait(let ms) = upload.failed(TusError(status: 460, operation: "PATCH"), random: 1) else {
                Issue.record("expected a wait before the resend")
                return
            }
            waits.append(ms)
            #expect(upload.backoffElapsed() == send)
        }
        #expect(waits == [500, 1000, 2000])
        guard case .fail(let error) = upload.failed(TusError(status: 460, operation: "PATCH")) else {
            Issue.record("expected fail on the 4th refusal")
            return
        }
        #expect(error.code == .checksumMismatch)
        #expect(upload.bytesResent == 30, "three resends of the 10-byte chunk")
    }

    /// Issue 11 §5: a server that answers every PATCH with 409 and reports the refused offset on HEAD is a
    /// persistent conflict: a wait before each PATCH, 4 PATCHes at most, then `fail` with `offset_mismatch`.
    @Test func aPersistentConflictWaitsAndFailsAfterFourPatches() {
        var upload = created()
        let send = TusUpload.Action.send(url: url, offset: 0, length: 10)
        var patches = 1
        var waits: [Int] = []
        while true {
            let next = upload.failed(TusError(status: 409, operation: "PATCH"), random: 0)
            if case .fail(let error) = next {
                #expect(error.code == .offsetMismatch)
                break
            }
            #expect(next == .queryOffset(url: url))
            guard case .wait(let ms) = upload.offsetReported(TusUploadStatus(offset: 0, length: 30)) else {
                Issue.record("expected a wait: the server refused the offset it reports")
                return
            }
            waits.append(ms)
            #expect(upload.backoffElapsed() == send)
            patches += 1
        }
        #expect(patches == 4)
        #expect(waits == [250, 500, 1000])
    }

    @Test func aConflictWithANewOffsetContinuesAtOnce() {
        var upload = created()
        #expect(upload.failed(TusError(status: 409, operation: "PATCH")) == .queryOffset(url: url))
        #expect(upload.offsetReported(TusUploadStatus(offset: 10)) == .send(url: url, offset: 10, length: 10))
    }

    /// Issue 11 §7: with the checksum extension, the first request after the offset is known is the probe; a 460
    /// to it means the server verifies, a 204 that it does not.
    @Test func theChecksumProbeTellsWhetherTheServerVerifies() {
        let checking = TusServerInfo(
            versions: ["1.0.0"], extensions: ["creation", "checksum"], maxSize: nil, checksumAlgorithms: ["sha256"])
        for (answer, verified) in [(460, true), (204, false)] {
            var upload = TusUpload(length: 30, chunkSize: 10)
            _ = upload.start()
            _ = upload.discovered(checking)
            #expect(upload.created(url: url) == .probeChecksum(url: url, offset: 0))
            #expect(upload.checksumVerified == nil)
            let next =
                answer == 460
                ? upload.failed(TusError(status: 460, operation: "PATCH"))
                : upload.chunkAccepted(TusUploadStatus(offset: 0))
            #expect(next == .send(url: url, offset: 0, length: 10))
            #expect(upload.checksumVerified == verified)
            #expect(upload.bytesResent == 0)
            #expect(upload.chunkAccepted(TusUploadStatus(offset: 10)) == .send(url: url, offset: 10, length: 10))
        }
        var plain = TusUpload(length: 30, chunkSize: 10)
        _ = plain.start()
        _ = plain.discovered(info)
        #expect(plain.created(url: url) == .send(url: url, offset: 0, length: 10), "no probe without the extension")
    }

    /// Issue 11 §6: resent bytes are those handed to the transport a second time, exactly.
    @Test func resentBytesCountWhatWentOutNotWhatWasPlanned() {
        var upload = created()
        var reset = TusError(code: .retryable, transport: HTTPError(kind: .connectionFailed, message: "reset"), message: "x")
        reset.bytesSent = 7
        #expect(reset.resetWhileSending)
        _ = upload.failed(reset, random: 0)
        #expect(upload.sentThrough == 7)
        _ = upload.backoffElapsed()
        _ = upload.offsetReported(TusUploadStatus(offset: 3))
        var refused = TusError(code: .retryable, transport: HTTPError(kind: .connectionFailed, message: "x"), message: "x")
        refused.bytesSent = 0
        #expect(!refused.resetWhileSending)
        _ = upload.failed(refused, random: 0)
        #expect(upload.bytesResent == 0, "a PATCH that sent nothing resends nothing")
        _ = upload.backoffElapsed()
        _ = upload.offsetReported(TusUploadStatus(offset: 3))
        _ = upload.chunkAccepted(TusUploadStatus(offset: 13))
        #expect(upload.bytesResent == 4, "bytes 3..<7 went out twice")
        #expect(upload.sentThrough == 13)
    }

    @Test func aServerReportingLessThanItConfirmedIsRecorded() {
        var upload = created()
        _ = upload.chunkAccepted(TusUploadStatus(offset: 10))
        _ = upload.chunkAccepted(TusUploadStatus(offset: 20))
        _ = upload.failed(TusError(status: 503, operation: "PATCH"), random: 0)
        _ = upload.backoffElapsed()
        #expect(upload.offsetReported(TusUploadStatus(offset: 12)) == .send(url: url, offset: 12, length: 10))
        #expect(upload.regressions == [TusUpload.OffsetRegression(confirmed: 20, reported: 12)])
    }

    @Test func serverErrorsBackOffExponentiallyWithFullJitter() {
        var upload = TusUpload(length: 30, chunkSize: 10)
        _ = upload.start()
        _ = upload.discovered(info)
        _ = upload.created(url: url)
        var ceilings: [Int] = []
        var floors: [Int] = []
        for _ in 0..<9 {
            guard case .wait(let high) = upload.failed(TusError(status: 503, operation: "PATCH"), random: 1) else {
                Issue.record("expected wait")
                return
            }
            ceilings.append(high)
            // After a failed PATCH the server's offset decides where to continue.
            #expect(upload.backoffElapsed() == .queryOffset(url: url))
            guard case .wait(let low) = upload.failed(TusError(status: 502, operation: "HEAD"), random: 0) else {
                Issue.record("expected wait")
                return
            }
            floors.append(low)
            _ = upload.backoffElapsed()
        }
        // Full jitter: anywhere from 0 to the ceiling, which doubles from 500 ms per failure up to 60 s.
        #expect(ceilings == [500, 2000, 8000, 32000, 60000, 60000, 60000, 60000, 60000])
        #expect(floors.allSatisfy { $0 == 0 })
    }

    /// Issue 11 §3: `Retry-After` is the minimum wait (capped at 10 min); jitter comes on top of it.
    @Test func retryAfterIsTheMinimumWait() {
        var upload = TusUpload(length: 30, chunkSize: 10)
        _ = upload.start()
        var unavailable = TusError(status: 503, operation: "OPTIONS")
        unavailable.retryAfterMilliseconds = 5_000
        #expect(upload.failed(unavailable, random: 0) == .wait(milliseconds: 5_000))
        #expect(upload.backoffElapsed() == .discover)
        #expect(upload.failed(unavailable, random: 0.5) == .wait(milliseconds: 5_500))
        _ = upload.backoffElapsed()
        unavailable.retryAfterMilliseconds = 86_400_000
        #expect(upload.failed(unavailable, random: 0) == .wait(milliseconds: 600_000), "capped at 10 min")
    }

    /// Issue 11 §3: giving up is by elapsed time. A one-hour outage (a failure every minute, on a fake clock) is
    /// waited out and the upload succeeds; failures that go on for 24 h give up.
    @Test func aOneHourOutageIsWaitedOutAndOnlyADayOfFailuresGivesUp() {
        var upload = TusUpload(length: 20, chunkSize: 10)
        _ = upload.start()
        _ = upload.discovered(info)
        _ = upload.created(url: url)
        #expect(upload.chunkAccepted(TusUploadStatus(offset: 10)) == .send(url: url, offset: 10, length: 10))
        let start: Int64 = 1_700_000_000_000
        for minute in Int64(0)...60 {
            guard case .wait = upload.failed(TusError(status: 503, operation: "PATCH"), at: start + minute * 60_000) else {
                Issue.record("gave up after \(minute) min")
                return
            }
            #expect(upload.failingSince == start)
            #expect(upload.backoffElapsed() == .queryOffset(url: url))
        }
        #expect(upload.offsetReported(TusUploadStatus(offset: 10, length: 20)) == .send(url: url, offset: 10, length: 10))
        #expect(upload.failingSince == start, "a HEAD that works does not end the outage")
        #expect(upload.chunkAccepted(TusUploadStatus(offset: 20)) == .succeed(url: url, bytes: 20, bytesResent: 10))
        #expect(upload.failingSince == nil)

        // Restored from a checkpoint: the give-up clock started before the restart.
        var resumed = TusUpload(length: 20, chunkSize: 10, url: url, failingSince: start)
        _ = resumed.start()
        let day: Int64 = 24 * 3_600_000
        guard case .wait = resumed.failed(TusError(status: 503, operation: "OPTIONS"), at: start + day - 1) else {
            Issue.record("gave up before 24 h")
            return
        }
        _ = resumed.backoffElapsed()
        guard case .giveUp(let error) = resumed.failed(TusError(status: 503, operation: "OPTIONS"), at: start + day) else {
            Issue.record("expected giveUp at 24 h")
            return
        }
        #expect(error.isRetryable)
    }

    @Test func aWorkingHeadBetweenFailingPatchesDoesNotEndTheOutage() {
        var policy = TusUpload.Policy()
        policy.giveUpAfterMilliseconds = 10_000
        var upload = TusUpload(length: 30, chunkSize: 10, policy: policy)
        _ = upload.start()
        _ = upload.discovered(info)
        _ = upload.created(url: url)
        for second in Int64(0)..<10 {
            guard case .wait = upload.failed(TusError(status: 503, operation: "PATCH"), at: second * 1_000, random: 0) else {
                Issue.record("expected wait")
                return
            }
            #expect(upload.backoffElapsed() == .queryOffset(url: url))
            #expect(upload.offsetReported(TusUploadStatus(offset: 0, length: 30)) == .send(url: url, offset: 0, length: 10))
        }
        guard case .giveUp = upload.failed(TusError(status: 503, operation: "PATCH"), at: 10_000, random: 0) else {
            Issue.record("expected giveUp after 10 s of failures")
            return
        }
    }

    @Test func successEndsTheOutage() {
        var upload = TusUpload(length: 30, chunkSize: 10)
        _ = upload.start()
        #expect(upload.failed(TusError(status: 500, operation: "OPTIONS"), at: 5, random: 1) == .wait(milliseconds: 500))
        #expect(upload.failingSince == 5)
        #expect(upload.backoffElapsed() == .discover)
        _ = upload.discovered(info)
        #expect(upload.failingSince == nil)
        #expect(upload.failed(TusError(status: 500, operation: "POST"), random: 1) == .wait(milliseconds: 500))
        #expect(upload.backoffElapsed() == .create(length: 30))
    }

    @Test func unauthorizedFailsAtOnce() {
        var upload = TusUpload(length: 30, chunkSize: 10)
        _ = upload.start()
        guard case .fail(let error) = upload.failed(TusError(status: 401, operation: "OPTIONS")) else {
            Issue.record("expected fail")
            return
        }
        #expect(error.code == .unauthorized)
    }

    @Test func httpDateParses() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("not a date") == nil)
    }

    /// Issue 11 §3: `Retry-After` in both forms (RFC 9110 §10.2.3), and the 429/503 errors that carry it.
    @Test func retryAfterInSecondsOrAsAnHTTPDate() {
        func response(_ status: Int, _ value: String?) -> HTTPResponse {
            HTTPResponse(status: status, headers: value.map { ["Retry-After": $0] } ?? [:], body: [])
        }
        let now = 784_111_777.0
        #expect(response(503, "5").retryAfterSeconds(now: now) == 5)
        #expect(response(503, "Sun, 06 Nov 1994 08:50:07 GMT").retryAfterSeconds(now: now) == 30)
        #expect(response(503, "Sun, 06 Nov 1994 08:00:00 GMT").retryAfterSeconds(now: now) == 0, "a date past")
        #expect(response(503, "soon").retryAfterSeconds(now: now) == nil)
        #expect(response(503, "-3").retryAfterSeconds(now: now) == nil)
        #expect(response(503, nil).retryAfterSeconds(now: now) == nil)
        #expect(TusError(response: response(503, "5"), operation: "PATCH", now: now).retryAfterMilliseconds == 5_000)
        #expect(TusError(response: response(429, "2"), operation: "HEAD", now: now).retryAfterMilliseconds == 2_000)
        #expect(TusError(response: response(500, "5"), operation: "HEAD", now: now).retryAfterMilliseconds == nil)
        let held = TusError(
            transport: HTTPError(kind: .held, message: "held", retryAfterSeconds: 1.5), operation: "PATCH")
        #expect(held.isRetryable && held.retryAfterMilliseconds == 1_500)
    }

    @Test func base64MatchesRFC4648Vectors() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE="]
        for (plain, encoded) in vectors { #expect(Base64.encode(Array(plain.utf8)) == encoded) }
    }
}
