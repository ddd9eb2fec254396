import Testing
import TrailbookEngine

@testable import TrailbookClient

#if canImport(Glibc)
    import Glibc
#endif

/// Names and messages as the terminal shows them: control characters escaped, widths in columns (issue 10, item 4).
struct TerminalTextTests {
    static let t0 = 1_800_000_000.0

    @Test func controlCharactersAreEscapedVisibly() {
        #expect(TerminalText.escape("\u{1B}]0;pwned\u{07}x.jpg") == "\\x1b]0;pwned\\x07x.jpg")
        #expect(TerminalText.escape("a\u{1B}[2Jb") == "a\\x1b[2Jb")
        #expect(TerminalText.escape("one\ntwo\tthree\r") == "one\\ntwo\\tthree\\r")
        #expect(TerminalText.escape("\u{0}\u{7F}") == "\\x00\\x7f")
        // C1 controls (U+009B is CSI on 8-bit terminals) and a right-to-left override.
        #expect(TerminalText.escape("\u{9B}31m\u{85}") == "\\u009b31m\\u0085")
        #expect(TerminalText.escape("evil\u{202E}gpj.exe") == "evil\\u202egpj.exe")
        // Nothing else changes: backslashes, accents, CJK, emoji.
        #expect(TerminalText.escape("a\\b café 東京 👍") == "a\\b café 東京 👍")
    }

    @Test func widthsAreTerminalColumns() {
        #expect(TerminalText.columns("IMG_0001.jpg") == 12)
        #expect(TerminalText.columns("東京タワー.jpg") == 14)  // 5 wide + 4
        #expect(TerminalText.columns("한국") == 4)
        #expect(TerminalText.columns("ｆｕｌｌ") == 8)  // fullwidth forms
        #expect(TerminalText.columns("cafe\u{301}") == 4)  // combining acute accent: 0
        #expect(TerminalText.columns("a\u{200B}b\u{200D}c") == 3)  // zero-width space and joiner
        #expect(TerminalText.columns("👍") == 2)
        #expect(TerminalText.columns("❤\u{FE0F}") == 2)  // VS16 makes it an emoji
        #expect(TerminalText.columns("🇵🇹") == 2)  // a flag: two regional indicators, one cluster
        // A ZWJ family: one emoji on some terminals, three on others (tmux 3.3, xterm): the larger count.
        #expect(TerminalText.columns("👨\u{200D}👩\u{200D}👧") == 6)
        #expect(TerminalText.columns("\u{1B}") == 4)  // a stray control counts as its escape
    }

    /// The table agrees with glibc's `wcwidth` under `C.UTF-8` (the same Unicode 14 data) for every assigned,
    /// printable scalar but the few where glibc itself is odd (listed).
    @Test func tableAgreesWithGlibcWcwidth() throws {
        // Glibc's Swift module does not declare wcwidth (it needs _XOPEN_SOURCE): look it up.
        typealias WcwidthFunction = @convention(c) (wchar_t) -> Int32
        let symbol = try #require(dlsym(nil, "wcwidth"), "glibc's wcwidth")
        let wcwidth = unsafeBitCast(symbol, to: WcwidthFunction.self)
        let locale = try #require(newlocale(LC_CTYPE_MASK, "C.UTF-8", nil), "the C.UTF-8 locale")
        let previous = uselocale(locale)
        defer {
            uselocale(previous)
            freelocale(locale)
        }
        var disagreements: [UInt32] = []
        var checked = 0
        for value in UInt32(0x20)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value), !TerminalText.needsEscape(scalar),
                scalar.properties.generalCategory != .unassigned, scalar.properties.generalCategory != .privateUse
            else { continue }
            let theirs = Int(wcwidth(wchar_t(value)))
            guard theirs >= 0 else { continue }  // glibc knows nothing of scalars newer than Unicode 14
            checked += 1
            if theirs != TerminalText.columns(of: scalar) { disagreements.append(value) }
        }
        #expect(checked > 140_000)
        // U+3248–U+324F (circled numbers on black squares): East Asian Ambiguous in Unicode 14, 2 in glibc.
        #expect(disagreements.filter { !(0x3248...0x324F).contains($0) }.count <= 80, "\(disagreements.map { String($0, radix: 16) })")
    }

    @Test func truncationNeverSplitsAClusterNorLeavesHalfAWideCharacter() {
        #expect(WatchScreen.truncate("東京タワー.jpg", 6) == "東京…")  // 4 + 1: a third wide one would not fit
        #expect(TerminalText.columns(WatchScreen.truncate("東京タワー.jpg", 6)) <= 6)
        #expect(WatchScreen.truncate("👨\u{200D}👩\u{200D}👧x", 4) == "…")
        #expect(WatchScreen.truncate("e\u{301}e\u{301}e\u{301}", 2) == "e\u{301}…")
        for width in 1...20 {
            for name in ["東京タワーの夜景.jpg", "🇵🇹🇵🇹🇵🇹🇵🇹.jpg", "cafe\u{301}-e\u{301}te\u{301}.jpg", "a\u{1B}[2J.jpg"] {
                let cut = WatchScreen.truncate(name, width)
                #expect(TerminalText.columns(cut) <= width, "\(name) at \(width): \(cut)")
                #expect(!cut.unicodeScalars.contains { TerminalText.needsEscape($0) })
            }
        }
    }

    static func job(_ id: String, state: String = "running", files: [String], error: JSONValue = .null) -> JSONValue {
        [
            "id": .string(id), "kind": "upload", "state": .string(state), "attempt": 1, "max_attempts": 5,
            "params": ["files": .array(files.map { .string($0) })], "cancellation": .null, "error": error,
            "created_at": .string(Timestamp.iso8601(unixSeconds: t0)),
            "updated_at": .string(Timestamp.iso8601(unixSeconds: t0 + 3)),
            "progress": ["completed": 50, "total": 100, "unit": "bytes", "current": .string(files[0].split(separator: "/").last.map(String.init) ?? "")],
        ]
    }

    /// No line of the screen is wider than the terminal, at any width, whatever the names; none holds a control
    /// character.
    @Test func everyLineFitsAtEveryWidth() {
        let names = [
            "/p/東京タワーの夜景と富士山の朝焼け.jpg", "/p/👨\u{200D}👩\u{200D}👧🇵🇹🎉 family trip.mov",
            "/p/cafe\u{301}\u{301}-zero\u{200B}width\u{200D}.jpg", "/p/\u{1B}]0;pwned\u{07}\u{1B}[2J\nupload running -> failed",
        ]
        var screen = WatchScreen(expand: true)
        for (index, name) in names.enumerated() {
            var job = Self.job("job-\(index)", files: [name, "/p/二つ目.jpg"])
            if case .object(var members) = job, case .object(var progress) = members["progress"] {
                progress["items"] = [
                    ["label": .string(String(name.split(separator: "/").last!)), "completed": 50, "total": 60],
                    ["label": "二つ目.jpg", "completed": 0, "total": 40],
                ]
                members["progress"] = .object(progress)
                job = .object(members)
            }
            screen.apply(job: job, now: Self.t0)
        }
        screen.apply(
            job: Self.job("done-1", state: "failed", files: ["/p/写真\u{1B}[31m.jpg"],
                error: ["code": "source_missing", "message": "source /p/写真\u{1B}[31m.jpg does not exist\nfake line"]),
            now: Self.t0)
        screen.apply(job: Self.job("done-2", state: "succeeded", files: ["/p/日本語のファイル名.jpg"]), now: Self.t0)
        for width in 20...200 {
            let lines = screen.render(width: width, height: 40, now: Self.t0 + 5).map(WatchScreen.text)
            for line in lines {
                #expect(TerminalText.columns(line) <= width, "width \(width): \(line)")
                #expect(!line.unicodeScalars.contains { TerminalText.needsEscape($0) }, "width \(width): \(line)")
            }
        }
        let wide = screen.render(width: 200, height: 40, now: Self.t0 + 5).map(WatchScreen.text)
        // Labels are cut at 24 columns (30 in a sub-row); the escapes show.
        #expect(wide.contains { $0.contains("\\x1b]0;pwned\\x07\\x1b[2J") })
        #expect(wide.contains { $0.contains("does not exist\\nfake line") })
    }

    /// A path that is not UTF-8 (`{"base64", "text"}` in params) is labelled by its text form.
    @Test func labelOfANameThatIsNotUTF8() {
        let params: JSONValue = ["files": [["base64": "L3AvY2Fm6S5qcGc=", "text": "/p/caf\\xe9.jpg"]]]
        #expect(WatchScreen.label(kind: "upload", params: params) == "caf\\xe9.jpg")
    }

    /// An upload of library photos has no files in its params: it is labelled by its selection.
    @Test func labelOfAPhotoUpload() {
        #expect(WatchScreen.label(kind: "upload", params: ["photos": ["tags": ["trip:Lisbon", "pick"]]]) == "photos trip:Lisbon + pick")
        #expect(WatchScreen.label(kind: "upload", params: ["photos": ["ids": ["a", "b", "c"]]]) == "3 photos")
        #expect(WatchScreen.label(kind: "upload", params: ["photos": ["ids_file": "/photos/picks.txt"]]) == "photos in picks.txt")
    }

    /// At 20 columns the state word stays whole (docs/explanation/watch.md, "Narrow terminals": "the percent and the state stay").
    @Test func stateWordStaysAtTwentyColumns() {
        var screen = WatchScreen()
        screen.apply(job: Self.job("narrow", files: ["/p/a-long-file-name.jpg"]), now: Self.t0)
        for width in 15...30 {
            let row = WatchScreen.text(screen.render(width: width, height: 10, now: Self.t0 + 1)[0])
            #expect(row.hasSuffix("running"), "width \(width): '\(row)'")
            #expect(row.contains("50.0%"), "width \(width): '\(row)'")
        }
    }
}
