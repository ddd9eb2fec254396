import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// Issue 41 §5: a `kill -9` after the server completed a multipart upload but before the checkpoint recorded it.
/// The next attempt hears `NoSuchUpload` for the recorded UploadId, which is also what S3 says of a completed
/// upload: it looks at the object (its size and digest) before starting over, and finds the upload done.
@Suite(.serialized)
struct S3LastStepEndToEndTests {
    typealias E2E = S3UploadEndToEndTests

    /// Completes a 3-part upload of 12 MiB whose `CompleteMultipartUpload` answer the server withholds, kills the
    /// daemon while it waits for it, restarts it; `extra` are more submit arguments.
    /// - Returns: the ended job, the server's requests, and the job's log messages.
    static func killAfterTheServerCompleted(
        _ extra: [String]
    ) throws -> (job: JSONValue, requests: [JSONValue], log: [String], expected: String, object: String?) {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("done.bin"), bytes: 12 << 20)
        try TusServers.curl(["-X", "POST", "-f", server.endpoint + "/__fault/hold?action=CompleteMultipartUpload&count=1"])
        let id = try daemon.submitUpload([work.file("done.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB"] + extra)
        try E2E.waitUntil("the server completed the upload and holds the answer", timeout: 60) {
            try server.requests().contains { $0.action == "CompleteMultipartUpload" && $0["held"]?.boolValue == true }
        }
        #expect(try server.object("done.bin")?.sha256 == expected, "the object is complete before the kill")
        try daemon.crash()
        try server.clearFaults()
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        let log = try S3FaultEndToEndTests.logMessages(daemon, id)
        return (done, try server.requests(), log, expected, try server.object("done.bin")?.sha256)
    }

    /// With SHA-256 checksums (the default): the object's composite checksum proves it is this file's.
    @Test func aKillAfterTheServerCompletedTheUploadSendsNothingAgain() throws {
        let run = try Self.killAfterTheServerCompleted([])
        Self.checkNothingSentAgain(run)
        #expect(run.requests.contains { $0.action == "HeadObject" && $0["status"]?.intValue == 200 })
    }

    /// With MD5 only (no checksum on the object): the multipart ETag (MD5 of the parts' MD5s, `-3`) proves it.
    @Test func aKillAfterTheServerCompletedAnMD5UploadSendsNothingAgain() throws {
        let run = try Self.killAfterTheServerCompleted(["--checksum", "md5"])
        Self.checkNothingSentAgain(run)
    }

    static func checkNothingSentAgain(
        _ run: (job: JSONValue, requests: [JSONValue], log: [String], expected: String, object: String?)
    ) {
        #expect(run.job["attempt"]?.intValue == 1)
        #expect(run.job["result"]?["sha256"]?.stringValue == run.expected)
        #expect(run.job["result"]?["bytes_resent"]?.intValue == 0, "\(run.job["result"] ?? .null)")
        #expect(run.object == run.expected)
        #expect(E2E.count(run.requests, "CreateMultipartUpload") == 1, "no second upload")
        #expect(E2E.count(run.requests, "UploadPart") == 3, "each part sent once")
        #expect(E2E.count(run.requests, "CompleteMultipartUpload") == 1)
        #expect(!run.log.contains { $0.contains("NoSuchUpload") }, "no claim that the upload was lost: \(run.log)")
        #expect(run.log.contains { $0.contains("was completed before this job recorded it") }, "\(run.log)")
    }
}
