import Testing
import TrailbookEngine

@testable import TrailbookClient

/// A long step without units (`ProgressPhase`, `JobContext.reportPhase`): stored and published in the progress
/// JSON while it lasts, absent otherwise, and said by `show` and the `watch` screen.
struct ProgressPhaseTests {
    static let phase = ProgressPhase(label: "listing the destination", count: 41_000, unit: ProgressUnit("objects"))

    @Test func thePhaseIsStoredInTheProgressAndReadBack() throws {
        let progress = JobProgress(completed: 0, total: 0, unit: .bytes, phase: Self.phase)
        #expect(progress.json["phase"]?["label"]?.stringValue == "listing the destination")
        #expect(progress.json["phase"]?["count"]?.intValue == 41_000)
        #expect(progress.json["phase"]?["unit"]?.stringValue == "objects")
        #expect(progress.jsonText == String(decoding: JSONCoding.encode(progress.json), as: UTF8.self))
        #expect(progress.jsonMembers.map(\.key) == progress.jsonMembers.map(\.key).sorted())
        #expect(JobProgress(json: progress.json)?.phase == Self.phase)
        // No phase, no member.
        #expect(JobProgress(completed: 5, total: 10, unit: .bytes).json["phase"] == nil)
        #expect(JobProgress(json: JobProgress(unit: .bytes).json)?.phase == nil)
        // A malformed phase is no phase.
        #expect(ProgressPhase(json: ["label": "x", "count": 1, "unit": "Not A Unit"]) == nil)
    }

    @Test func showSaysWhatTheJobIsDoing() {
        let progress = JobProgress(completed: 0, total: 0, unit: .bytes, phase: Self.phase).json
        #expect(JobText.progress(progress) == "0 B (listing the destination: 41 000 objects)")
        let hashing = JobProgress(
            unit: .bytes, phase: ProgressPhase(label: "hashing to compare", count: 3 << 30, unit: .bytes)).json
        #expect(JobText.phase(hashing) == "hashing to compare: 3.0 GiB")
    }

    @Test func theWatchRowShowsThePhase() {
        var screen = WatchScreen()
        screen.apply(
            job: WatchScreenTests.job("aaaaaaaa-1", completed: 0, total: 0, params: ["files": ["/trip"]]),
            now: WatchScreenTests.t0)
        let progress = JobProgress(unit: .bytes, phase: Self.phase).json
        screen.apply(
            event: ["seq": 5, "job": "aaaaaaaa-1", "kind": "upload", "type": "progress", "progress": progress],
            now: WatchScreenTests.t0 + 1)
        let row = WatchScreenTests.text(screen, width: 200)[0]
        #expect(row.contains("listing the destination: 41 000 objects"), "\(row)")
    }
}
