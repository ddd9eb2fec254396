import Foundation
import Testing
import TrailbookEngine

/// Issue 36: plain `show`, `list` and `watch` of a job paused by its own error print the message that says what to
/// do (before, only `show --json` had it). A tus server refuses the upload's token: the job is paused with
/// `unauthorized`, whose message says to `resume ID --header …`.
@Suite struct PlainErrorTextEndToEndTests {
    @Test func plainShowListAndWatchOfAPausedUploadSayHowToResumeIt() throws {
        let servers = try TusServers(token: "s3cret-token")
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try Data(repeating: 7, count: 64 << 10).write(to: URL(fileURLWithPath: work.file("a.bin")))
        let id = try daemon.submitUpload([work.file("a.bin"), "--to", servers.endpoint, "--header", "Authorization: Bearer wrong-token"])
        let paused = try daemon.waitForState(id, "paused")
        try #require(paused["error"]?["code"]?.stringValue == "unauthorized")

        let show = try daemon.cli(["show", id])
        #expect(show.status == 0)
        #expect(show.stdout.contains("state:     paused ("), "\(show.stdout)")
        #expect(show.stdout.contains("resume ID --header") && show.stdout.contains("[unauthorized]"), "\(show.stdout)")
        let list = try daemon.cli(["list"])
        #expect(list.stdout.contains("paused") && list.stdout.contains("resume ID --header"), "\(list.stdout)")

        // Plain `watch ID --since 0` replays the job's events, then follows it until it ends (cancelled here).
        let watch = Process()
        watch.executableURL = URL(fileURLWithPath: Binary.path)
        watch.arguments = ["watch", id, "--since", "0"]
        watch.environment = daemon.environment
        let out = Pipe()
        watch.standardOutput = out
        watch.standardError = FileHandle.nullDevice
        try watch.run()
        // A watchdog: a watch that never prints the pause is killed, so the read below ends.
        let watchdog = DispatchWorkItem { if watch.isRunning { watch.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: watchdog)
        defer { watchdog.cancel() }
        // Cancel only once the replay has printed the pause (a job that ended first gets only its outcome).
        var printed = ""
        while !printed.contains("-> paused") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed += String(decoding: chunk, as: UTF8.self)
        }
        #expect(try daemon.cli(["cancel", id]).status == 0)
        printed += String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        watch.waitUntilExit()
        #expect(printed.contains("-> cancelled"), "watch followed the job to its end: \(printed)")
        let line = printed.split(separator: "\n").first { $0.contains("-> paused") }
        #expect(line?.contains("resume ID --header") == true && line?.contains("[unauthorized]") == true, "\(printed)")
        for output in [show.stdout, list.stdout, printed] { #expect(!output.contains("wrong-token")) }
    }
}
