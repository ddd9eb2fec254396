import Foundation
import Testing
import TrailbookHTTP
import TrailbookLoop

@Suite(.serialized)
struct HTTPClientTests {
    @Test func getReturnsStatusHeadersAndBody() async throws {
        try await withTusServer { server, client in
            let response = try await client.perform(
                HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.server.port)/openapi.json"))
            #expect(response.status == 200)
            #expect(response.headers["CONTENT-TYPE"] == "application/json")
            #expect(String(decoding: response.body, as: UTF8.self).contains("\"openapi\""))
        }
    }

    @Test func postThenPatchSendsTheBody() async throws {
        try await withTusServer { server, client in
            let body = testBytes(count: 1 << 20)
            let created = try await client.perform(HTTPRequest(
                method: "POST", url: server.endpoint,
                headers: ["Tus-Resumable": "1.0.0", "Upload-Length": String(body.count),
                          "Upload-Metadata": "filename YS5iaW4=,filetype YXBwbGljYXRpb24vb2N0ZXQtc3RyZWFt"]))
            #expect(created.status == 201)
            let location = try #require(created.headers["location"])
            var progress: [Int64] = []
            let patched = try await client.perform(
                HTTPRequest(
                    method: "PATCH", url: location,
                    headers: ["Tus-Resumable": "1.0.0", "Upload-Offset": "0",
                              "Content-Type": "application/offset+octet-stream"],
                    body: body),
                onSendProgress: { progress.append($0) })
            #expect(patched.status == 204)
            #expect(patched.headers["upload-offset"] == String(body.count))
            #expect(progress.last == Int64(body.count))
            #expect(progress == progress.sorted())
            #expect(server.storedBytes(of: location) == body)
            #expect(client.activeTransferCount == 0)
        }
    }

    @Test func cancellingTheTaskAbortsARateLimitedPatchAtOnce() async throws {
        try await withTusServer { server, client in
            let body = testBytes(count: 8 << 20)
            let created = try await client.perform(HTTPRequest(
                method: "POST", url: server.endpoint,
                headers: ["Tus-Resumable": "1.0.0", "Upload-Length": String(body.count),
                          "Upload-Metadata": "filename YS5iaW4=,filetype eA=="]))
            let location = try #require(created.headers["Location"])
            let clock = ContinuousClock()
            let upload = Task { @LoopActor () -> (HTTPError?, ContinuousClock.Instant) in
                do {
                    _ = try await client.perform(HTTPRequest(
                        method: "PATCH", url: location,
                        headers: ["Tus-Resumable": "1.0.0", "Upload-Offset": "0",
                                  "Content-Type": "application/offset+octet-stream"],
                        body: body, maxSendBytesPerSecond: 256 << 10))
                    return (nil, clock.now)
                } catch {
                    return (error as? HTTPError, clock.now)
                }
            }
            try await Task.sleep(for: .milliseconds(400))
            #expect(client.activeTransferCount == 1)
            let cancelledAt = clock.now
            upload.cancel()
            // The cancellation handler hops to the loop and aborts the transfer there; a task queued on the loop
            // after it sees the transfer gone. Its latency is the loop's alone.
            let (abortedAt, active) = await Task { @LoopActor in (clock.now, client.activeTransferCount) }.value
            #expect(active == 0, "the transfer was aborted on the loop's next turn")
            #expect(abortedAt - cancelledAt < .milliseconds(100), "abort took \(abortedAt - cancelledAt)")
            // The request's task resumes after that through Swift's global executor and back to the loop (seen
            // with Swift 6.3 and the loop's custom executor: the continuation resumes on a cooperative thread
            // first), so when other tests fill the cooperative pool with blocking work it can take seconds
            // (measured: 2.4–3 s in the full suite, 1 ms alone). Still far below the 32 s that sending the
            // rate-limited body would take.
            let (error, endedAt) = await upload.value
            #expect(error?.kind == .cancelled)
            #expect(endedAt - cancelledAt < .seconds(16), "cancellation took \(endedAt - cancelledAt)")

            // The server sees the disconnect and keeps what had arrived: asked until it says so (a busy server
            // may take a while to store it), for at most 10 s.
            var offset = 0
            let deadline = clock.now + .seconds(10)
            while offset == 0, clock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                let head = try await client.perform(
                    HTTPRequest(method: "HEAD", url: location, headers: ["Tus-Resumable": "1.0.0"]))
                offset = try #require(head.headers["Upload-Offset"].flatMap { Int($0) })
            }
            #expect(offset > 0 && offset < body.count, "server offset \(offset)")
        }
    }

    @Test func closeCompletesEveryPendingTransfer() async throws {
        try await withTusServer { server, client in
            let other = HTTPClient(loop: .main)
            let created = try await other.perform(HTTPRequest(
                method: "POST", url: server.endpoint,
                headers: ["Tus-Resumable": "1.0.0", "Upload-Length": "4194304",
                          "Upload-Metadata": "filename YQ==,filetype eA=="]))
            let location = try #require(created.headers["Location"])
            let pending = (0..<3).map { _ in
                Task { @LoopActor () -> HTTPError? in
                    do {
                        _ = try await other.perform(HTTPRequest(
                            method: "PATCH", url: location,
                            headers: ["Tus-Resumable": "1.0.0", "Upload-Offset": "0",
                                      "Content-Type": "application/offset+octet-stream"],
                            body: testBytes(count: 4 << 20), maxSendBytesPerSecond: 64 << 10))
                        return nil
                    } catch { return error as? HTTPError }
                }
            }
            try await Task.sleep(for: .milliseconds(200))
            other.close()
            for task in pending {
                let error = await task.value
                #expect(error?.kind == .cancelled)
            }
            await #expect(throws: HTTPError.self) {
                _ = try await other.perform(HTTPRequest(method: "GET", url: server.endpoint))
            }
        }
    }

    @Test func refusedConnectionIsConnectionFailed() async throws {
        _ = TestLoop.started
        try await refusedConnection()
    }

    @LoopActor private func refusedConnection() async throws {
        let client = HTTPClient(loop: .main)
        defer { client.close() }
        // Port 1 on loopback: nothing listens there.
        do {
            _ = try await client.perform(HTTPRequest(method: "GET", url: "http://127.0.0.1:1/"))
            Issue.record("expected a connection failure")
        } catch {
            #expect(error.kind == .connectionFailed, "\(error)")
            #expect(error.curlCode == 7)
        }
    }

    @Test func unsupportedSchemeIsOther() async throws {
        _ = TestLoop.started
        try await unsupportedScheme()
    }

    @LoopActor private func unsupportedScheme() async throws {
        let client = HTTPClient(loop: .main)
        defer { client.close() }
        await #expect(throws: HTTPError.self) {
            _ = try await client.perform(HTTPRequest(method: "GET", url: "ftp://127.0.0.1/x"))
        }
    }
}
