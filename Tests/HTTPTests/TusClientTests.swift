import Foundation
import Testing
import TrailbookHTTP
import TrailbookLoop
import TusClient

@Suite(.serialized)
struct TusClientTests {
    static let metadata = [("filename", "IMG_0001.jpg"), ("filetype", "image/jpeg")]

    @Test func createPatchHeadDeleteRoundTrip() async throws {
        try await withTusServer { server, http in
            let tus = TusClient(http: http, endpoint: server.endpoint)
            let info = try await tus.discover()
            #expect(info.versions == ["1.0.0"])
            #expect(info.supports("creation") && info.supports("termination"))
            #expect(info.maxSize != nil)
            #expect(info.checksumAlgorithm == nil)  // tuspyserver has no checksum extension

            let file = testBytes(count: 5 * 1024 * 1024 + 123)
            let created = try await tus.create(length: Int64(file.count), metadata: Self.metadata)
            #expect(created.url.hasPrefix(server.endpoint))
            var offset: Int64 = 0
            let chunk = 1 << 20
            while offset < file.count {
                let end = min(file.count, Int(offset) + chunk)
                let status = try await tus.upload(Array(file[Int(offset)..<end]), to: created.url, at: offset)
                #expect(status.offset == Int64(end))
                #expect(status.expiresAtSeconds != nil)
                offset = status.offset
            }
            let head = try await tus.status(of: created.url)
            #expect(head.offset == Int64(file.count) && head.length == Int64(file.count))
            let stored = try #require(server.storedBytes(of: created.url))
            #expect(TusChecksumAlgorithm.sha256.digest(stored) == TusChecksumAlgorithm.sha256.digest(file))

            try await tus.terminate(created.url)
            await #expect(throws: TusError.self) { _ = try await tus.status(of: created.url) }
            do {
                _ = try await tus.status(of: created.url)
            } catch let error as TusError {
                #expect(error.code == .gone)
            }
            try await tus.terminate(created.url)  // already gone: not an error
        }
    }

    @Test func checksumIsSentWhenOfferedAndMismatchIs460() async throws {
        try await withTusServer { server, http in
            try await arm(server, http, "/__fault/checksum?on=1")
            let tus = TusClient(http: http, endpoint: server.proxiedEndpoint)
            let info = try await tus.discover()
            #expect(info.supports("checksum"))
            #expect(info.checksumAlgorithm == .sha256)
            let file = testBytes(count: 300_000)
            let created = try await tus.create(length: Int64(file.count), metadata: Self.metadata)
            let status = try await tus.upload(file, to: created.url, at: 0, checksum: .sha256)
            #expect(status.offset == Int64(file.count))
            let log = try await http.perform(HTTPRequest(method: "GET", url: server.control("/__log")))
            let text = String(decoding: log.body, as: UTF8.self)
            #expect(text.contains("\"upload-checksum\": \"\(TusChecksumAlgorithm.sha256.headerValue(for: file))\""))

            let second = try await tus.create(length: 10, metadata: Self.metadata)
            try await arm(server, http, "/__fault/corrupt?count=1")
            do {
                _ = try await tus.upload(Array(repeating: 7, count: 10), to: second.url, at: 0, checksum: .sha1)
                Issue.record("expected 460")
            } catch let error as TusError {
                #expect(error.code == .checksumMismatch && error.status == 460)
            }
            let resent = try await tus.upload(Array(repeating: 7, count: 10), to: second.url, at: 0, checksum: .sha1)
            #expect(resent.offset == 10)
        }
    }

    @Test(arguments: [
        (503, "retryable"), (409, "offset_mismatch"), (410, "gone"), (404, "gone"), (413, "too_large"),
        (401, "unauthorized"), (403, "unauthorized"), (460, "checksum_mismatch"), (400, "protocol_error"),
    ])
    func statusMapsToStableCode(status: Int, code: String) async throws {
        try await withTusServer { server, http in
            let tus = TusClient(http: http, endpoint: server.proxiedEndpoint)
            let created = try await tus.create(length: 4, metadata: Self.metadata)
            try await arm(server, http, "/__fault/status?code=\(status)&count=1&method=PATCH")
            do {
                _ = try await tus.upload([1, 2, 3, 4], to: created.url, at: 0)
                Issue.record("expected \(code)")
            } catch let error as TusError {
                #expect(error.code.description == code && error.status == status)
                #expect(error.isRetryable == (code == "retryable"))
            }
            // The fault was for one request only: the same PATCH now goes through.
            let status = try await tus.upload([1, 2, 3, 4], to: created.url, at: 0)
            #expect(status.offset == 4)
        }
    }

    @Test func droppedConnectionMidPatchIsRetryableAndHeadTellsWhereToResume() async throws {
        try await withTusServer { server, http in
            let tus = TusClient(http: http, endpoint: server.proxiedEndpoint)
            let file = testBytes(count: 2 << 20)
            let created = try await tus.create(length: Int64(file.count), metadata: Self.metadata)
            try await arm(server, http, "/__fault/drop?after=524288&count=1")
            do {
                _ = try await tus.upload(file, to: created.url, at: 0)
                Issue.record("expected a dropped connection")
            } catch let error as TusError {
                #expect(error.code == .retryable)
                #expect(error.transport?.kind == .connectionFailed, "\(error)")
            }
            try await Task.sleep(for: .milliseconds(200))
            let head = try await tus.status(of: created.url)
            #expect(head.offset <= 524_288)
            let rest = try await tus.upload(Array(file[Int(head.offset)...]), to: created.url, at: head.offset)
            #expect(rest.offset == Int64(file.count))
            #expect(server.storedBytes(of: created.url) == file)
        }
    }

    @Test func serverSideDeleteIsGone() async throws {
        try await withTusServer { server, http in
            let tus = TusClient(http: http, endpoint: server.proxiedEndpoint)
            let created = try await tus.create(length: 4, metadata: Self.metadata)
            let path = "/files/" + (created.url.split(separator: "/").last.map(String.init) ?? "")
            try await arm(server, http, "/__fault/delete?path=\(path)")
            // The server may finish removing the upload after it answered the DELETE (its PATCH then fails with a
            // 500, retryable): wait until a HEAD finds it gone, then the PATCH must say so too.
            for _ in 0..<40 {
                do {
                    _ = try await tus.status(of: created.url)
                } catch {
                    if (error as? TusError)?.code == .gone { break }
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            do {
                _ = try await tus.upload([1, 2, 3, 4], to: created.url, at: 0)
                Issue.record("expected gone")
            } catch let error as TusError {
                #expect(error.code == .gone)
            }
        }
    }

    @Test func missingTokenIsUnauthorizedAndExtraHeadersPassThrough() async throws {
        try await withTusServer(token: "s3cret") { server, http in
            let anonymous = TusClient(http: http, endpoint: server.endpoint)
            do {
                _ = try await anonymous.create(length: 4, metadata: Self.metadata)
                Issue.record("expected 401")
            } catch let error as TusError {
                #expect(error.code == .unauthorized && error.status == 401)
            }
            let authorized = TusClient(
                http: http, endpoint: server.endpoint,
                options: TusClient.Options(headers: ["Authorization": "Bearer s3cret"]))
            let created = try await authorized.create(length: 4, metadata: Self.metadata)
            #expect(try await authorized.upload([1, 2, 3, 4], to: created.url, at: 0).offset == 4)
        }
    }

    @Test func lengthAboveTusMaxSizeFailsBeforeSending() async throws {
        try await withTusServer(maxSize: 1000) { server, http in
            let tus = TusClient(http: http, endpoint: server.endpoint)
            #expect(try await tus.discover().maxSize == 1000)
            do {
                _ = try await tus.create(length: 1001, metadata: Self.metadata)
                Issue.record("expected too_large")
            } catch let error as TusError {
                #expect(error.code == .tooLarge && error.status == nil)
            }
        }
    }

    /// Drives `TusUpload` with `TusClient` through the proxy while faults fire: what the upload job will do.
    @Test func stateMachineDrivenUploadSurvivesFaults() async throws {
        try await withTusServer { server, http in
            let tus = TusClient(http: http, endpoint: server.proxiedEndpoint)
            let file = testBytes(count: 3 << 20)
            var upload = TusUpload(length: Int64(file.count), chunkSize: 1 << 20)
            try await arm(server, http, "/__fault/drop?after=300000&count=1")
            var action = upload.start()
            var steps = 0
            var sawFiveHundred = false
            loop: while steps < 50 {
                steps += 1
                do {
                    switch action {
                    case .discover:
                        action = upload.discovered(try await tus.discover())
                    case .create(let length):
                        action = upload.created(url: try await tus.create(length: length, metadata: Self.metadata).url)
                    case .queryOffset(let url):
                        action = upload.offsetReported(try await tus.status(of: url))
                        if !sawFiveHundred {
                            sawFiveHundred = true
                            try await arm(server, http, "/__fault/status?code=503&count=2&method=PATCH")
                        }
                    case .send(let url, let offset, let length):
                        let chunk = Array(file[Int(offset)..<Int(offset) + length])
                        action = upload.chunkAccepted(try await tus.upload(chunk, to: url, at: offset))
                    case .probeChecksum:
                        Issue.record("no probe without the checksum extension")
                        break loop
                    case .wait(let milliseconds):
                        // Three failures in a row (a working HEAD between them does not reset the count):
                        // 250–500, 500–1000, 1000–2000 ms.
                        #expect(milliseconds >= 250 && milliseconds <= 2000)
                        try await Task.sleep(for: .milliseconds(10))
                        action = upload.backoffElapsed()
                    case .succeed(let url, let bytes, let resent):
                        #expect(bytes == Int64(file.count))
                        // Three failed PATCHes (one dropped, two 503s), each re-sending at most one chunk.
                        #expect(resent > 0 && resent <= 3 << 20, "resent \(resent)")
                        #expect(server.storedBytes(of: url) == file)
                        break loop
                    case .fail(let error), .giveUp(let error):
                        Issue.record("upload ended with \(error)")
                        break loop
                    }
                } catch let error as TusError {
                    action = upload.failed(error, random: 0.5)
                }
            }
            #expect(steps < 50)
        }
    }
}
