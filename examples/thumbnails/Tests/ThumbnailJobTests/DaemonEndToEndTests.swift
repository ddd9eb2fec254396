import Foundation
import Testing
import ThumbnailJob
import TrailbookClient

/// The example's own daemon (`thumbnail-jobs daemon`, built beside this test) running its own kind, driven through
/// the typed client: submit → progress → cancel (`user_stop`) → clean-up ran; submit → `timeout` → the next attempt
/// resumes from the checkpoint.
@Suite(.serialized) struct DaemonEndToEndTests {
    /// The daemon in a home of its own; `stop()` ends it with SIGTERM.
    final class Daemon {
        let home = "/tmp/tj-\(UUID().uuidString.prefix(8))"
        var process = Process()
        var client: JobClient { JobClient(socketPath: home + "/daemon.sock") }

        init() throws {
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
            try start()
        }

        /// Ends the daemon (SIGTERM) and starts it again on the same home.
        func restart() throws {
            process.terminate()
            process.waitUntilExit()
            process = Process()
            try start()
        }

        private func start() throws {
            let binary = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../.build/debug/thumbnail-jobs").standardized
            guard FileManager.default.isExecutableFile(atPath: binary.path) else {
                throw DaemonError("build the example first (swift build --build-tests): no \(binary.path)")
            }
            process.executableURL = binary
            process.arguments = ["daemon", "--retry-base", "100ms"]
            process.environment = ProcessInfo.processInfo.environment.merging(["TRAILBOOK_JOBS_HOME": home]) { $1 }
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            // Up once it answers: `not_found` for a job that is not there.
            let deadline = Date().addingTimeInterval(30)
            while true {
                do {
                    _ = try client.job("00000000")
                } catch .refused {
                    return
                } catch {
                    guard Date() < deadline, process.isRunning else { throw DaemonError("the daemon did not start: \(error)") }
                    usleep(20_000)
                }
            }
        }

        func stop() {
            process.terminate()
            process.waitUntilExit()
            try? FileManager.default.removeItem(atPath: home)
        }
    }

    struct DaemonError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Reads `feed` until `until` says an event is the one awaited; returns the events read. Fails after 60 s.
    static func read(
        _ feed: inout JobFeed.AsyncIterator, until: (FeedEvent) -> Bool
    ) async throws -> [FeedEvent] {
        var events: [FeedEvent] = []
        while let event = try await feed.next() {
            events.append(event)
            if until(event) { return events }
        }
        return events
    }

    @Test func submitProgressCancelCleansUp() async throws {
        let daemon = try Daemon()
        defer { daemon.stop() }
        let photos = try ThumbnailJobTests.Photos(count: 40)
        defer { photos.remove() }
        var feed = daemon.client.feed(kinds: [ThumbnailJob.name]).makeAsyncIterator()
        let params = ThumbnailJob.Params(folder: photos.folder, output: photos.output, maxRate: 20)
        let (job, existing) = try daemon.client.submit(kind: ThumbnailJob.name, params: params, key: "cancel-\(daemon.home)")
        #expect(!existing)
        _ = try await Self.read(&feed) { event in
            if case .progress(let progress) = event.payload { return event.jobID == job.id && progress.completed >= 3 }
            return false
        }
        _ = try daemon.client.cancel(job.id)
        let events = try await Self.read(&feed) { event in
            if case .state(_, .cancelled, _, _, _, _) = event.payload { return event.jobID == job.id }
            return false
        }
        let ended = try daemon.client.job(job.id)
        #expect(ended.state == .cancelled)
        #expect(ended.cancellation?.reason == .userStop)
        #expect(ended.progress.unit.rawValue == "thumbnails")
        #expect(events.contains { if case .log(_, let text) = $0.payload { text.hasPrefix("stopped (user_stop)") } else { false } })
        // The first clean-up try runs before `cancel` answers: the thumbnails made are gone.
        #expect(photos.thumbnails().isEmpty)
    }

    @Test func theFeedGoesOnAfterADaemonRestart() async throws {
        let daemon = try Daemon()
        defer { daemon.stop() }
        let photos = try ThumbnailJobTests.Photos(count: 2)
        defer { photos.remove() }
        var feed = daemon.client.feed(kinds: [ThumbnailJob.name]).makeAsyncIterator()
        let params = ThumbnailJob.Params(folder: photos.folder, output: photos.output)
        let (first, _) = try daemon.client.submit(kind: ThumbnailJob.name, params: params)
        let before = try await Self.read(&feed) { event in
            if case .state(_, .succeeded, _, _, _, _) = event.payload { return event.jobID == first.id }
            return false
        }
        try daemon.restart()
        let (second, _) = try daemon.client.submit(kind: ThumbnailJob.name, params: params, options: SubmitOptions(allowDuplicate: true))
        let after = try await Self.read(&feed) { event in
            if case .state(_, .succeeded, _, _, _, _) = event.payload { return event.jobID == second.id }
            return false
        }
        // Nothing delivered before the restart comes again; numbering goes on; a loss would be a `gap` event.
        let seqs = (before + after).compactMap(\.seq)
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
        #expect(!after.contains { $0.jobID == first.id })
        #expect(after.contains { $0.jobID == second.id })
    }

    @Test func aTimedOutAttemptResumesFromItsCheckpoint() async throws {
        let daemon = try Daemon()
        defer { daemon.stop() }
        let photos = try ThumbnailJobTests.Photos(count: 30)
        defer { photos.remove() }
        var feed = daemon.client.feed(kinds: [ThumbnailJob.name]).makeAsyncIterator()
        let params = ThumbnailJob.Params(folder: photos.folder, output: photos.output, maxRate: 20)
        let (job, _) = try daemon.client.submit(
            kind: ThumbnailJob.name, params: params, options: SubmitOptions(timeoutSeconds: 1, maxAttempts: 3))
        let events = try await Self.read(&feed) { event in
            if case .state(_, let to, _, _, _, _) = event.payload { return event.jobID == job.id && to.isTerminal }
            return false
        }
        let timedOut = events.contains { event in
            if case .state(_, .needsRetry, 1, let cancellation, _, _) = event.payload { return cancellation?.reason == .timeout }
            return false
        }
        #expect(timedOut)
        let ended = try daemon.client.job(job.id)
        #expect(ended.state == .succeeded)
        let output = try #require(try ended.result(as: ThumbnailJob.Output.self))
        #expect(output.attempt == 2)
        #expect(output.resumedFrom > 0 && output.resumedFrom < 30)
        #expect(output.thumbnails == 30)
        #expect(photos.thumbnails().count == 30)
    }
}
