import Testing
import TrailbookEngine

@testable import TrailbookClient

/// Progress in two units (issue 35): a folder upload counts bytes and files, in the stored JSON, `show` and the
/// `watch` screen; other jobs show no file count.
struct FileCountProgressTests {
    static let progress: JSONValue = [
        "completed": .number(Double(1_288_490_189)), "total": .number(Double(9_019_431_321)), "unit": "bytes",
        "fraction": 0.1429, "rate_per_s": .number(Double(12_582_912)), "eta_s": 614, "files_completed": 312,
        "files_total": 2480,
    ]

    @Test func theFileCountIsStoredBesideTheBytesAndReadBack() throws {
        let progress = JobProgress(
            completed: 5, total: 10, unit: .bytes, files: ProgressFileCount(completed: 1, total: 3))
        #expect(progress.json["files_completed"]?.intValue == 1)
        #expect(progress.json["files_total"]?.intValue == 3)
        #expect(progress.jsonText == String(decoding: JSONCoding.encode(progress.json), as: UTF8.self))
        #expect(progress.jsonMembers.map(\.key) == progress.jsonMembers.map(\.key).sorted())
        let read = try #require(JobProgress(json: progress.json))
        #expect(read.files == ProgressFileCount(completed: 1, total: 3))
        // Kinds that count no files publish no file members.
        #expect(JobProgress(completed: 5, total: 10, unit: .bytes).json["files_total"] == nil)
        #expect(JobProgress(json: JobProgress(unit: .photos).json)?.files == nil)
    }

    @Test func showsBytesAndFilesWithRateAndETA() {
        #expect(JobText.progress(Self.progress) == "14.2% 1.2 GiB/8.4 GiB, 312 / 2 480 files 12.0 MiB/s ETA 10m14s")
        #expect(JobText.grouped(100_000) == "100 000")
        #expect(JobText.grouped(999) == "999")
        // One file: the bytes say it all.
        var single = Self.progress
        if case .object(var members) = single {
            members["files_total"] = 1
            members["files_completed"] = 0
            single = .object(members)
        }
        #expect(!JobText.progress(single).contains("files"))
    }

    @Test func theWatchRowShowsTheFileCount() {
        var screen = WatchScreen()
        screen.apply(
            job: WatchScreenTests.job("aaaaaaaa-1", completed: 0, total: 9_019_431_321, params: ["files": ["/trip"]]),
            now: WatchScreenTests.t0)
        screen.apply(
            event: ["seq": 5, "job": "aaaaaaaa-1", "kind": "upload", "type": "progress", "progress": Self.progress],
            now: WatchScreenTests.t0 + 12)
        let row = WatchScreenTests.text(screen, width: 160)[0]
        #expect(row.contains("1.2/8.4 GiB, 312 / 2 480 files"), "\(row)")
    }
}
