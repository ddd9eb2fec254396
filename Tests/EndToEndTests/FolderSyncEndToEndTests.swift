import Foundation
import Testing
import TrailbookEngine

/// "Send only what changed" for folder uploads to S3 (moto) and tus (tuspyserver), counted at the server: a second
/// upload of the same tree sends no file; after adding 5 files and editing 1, exactly those 6 are sent; `--again`
/// sends all.
@Suite(.serialized)
struct FolderSyncEndToEndTests {
    /// The requests that sent bytes of a file (`PutObject`, `UploadPart`) and the objects they made (`PutObject`,
    /// `CreateMultipartUpload`), among `requests`.
    static func sent(_ requests: ArraySlice<JSONValue>) -> (objects: Int, bytes: Int64) {
        let objects = requests.filter { ["PutObject", "CreateMultipartUpload"].contains($0.action) }.count
        let bytes = requests.filter { ["PutObject", "UploadPart"].contains($0.action) }
            .reduce(Int64(0)) { $0 + ($1["length"]?.intValue ?? 0) }
        return (objects, bytes)
    }

    @Test func aSecondUploadToS3SendsOnlyWhatChanged() throws {
        let trip = try FolderUploadEndToEndTests.Trip()
        // Beside the trip's single PUTs, a three-part multipart object (its ETag is the composite `…-3`).
        try trip.add("day2/video.bin", bytes: 11 << 20)
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        var seen = 0
        func upload(_ extra: [String] = []) throws -> (done: JSONValue, objects: Int, bytes: Int64) {
            let id = try daemon.submitUpload(
                [trip.root, "--to", "s3://photos/trips/lisbon/", "--chunk-size", "5MiB"] + extra)
            let done = try daemon.waitForFolder(id, "succeeded", timeout: 120)
            let requests = try server.requests()
            defer { seen = requests.count }
            let (objects, bytes) = Self.sent(requests[seen...])
            return (done, objects, bytes)
        }
        let first = try upload()
        #expect(first.objects == trip.expected.count)
        #expect(first.done["result"]?["tree"]?["already_there"]?.intValue == 0)

        let second = try upload()
        #expect(second.objects == 0)
        #expect(second.bytes == 0)
        #expect(second.done["result"]?["files"]?.arrayValue?.count == 0)
        #expect(second.done["result"]?["tree"]?["uploaded"]?.intValue == 0)
        #expect(second.done["result"]?["tree"]?["already_there"]?.intValue == Int64(trip.expected.count))
        #expect(
            second.done["result"]?["tree"]?["already_there_bytes"]?.intValue == first.done["result"]?["bytes"]?.intValue)

        try FileManager.default.createDirectory(atPath: trip.root + "/day3", withIntermediateDirectories: true)
        for index in 0..<5 { try trip.add("day3/new \(index).jpg", bytes: 100 + index) }
        try trip.add("day1/IMG 0001.jpg", bytes: 1000)  // edited in place, same size
        let third = try upload()
        #expect(third.objects == 6)
        let sent = Set(third.done["result"]?["files"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? [])
        #expect(sent == Set((0..<5).map { "day3/new \($0).jpg" } + ["day1/IMG 0001.jpg"]))
        #expect(third.done["result"]?["tree"]?["already_there"]?.intValue == Int64(trip.expected.count - 6))
        for (name, sha) in trip.expected {
            let key = "trips/lisbon/" + String(decoding: name, as: UTF8.self)
            #expect(try server.object(key)?.sha256 == sha, "object \(key)")
        }

        // The multipart object edited in place (same size): its composite ETag no longer matches, so it is sent.
        try trip.add("day2/video.bin", bytes: 11 << 20)
        let fourth = try upload()
        #expect(fourth.objects == 1)
        #expect(fourth.bytes == 11 << 20)

        let again = try upload(["--again"])
        #expect(again.objects == trip.expected.count)
        #expect(again.done["result"]?["tree"]?["already_there"]?.intValue == 0)
    }
}
