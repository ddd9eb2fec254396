import Foundation
import Testing
import TrailbookEngine

/// `help --markdown`, `help --errors` and `help --man` of both binaries print the committed reference files byte
/// for byte (scripts/generate-reference.sh writes them from the thin client), and the man page renders with `man -l`.
@Suite struct ReferenceCommandEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static var fullBinary: String { ThinClientEndToEndTests.fullBinary }

    @Test(arguments: [("--markdown", "cli.md"), ("--errors", "errors.md"), ("--man", "trailbook-jobs.1")])
    func helpPrintsTheCommittedReference(option: String, file: String) throws {
        let committed = try String(contentsOf: Self.root.appendingPathComponent("docs/reference/" + file), encoding: .utf8)
        for binary in [Binary.path, Self.fullBinary] {
            let printed = try DaemonHarness.run(binary, ["help", option])
            #expect(printed.status == 0 && printed.stderr.isEmpty, "\(binary) help \(option): \(printed.stderr)")
            #expect(printed.stdout == committed, "\(binary) help \(option) differs from docs/reference/\(file); run scripts/generate-reference.sh")
        }
    }

    @Test func theManPageOfHelpManRendersWithManL() throws {
        let directory = TemporaryDirectory()
        let page = directory.file("trailbook-jobs.1")
        try DaemonHarness.run(Binary.path, ["help", "--man"]).stdout.write(toFile: page, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["MANWIDTH"] = "100"
        environment["MANPAGER"] = "cat"
        let rendered = try DaemonHarness.run("/usr/bin/man", ["-l", page], environment: environment)
        #expect(rendered.status == 0 && rendered.stderr.isEmpty, "man -l: \(rendered.stderr)")
        #expect(rendered.stdout.contains("TRAILBOOK-JOBS(1)") && rendered.stdout.contains("EXIT STATUS"))
        #expect(rendered.stdout.contains("trailbook-jobs photos import DIR [options]"), "\(rendered.stdout.prefix(3000))")
    }

    /// The job kinds `--kind` completes and the table's `duplicate_<kind>` codes are those the daemon runs (its
    /// `unknown_kind` reply lists them; `sleep` is the tests' own).
    @Test func theCommandLinesJobKindsAreTheDaemons() throws {
        let daemon = try DaemonHarness()
        let reply = try daemon.request(["op": "submit", "kind": "no-such-kind", "params": [:]])
        let message = try #require(reply["error"]?["message"]?.stringValue)
        let known = try #require(message.split(separator: ":").last).split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0 != "sleep" }
        let completed = try DaemonHarness.run(Binary.path, ["completions", "bash"]).stdout
        let line = try #require(completed.split(separator: "\n").first { $0.contains("'list|--kind'") })
        #expect(Set(known) == Set(line.split(separator: "'")[3].split(separator: " ").dropFirst().map(String.init)), "\(known) vs \(line)")
        for kind in known { #expect(ErrorCodes.entry(for: "duplicate_\(kind)") != nil, "duplicate_\(kind)") }
    }

    @Test func helpShowsACommandsHelpAndRefusesWhatItCannotDo() throws {
        let show = try DaemonHarness.run(Binary.path, ["help", "show"])
        #expect(show.status == 0 && show.stdout.hasPrefix("Usage: trailbook-jobs show ID [options]"))
        let group = try DaemonHarness.run(Binary.path, ["help", "photos"])
        #expect(group.stdout.contains("photos import") && group.stdout.contains("photos list"))
        #expect(try DaemonHarness.run(Binary.path, ["help", "--man", "--markdown"]).status == 2)
        let shell = try DaemonHarness.run(Binary.path, ["completions", "tcsh"])
        #expect(shell.status == 2 && shell.stderr.contains("bash, zsh and fish"))
    }
}
