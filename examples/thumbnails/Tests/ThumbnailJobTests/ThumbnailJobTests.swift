import Foundation
import PhotoLibrary
import Testing
import ThumbnailJob
import TrailbookEngine
import TrailbookJobsTesting

/// `ThumbnailJob` on the in-process harness: real JPEGs in a temporary folder, no daemon.
@Suite struct ThumbnailJobTests {
    /// A folder of `count` small JPEGs and an output folder beside it.
    struct Photos {
        let root = NSTemporaryDirectory() + "thumbnails-\(UUID().uuidString)"
        var folder: String { root + "/photos" }
        var output: String { root + "/thumbs" }

        init(count: Int) throws {
            try FileManager.default.createDirectory(atPath: root + "/photos", withIntermediateDirectories: true)
            for index in 0..<count {
                var pixels: [UInt8] = []
                for i in 0..<(64 * 48) { pixels += [UInt8(i % 256), UInt8(index * 20 % 256), 128] }
                let jpeg = try RGBImage(width: 64, height: 48, pixels: pixels).jpegData()
                FileManager.default.createFile(atPath: folder + "/img\(index).jpg", contents: Data(jpeg))
            }
        }

        func thumbnails() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: output)) ?? []).sorted()
        }

        func remove() { try? FileManager.default.removeItem(atPath: root) }
    }

    @Test func makesEveryThumbnailAtTheLongSide() async throws {
        let photos = try Photos(count: 3)
        defer { photos.remove() }
        let harness = JobKindHarness(ThumbnailJob(), params: .init(folder: photos.folder, output: photos.output, longSide: 32))
        let attempt = await harness.runAttempt()
        #expect(attempt.output == ThumbnailJob.Output(thumbnails: 3, resumedFrom: 0, attempt: 1))
        #expect(photos.thumbnails() == ["img0.jpg", "img1.jpg", "img2.jpg"])
        let thumbnail = try [UInt8](Data(contentsOf: URL(fileURLWithPath: photos.output + "/img0.jpg")))
        let decoded = try RGBImage.decodeJPEG(thumbnail).image
        #expect(max(decoded.width, decoded.height) == 32)
        #expect(await harness.progressReports.last?.unit.rawValue == "thumbnails")
    }

    @Test func aTimeoutKeepsTheThumbnailsAndTheNextAttemptResumes() async throws {
        let photos = try Photos(count: 5)
        defer { photos.remove() }
        let harness = JobKindHarness(ThumbnailJob(), params: .init(folder: photos.folder, output: photos.output))
        let first = await harness.runAttempt(stoppingAt: .checkpointSave(2), reason: .timeout)
        #expect(first.stopReason == .timeout)
        #expect(first.state == .needsRetry)
        #expect(first.cleanUps.isEmpty)
        #expect(photos.thumbnails() == ["img0.jpg", "img1.jpg"])
        #expect(try await harness.checkpoint(as: ThumbnailJob.Checkpoint.self)?.done == 2)

        let second = await harness.runAttempt()
        #expect(second.output == ThumbnailJob.Output(thumbnails: 5, resumedFrom: 2, attempt: 2))
        #expect(await harness.logs.contains { $0.message == "resuming after 2 of 5 thumbnails" })
        #expect(photos.thumbnails().count == 5)
    }

    @Test func aUserStopRemovesWhatTheJobMade() async throws {
        let photos = try Photos(count: 4)
        defer { photos.remove() }
        let harness = JobKindHarness(ThumbnailJob(), params: .init(folder: photos.folder, output: photos.output))
        let attempt = await harness.runAttempt(stoppingAt: .progress(atLeast: 3), reason: .userStop)
        #expect(attempt.onCancelReason == .userStop)
        #expect(attempt.state == .cancelled)
        #expect(attempt.cleanUps == [.done])
        #expect(photos.thumbnails().isEmpty)
        #expect(await harness.logs.contains { $0.message == "clean-up after cancelled: removed 3 thumbnail(s)" })
    }

    @Test func aFolderThatIsNotThereIsRefusedAtSubmit() async throws {
        await #expect(throws: JobError.self) {
            try await ThumbnailJob().validate(.init(folder: "/nonexistent-\(UUID().uuidString)", output: "/tmp/x"))
        }
    }

    @Test func aFileThatIsNotAJPEGFailsTheJobNamingIt() async throws {
        let photos = try Photos(count: 1)
        defer { photos.remove() }
        FileManager.default.createFile(atPath: photos.folder + "/broken.jpg", contents: Data("not a jpeg".utf8))
        let harness = JobKindHarness(ThumbnailJob(), params: .init(folder: photos.folder, output: photos.output))
        let attempt = await harness.runAttempt()
        #expect(attempt.error?.code == "bad_photo")
        #expect(attempt.state == .failed)
        #expect(attempt.cleanUps == [.done])
        #expect(photos.thumbnails().isEmpty)
    }
}
