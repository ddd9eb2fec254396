import Foundation
import Testing
import TrailbookEngine

/// A folder upload's first run takes its file list a page at a time into the store (`UploadTreeListing`, issue
/// 35), through the real daemon: a `kill -9` while the list is being taken (pages of 64, a pause after each so the
/// kill lands between them) leaves a list that is not sealed; the restarted daemon lists again from scratch, and
/// the job ends with every file landed once, with its bytes, the files already at the destination and the entry
/// passed over listed after the files, each position once.
@Suite(.serialized)
struct FolderListingKillEndToEndTests {
    @Test func aKillWhileTheListIsTakenListsAgainAndSendsEveryFileOnce() throws {
        let work = TemporaryDirectory("tbj-listing")
        let destination = TemporaryDirectory("tbj-dest")
        var sums: [String: String] = [:]
        for number in 0..<300 {
            let folder = String(format: "d%d", number / 50)
            if number % 50 == 0 {
                try FileManager.default.createDirectory(
                    atPath: work.file("trip/" + folder), withIntermediateDirectories: true)
            }
            let name = String(format: "%@/%03d.bin", folder, number)
            sums[name] = try UploadEndToEndTests.randomFile(work.file("trip/" + name), bytes: 2 << 10)
        }
        // Ten files already at the destination with the same bytes (left out page by page), and a link (passed
        // over): both are listed after the files.
        try FileManager.default.createDirectory(atPath: destination.file("d5"), withIntermediateDirectories: true)
        let there = (290..<300).map { String(format: "d5/%03d.bin", $0) }
        for name in there {
            try FileManager.default.copyItem(atPath: work.file("trip/" + name), toPath: destination.file(name))
        }
        try FileManager.default.createSymbolicLink(
            atPath: work.file("trip/link.bin"), withDestinationPath: work.file("trip/d0/000.bin"))

        let daemon = try DaemonHarness(environment: [
            "TRAILBOOK_JOBS_TEST_FILE_LIST_PAGE": "64", "TRAILBOOK_JOBS_TEST_LISTING_PAUSE": "0.5",
        ])
        let id = try daemon.submitUpload([work.file("trip"), "--to", "file://" + destination.path])
        // Two pages written, the list not sealed: the walk is under way.
        let deadline = Date().addingTimeInterval(60)
        var seen: JSONValue = .null
        while Date() < deadline {
            seen = try FolderFileListEndToEndTests.files(daemon, [id, "--limit", "1"])
            var written: Int64 = 0
            if case .object(let counts)? = seen["counts"] {
                written = counts.values.reduce(0) { $0 + ($1.intValue ?? 0) }
            }
            if seen["sealed"]?.boolValue == false, written >= 128 { break }
            usleep(10_000)
        }
        #expect(seen["sealed"]?.boolValue == false, "\(seen)")
        try daemon.crash()
        // Nothing is sent before the list is sealed and the plan saved.
        let before = try FileManager.default.subpathsOfDirectory(atPath: destination.path)
            .filter { $0.hasSuffix(".bin") }
        #expect(before.sorted() == there.sorted(), "\(before.count) files at the destination after the kill")

        try daemon.start()
        try daemon.waitForState(id, "succeeded", timeout: 120)
        let listed = try FolderFileListEndToEndTests.files(daemon, [id, "--limit", "1000"])
        #expect(listed["sealed"]?.boolValue == true)
        #expect(listed["counts"] == ["done": 290, "already_there": 10, "passed_over": 1])
        let entries = listed["files"]?.arrayValue ?? []
        #expect(entries.map { $0["position"]?.intValue ?? -1 } == (0..<301).map { Int64($0) })
        // The files first, in upload order; then what was not uploaded.
        #expect(entries.prefix(290).allSatisfy { $0["state"]?.stringValue == "done" })
        #expect(Set(entries.dropFirst(290).compactMap { $0["state"]?.stringValue }) == ["already_there", "passed_over"])
        var uploaded: [String] = []
        for entry in entries.prefix(290) {
            let name = entry["item"]?["name"]?.stringValue ?? ""
            uploaded.append(name)
            #expect(entry["code"]?.stringValue == sums[name], "\(name)")
            #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(destination.file(name))) == sums[name], "\(name)")
        }
        #expect(uploaded == sums.keys.sorted().filter { !there.contains($0) })
        let leftovers = try FileManager.default.subpathsOfDirectory(atPath: destination.path)
            .filter { $0.hasSuffix(".part") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }
}
