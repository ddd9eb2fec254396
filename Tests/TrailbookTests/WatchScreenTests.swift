import Testing
import TrailbookEngine

@testable import TrailbookClient

/// The `watch` screen as a pure value: events in, lines out, no terminal.
struct WatchScreenTests {
    static let t0 = 1_800_000_000.0

    static func job(
        _ id: String, kind: String = "upload", state: String = "running", completed: Int64 = 0, total: Int64 = 100,
        unit: String = "bytes", params: JSONValue = ["files": ["/photos/lisbon/IMG_0001.jpg"]], attempt: Int = 1,
        cancellation: JSONValue = .null, error: JSONValue = .null
    ) -> JSONValue {
        [
            "id": .string(id), "kind": .string(kind), "state": .string(state), "attempt": .number(Double(attempt)),
            "max_attempts": 5, "params": params, "cancellation": cancellation, "error": error,
            "created_at": .string(Timestamp.iso8601(unixSeconds: t0)),
            "progress": [
                "completed": .number(Double(completed)), "total": .number(Double(total)), "unit": .string(unit),
                "rate_per_s": .null, "eta_s": .null,
            ],
        ]
    }

    static func text(_ screen: WatchScreen, width: Int = 100, height: Int = 20, now: Double = t0 + 12) -> [String] {
        screen.render(width: width, height: height, now: now).map(WatchScreen.text)
    }

    @Test func summaryCountsComeFromTheDaemonsCountersKeptCurrentByEvents() {
        var screen = WatchScreen()
        // Two jobs listed, of a million queued: the counters, not the rows, give the summary.
        screen.apply(job: Self.job("a", state: "running"), now: Self.t0)
        screen.apply(job: Self.job("b", state: "queued"), now: Self.t0)
        screen.activeCounts = [.running: 1, .queued: 1_000_000]
        #expect(screen.summary.queued == 1_000_000)
        #expect(screen.summary.running == 1)
        screen.apply(event: ["type": "state", "job": "a", "from": "running", "to": "succeeded"], now: Self.t0 + 1)
        screen.apply(event: ["type": "state", "job": "c", "from": "queued", "to": "running"], now: Self.t0 + 1)
        screen.apply(event: ["type": "submitted", "job": "d", "state": "queued"], now: Self.t0 + 1)
        #expect(screen.summary.running == 1)
        #expect(screen.summary.queued == 1_000_000)
        #expect(screen.summary.done == 1)
        screen.apply(event: ["type": "state", "job": "c", "from": "running", "to": "needs_retry"], now: Self.t0 + 2)
        #expect(screen.summary.running == 0)
        #expect(screen.summary.retrying == 1)
    }

    @Test func barUsesEighthBlocksForSubCharacterResolution() {
        #expect(WatchScreen.bar(0, width: 4) == "    ")
        #expect(WatchScreen.bar(1, width: 4) == "████")
        #expect(WatchScreen.bar(0.5, width: 4) == "██  ")
        // 1/32 of 4 columns is one eighth of a column.
        #expect(WatchScreen.bar(1.0 / 32, width: 4) == "▏   ")
        #expect(WatchScreen.bar(0.3, width: 10) == "███       ")
        #expect(WatchScreen.bar(0.35, width: 10) == "███▌      ")
        #expect(WatchScreen.bar(.nan, width: 3) == "   ")
        for step in 0...80 {
            #expect(WatchScreen.bar(Double(step) / 80, width: 10).count == 10)
        }
    }

    @Test func percentNeverRoundsUpToDone() {
        #expect(WatchScreen.percent(0.9999) == "99.9%")
        #expect(WatchScreen.percent(1) == "100.0%")
        #expect(WatchScreen.percent(0.452) == "45.2%")
    }

    @Test func runningRowShowsLabelBarPercentAmountRateEtaElapsedAndAttempt() {
        var screen = WatchScreen()
        screen.apply(job: Self.job("aaaaaaaa-1", completed: 0, total: 100 * 1_048_576), now: Self.t0)
        screen.apply(
            event: [
                "seq": 5, "job": "aaaaaaaa-1", "kind": "upload", "type": "progress",
                "progress": [
                    "completed": 47_185_920, "total": 104_857_600, "unit": "bytes", "rate_per_s": 12_582_912,
                    "eta_s": 4.6,
                ],
            ], now: Self.t0 + 12)
        let lines = Self.text(screen, width: 120)
        let row = lines[0]
        #expect(row.hasPrefix("▸ upload aaaaaaaa IMG_0001.jpg "))
        #expect(row.contains("45.0%"))
        #expect(row.contains("45.0/100.0 MiB"))
        #expect(row.contains("12.0 MiB/s"))
        #expect(row.contains("ETA 5s"))
        #expect(row.contains("0:12"))
        #expect(row.contains("try 1/5"))
        #expect(row.hasSuffix("running"))
        #expect(row.contains("█"))
        #expect(lines.contains("1 running · 0 queued · 0 done · 0 failed"))
    }

    @Test func photosCountInPhotos() {
        var screen = WatchScreen()
        screen.apply(
            job: Self.job("t1", kind: "tag", completed: 90, total: 200, unit: "photos", params: ["tag": "trip"]),
            now: Self.t0)
        let row = Self.text(screen)[0]
        #expect(row.contains("tag trip"))
        #expect(row.contains("90/200 photos"))
        #expect(row.contains("45.0%"))
    }

    @Test func reasonsInWords() {
        var screen = WatchScreen()
        screen.apply(job: Self.job("stopped"), now: Self.t0)
        screen.apply(
            event: [
                "job": "stopped", "kind": "upload", "type": "state", "from": "running", "to": "cancelled",
                "cancellation": ["reason": "user_stop", "detail": "cancelled by user"],
            ], now: Self.t0 + 1)
        screen.apply(job: Self.job("retry"), now: Self.t0)
        screen.apply(
            event: [
                "job": "retry", "kind": "upload", "type": "state", "from": "running", "to": "needs_retry",
                "cancellation": ["reason": "timeout", "detail": "no progress for 60 s"], "retry_in_s": 30,
            ], now: Self.t0 + 2)
        screen.apply(job: Self.job("reclaimed"), now: Self.t0)
        screen.apply(
            event: [
                "job": "reclaimed", "kind": "upload", "type": "state", "from": "running", "to": "queued",
                "cancellation": ["reason": "resource_reclaim", "detail": "paused to free a slot for job x (priority 10)"],
            ], now: Self.t0 + 2)
        screen.apply(job: Self.job("broken"), now: Self.t0)
        screen.apply(
            event: [
                "job": "broken", "kind": "upload", "type": "state", "from": "running", "to": "failed",
                "error": ["code": "source_changed", "message": "IMG_0001.jpg changed since the upload started"],
            ], now: Self.t0 + 3)
        let lines = Self.text(screen, width: 120, now: Self.t0 + 2)
        #expect(lines.contains { $0.contains("cancelled — stopped by you") })
        #expect(lines.contains { $0.contains("timed out — will retry in 30 s") })
        #expect(lines.contains { $0.contains("paused to free a slot — will resume") })
        #expect(lines.contains { $0.contains("failed — IMG_0001.jpg changed since the upload started") })
        // The countdown runs down.
        #expect(Self.text(screen, width: 120, now: Self.t0 + 12).contains { $0.contains("will retry in 20 s") })
        #expect(lines.contains("0 running · 1 queued · 1 waiting to retry · 0 done · 1 failed · 1 cancelled"))
    }

    @Test func finishedJobsSettleAboveLiveRows() {
        var screen = WatchScreen()
        for id in ["a", "b", "c"] { screen.apply(job: Self.job(id, completed: 10), now: Self.t0) }
        screen.apply(
            event: ["job": "b", "kind": "upload", "type": "state", "from": "running", "to": "succeeded"],
            now: Self.t0 + 5)
        let lines = Self.text(screen)
        #expect(lines[0].hasPrefix("✓ upload b"))
        #expect(lines[0].contains("succeeded"))
        #expect(lines[0].contains("100 B"))
        #expect(lines[1].hasPrefix("▸ upload a"))
        #expect(lines[2].hasPrefix("  upload c"))
        #expect(lines[3].hasPrefix("2 running · 0 queued · 1 done"))
    }

    @Test func selectionMovesAndSkipsEndedJobs() {
        var screen = WatchScreen()
        for id in ["a", "b", "c"] { screen.apply(job: Self.job(id), now: Self.t0) }
        #expect(screen.selection == "a")
        screen.moveSelection(by: 1)
        #expect(screen.selection == "b")
        screen.moveSelection(by: 5)
        #expect(screen.selection == "c")
        screen.apply(event: ["job": "c", "type": "state", "from": "running", "to": "cancelled"], now: Self.t0)
        #expect(screen.selection == "a")
        screen.moveSelection(by: -3)
        #expect(screen.selection == "a")
    }

    @Test func narrowTerminalsDegradeAndNeverOverflow() {
        var screen = WatchScreen()
        screen.apply(job: Self.job("aaaaaaaa-1", completed: 30, total: 100), now: Self.t0)
        screen.apply(job: Self.job("bbbbbbbb-2", completed: 20), now: Self.t0)
        screen.apply(
            event: [
                "job": "bbbbbbbb-2", "type": "state", "from": "running", "to": "needs_retry",
                "cancellation": ["reason": "timeout", "detail": "no progress for 60 s"], "retry_in_s": 30,
            ], now: Self.t0)
        for width in [1, 5, 20, 30, 40, 60, 80, 100, 200] {
            for line in Self.text(screen, width: width, now: Self.t0) {
                #expect(line.count <= width, "width \(width): \(line)")
            }
        }
        // At 60 columns the reason still fits in full, the percent stays.
        let narrow = Self.text(screen, width: 60, now: Self.t0)
        #expect(narrow.contains { $0.contains("timed out — will retry in 30 s") })
        #expect(narrow.contains { $0.contains("30.0%") })
        #expect(Self.text(screen, width: 30, now: Self.t0).contains { $0.contains("30.0%") })
    }

    @Test func heightIsRespectedAndSelectionStaysInView() {
        var screen = WatchScreen()
        for index in 0..<30 { screen.apply(job: Self.job("job-\(index)"), now: Self.t0) }
        screen.moveSelection(by: 25)
        let lines = Self.text(screen, height: 10)
        #expect(lines.count == 10)
        #expect(lines.contains { $0.hasPrefix("▸ upload job-25") })
    }

    /// `--expand` lists the files in flight under a running job: not the finished one, not the ones not started
    /// (the daemon's window holds both), the file named `current` even before its first byte is acknowledged.
    @Test func expandShowsTheFilesInFlight() {
        var screen = WatchScreen(expand: true)
        screen.apply(job: Self.job("multi", params: ["files": ["/a/one.jpg", "/a/two.jpg"]]), now: Self.t0)
        screen.apply(
            event: [
                "job": "multi", "kind": "upload", "type": "progress",
                "progress": [
                    "completed": 150, "total": 600, "unit": "bytes", "current": "three.jpg",
                    "items": [
                        ["label": "one.jpg", "completed": 100, "total": 100],
                        ["label": "two.jpg", "completed": 50, "total": 200],
                        ["label": "three.jpg", "completed": 0, "total": 100],
                        ["label": "four.jpg", "completed": 0, "total": 100],
                        ["label": "empty.txt", "completed": 0, "total": 0],
                    ],
                ],
            ], now: Self.t0 + 1)
        let lines = Self.text(screen)
        #expect(lines[0].contains("three.jpg"))
        #expect(lines[1].contains("└ two.jpg") && lines[1].contains("25.0%") && lines[1].contains("50 B/200 B"))
        #expect(lines[2].contains("└ three.jpg") && lines[2].contains("0.0%"))
        #expect(lines.filter { $0.contains("└") }.count == 2, "\(lines)")
        #expect(!lines.contains { $0.contains("one.jpg") || $0.contains("four.jpg") || $0.contains("empty.txt") })
        screen.expand = false
        #expect(!Self.text(screen).contains { $0.contains("└") })
        // A job that is not running has no file in flight, whatever its last progress said.
        screen.expand = true
        screen.apply(event: ["type": "state", "job": "multi", "from": "running", "to": "paused"], now: Self.t0 + 2)
        #expect(!Self.text(screen).contains { $0.contains("└") })
    }

    /// Many files in flight (a folder sent several at a time): at most `FilesInFlight.lineLimit` lines, the rest
    /// summed up in one line, every line within the width.
    @Test func expandIsBoundedAndFitsTheWidth() {
        var screen = WatchScreen(expand: true)
        screen.apply(job: Self.job("tree", params: ["files": ["/trip"]]), now: Self.t0)
        let items: [JSONValue] = (0..<12).map { number in
            ["label": .string("day\(number)/IMG_\(number).jpg"), "completed": 10, "total": 100]
        }
        screen.apply(
            event: [
                "job": "tree", "kind": "upload", "type": "progress",
                "progress": ["completed": 120, "total": 1200, "unit": "bytes", "items": .array(items)],
            ], now: Self.t0 + 1)
        for width in [100, 40, 12] {
            let lines = Self.text(screen, width: width, height: 30)
            let sub = lines.filter { $0.contains("└") }
            #expect(sub.count == FilesInFlight.lineLimit + 1, "\(width): \(lines)")
            #expect(lines.allSatisfy { TerminalText.columns($0) <= width }, "\(width): \(lines)")
            if width == 100 { #expect(sub.last?.contains("+4 more in flight") == true) }
        }
    }

    /// The plain form (not a terminal): one escaped line per file in flight, with the job's head, an ASCII bar,
    /// the percent and the bytes; a name holding escapes and a newline stays on its line and shows as text.
    @Test func plainLinesOfTheFilesInFlight() {
        let progress: JSONValue = [
            "completed": 300, "total": 1_300, "unit": "bytes", "current": "a.jpg",
            "items": [
                ["label": "done.jpg", "completed": 100, "total": 100],
                ["label": "\u{1B}]0;pwned\u{07}\nb.jpg", "completed": 200, "total": 400],
                ["label": "a.jpg", "completed": 0, "total": 800],
            ],
        ]
        let lines = FilesInFlight(progress: progress).plainLines(head: "T 0123abcd upload", unit: "bytes")
        #expect(lines.count == 2)
        #expect(lines[0] == "T 0123abcd upload   └ \\x1b]0;pwned\\x07\\nb.jpg [##########          ] 50.0% 200 B/400 B")
        #expect(lines[1] == "T 0123abcd upload   └ a.jpg [                    ] 0.0% 0 B/800 B")
        #expect(!lines.joined().contains("\u{1B}") && !lines.joined().contains("\n"))
        #expect(FilesInFlight(progress: ["completed": 1, "total": 2, "unit": "bytes"]).isEmpty)
    }

    @Test func ownRateWhenTheDaemonSendsNone() {
        var screen = WatchScreen()
        screen.apply(job: Self.job("r", unit: "photos"), now: Self.t0)
        for second in 1...10 {
            screen.apply(
                event: [
                    "job": "r", "type": "progress",
                    "progress": ["completed": .number(Double(second * 5)), "total": 100, "unit": "photos"],
                ], now: Self.t0 + Double(second))
        }
        let rate = screen.rows["r"]?.rate ?? 0
        #expect(rate > 4 && rate < 6)
    }

    @Test func colourOnlyWhenAsked() {
        let line: WatchScreen.Line = [.init("ok", .green), .init(" plain")]
        #expect(WatchScreen.encode(line, color: false) == "ok plain")
        #expect(WatchScreen.encode(line, color: true) == "\u{1B}[32mok\u{1B}[0m plain")
    }

    @Test func timestampsParse() {
        #expect(WatchScreen.unixSeconds("1970-01-01T00:01:00Z") == 60)
        #expect(WatchScreen.unixSeconds(Timestamp.iso8601(unixSeconds: Self.t0)) == Self.t0)
    }

    /// A job pruned between its end and `submit --wait`'s `show` is answered from its end event: the job rebuilt
    /// from the event sums up the same end (state, result, error, cancellation) as the stored job did.
    @Test func aJobRebuiltFromItsEndEventEndsTheSameWay() {
        let failed: JSONValue = [
            "id": "j1", "kind": "upload", "state": "failed", "attempt": 2, "updated_at": "2027-01-01T00:00:00Z",
            "result": .null, "error": ["code": "write_failed", "message": "disk full"],
        ]
        let rebuilt = Watch.job(endedBy: Watch.endedEvent(failed))
        #expect(rebuilt == failed)
        #expect(JobText.summary(rebuilt) == JobText.summary(failed))
        let cancelled: JSONValue = [
            "id": "j2", "kind": "sleep", "state": "cancelled", "attempt": 1, "updated_at": "2027-01-01T00:00:01Z",
            "result": .null, "cancellation": ["reason": "user_stop"],
        ]
        #expect(Watch.job(endedBy: Watch.endedEvent(cancelled)) == cancelled)
    }

    /// Every kind gets a label: an import showed none, a tag or autotag job of all photos or of an ID file none.
    @Test func everyKindOfJobHasALabel() {
        #expect(WatchScreen.label(kind: "import", params: ["dir": "/photos/trip"]) == "trip/")
        #expect(WatchScreen.label(kind: "import", params: ["dir": ["base64": "Y2Fm6Q==", "text": "/p/caf\\xe9"]]) == "caf\\xe9/")
        #expect(WatchScreen.label(kind: "autotag", params: ["all": true]) == "all photos")
        #expect(WatchScreen.label(kind: "autotag", params: ["ids_file": "/p/picks.txt"]) == "photos in picks.txt")
        #expect(WatchScreen.label(kind: "tag", params: ["tag": "trip:Lisbon", "all": true]) == "tag trip:Lisbon")
        #expect(WatchScreen.label(kind: "autotag", params: ["ids": ["a", "b"]]) == "2 photos")
        #expect(WatchScreen.label(kind: "upload", params: ["files": ["/a/x.jpg", "/a/y.jpg"], "to": "file:///o"]) == "x.jpg +1")
    }
}
