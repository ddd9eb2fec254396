import Testing
import TusClient

/// `TusUpload` without I/O: events in, actions out.
struct TusUploadTests {
    let info = TusServerInfo(versions: ["1.0.0"], extensions: ["creation"], maxSize: nil, checksumAlgorithms: [])
    let url = "http://h/files/1"

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
        #expect(upload.bytesResent == 10)
        guard case .fail(let error) = upload.failed(TusError(status: 404, operation: "PATCH")) else {
            Issue.record("expected fail")
            return
        }
        #expect(error.code == .gone)
    }

    @Test func checksumMismatchResendsTheSameChunk() {
        var upload = TusUpload(length: 30, chunkSize: 10)
        _ = upload.start()
        _ = upload.discovered(info)
        let send = upload.created(url: url)
        #expect(upload.failed(TusError(status: 460, operation: "PATCH")) == send)
        #expect(upload.failed(TusError(status: 460, operation: "PATCH")) == send)
        #expect(upload.failed(TusError(status: 460, operation: "PATCH")) == send)
        guard case .giveUp = upload.failed(TusError(status: 460, operation: "PATCH")) else {
            Issue.record("expected giveUp after 3 resends")
            return
        }
    }

    @Test func serverErrorsBackOffExponentiallyThenGiveUp() {
        var upload = TusUpload(length: 30, chunkSize: 10)
        _ = upload.start()
        _ = upload.discovered(info)
        _ = upload.created(url: url)
        var waits: [Int] = []
        for _ in 0..<5 {
            guard case .wait(let ms) = upload.failed(TusError(status: 503, operation: "PATCH"), random: 1) else {
                Issue.record("expected wait")
                return
            }
            waits.append(ms)
            // After a failed PATCH the server's offset decides where to continue.
            #expect(upload.backoffElapsed() == .queryOffset(url: url))
        }
        #expect(waits == [500, 1000, 2000, 4000, 8000])
        guard case .giveUp(let error) = upload.failed(TusError(status: 502, operation: "HEAD"), random: 0) else {
            Issue.record("expected giveUp")
            return
        }
        #expect(error.isRetryable)
    }

    @Test func aWorkingHeadBetweenFailingPatchesDoesNotResetTheRetries() {
        var upload = TusUpload(length: 30, chunkSize: 10)
        _ = upload.start()
        _ = upload.discovered(info)
        _ = upload.created(url: url)
        for _ in 0..<5 {
            guard case .wait = upload.failed(TusError(status: 503, operation: "PATCH"), random: 0) else {
                Issue.record("expected wait")
                return
            }
            #expect(upload.backoffElapsed() == .queryOffset(url: url))
            #expect(upload.offsetReported(TusUploadStatus(offset: 0, length: 30)) == .send(url: url, offset: 0, length: 10))
        }
        guard case .giveUp = upload.failed(TusError(status: 503, operation: "PATCH"), random: 0) else {
            Issue.record("expected giveUp after 5 retries")
            return
        }
    }

    @Test func successResetsTheRetryCountAndJitterStaysInTheUpperHalf() {
        var upload = TusUpload(length: 30, chunkSize: 10)
        _ = upload.start()
        #expect(upload.failed(TusError(status: 500, operation: "OPTIONS"), random: 0) == .wait(milliseconds: 250))
        #expect(upload.backoffElapsed() == .discover)
        _ = upload.discovered(info)
        #expect(upload.failed(TusError(status: 500, operation: "POST"), random: 0) == .wait(milliseconds: 250))
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

    @Test func base64MatchesRFC4648Vectors() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE="]
        for (plain, encoded) in vectors { #expect(Base64.encode(Array(plain.utf8)) == encoded) }
    }
}
