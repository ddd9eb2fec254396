import Testing
import TrailbookProtocol

@testable import TrailbookClient

/// Issue 36's small fixes: plain `show`, `list` and `watch` of a job paused, failed or waiting by its own error
/// print the error's message (what to do), not only its state; and `--help` says what the commands do.
struct PlainErrorTextTests {
    static let unauthorized: JSONValue = [
        "code": "unauthorized",
        "message": "big.mov: 401 — the server refused the credentials; the job is paused with its upload kept: give new ones with `resume ID --header \"Authorization: Bearer …\"` and it continues from the server's offset",
    ]
    static let unavailable: JSONValue = ["code": "s3_unavailable", "message": "s3://b/k: 503 Slow Down; retrying"]

    static func job(_ state: String, error: JSONValue, cancellation: JSONValue = .null) -> JSONValue {
        [
            "id": "9b2f0000-0000-4000-8000-000000000000", "kind": "upload", "state": .string(state), "priority": 0,
            "attempt": 1, "max_attempts": 5, "error": error, "cancellation": cancellation, "params": [:],
        ]
    }

    @Test func showAndListOfAPausedJobSayWhatToDo() {
        let paused = Self.job("paused", error: Self.unauthorized)
        #expect(JobText.details(paused).contains("state:     paused (big.mov: 401"))
        #expect(JobText.details(paused).contains("resume ID --header") && JobText.details(paused).contains("[unauthorized]"))
        #expect(JobText.tableRow(paused).contains("resume ID --header"))
        #expect(JobText.summary(paused).contains("[unauthorized]"))
    }

    @Test func aWaitingJobSaysWhyAndWhenItTriesAgain() {
        let waiting = Self.job("needs_retry", error: Self.unavailable)
        #expect(JobText.tableRow(waiting).contains("503 Slow Down; retrying [s3_unavailable] — will retry"))
        #expect(JobText.reason(waiting, retryInSeconds: 29.2) == "s3://b/k: 503 Slow Down; retrying [s3_unavailable] — will retry in 30 s")
    }

    @Test func aFailedJobShowsItsErrorAndAStopKeepsItsWords() {
        #expect(JobText.details(Self.job("failed", error: Self.unavailable)).contains("[s3_unavailable]"))
        // A paused job the user paused has no error: the stop's words, as before.
        let byYou = Self.job("paused", error: .null, cancellation: ["reason": "resource_reclaim", "detail": "paused by user"])
        #expect(JobText.reason(byYou) == "paused by you — resume to continue")
        // A timeout's retry is told by the stop, not the `timeout` error.
        let timedOut = Self.job(
            "needs_retry", error: ["code": "timeout", "message": "attempt timed out"],
            cancellation: ["reason": "timeout", "detail": "no progress for 60s"])
        #expect(JobText.reason(timedOut) == "timed out (no progress for 60s) — will retry")
    }

    /// Plain `watch` prints a state event through `JobText.reason` with the event's `to`, `error`, `cancellation`.
    @Test func plainWatchOfAStateEventHasTheMessage() {
        let event: JSONValue = ["state": "paused", "error": Self.unauthorized, "cancellation": .null]
        #expect(JobText.reason(event)?.contains("resume ID --header") == true)
        var row = WatchScreen.Row(id: "9b2f", kind: "upload", label: "big.mov", state: .paused)
        row.error = Self.unauthorized
        #expect(WatchScreen.reason(row, now: 0)?.contains("resume ID --header") == true)
    }

    @Test func submitUploadHelpQuotesTheTokenSoTheShellExpandsIt() {
        let help = Commands.all.first { $0.path == ["submit", "upload"] }!.helpText
        #expect(help.contains("--header \"Authorization: Bearer $TOKEN\""))
        #expect(!help.contains("'Authorization: Bearer $TOKEN'"))
        let resume = Commands.all.first { $0.path == ["resume"] }!.helpText
        #expect(!resume.contains("'Authorization: Bearer $"))
    }

    @Test func photosImportHelpNamesEveryFormatItReads() {
        let help = Commands.all.first { $0.path == ["photos", "import"] }!.helpText
        #expect(help.contains("JPEG, HEIF/HEIC, AVIF"))
        #expect(!help.contains("the JPEGs"))
    }
}
