import Foundation
import Testing
import TrailbookProtocol

@testable import TrailbookClient

/// The reference made from the code (issue 36): the committed docs/reference files are what the code generates,
/// and the man page renders.
struct ReferenceFilesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Each committed file and what the code makes of it now.
    static let generated: [(file: String, text: String)] = [
        ("docs/reference/cli.md", CommandReference.markdown(ReferenceCommands.documented)),
        ("docs/reference/errors.md", ErrorReference.markdown()),
        ("docs/reference/trailbook-jobs.1", ManPage.roff(ReferenceCommands.documented)),
    ]

    @Test(arguments: generated.map(\.file))
    func committedReferenceIsWhatTheCodeGenerates(file: String) throws {
        let expected = try #require(Self.generated.first { $0.file == file }?.text)
        let committed = try? String(contentsOf: Self.root.appendingPathComponent(file), encoding: .utf8)
        #expect(
            committed == expected,
            "\(file) differs from what the code generates; run scripts/generate-reference.sh and commit the result")
    }

    @Test func theReferenceHasEveryCommandAndOption() {
        let markdown = CommandReference.markdown(ReferenceCommands.documented)
        for spec in Commands.all where !spec.path.isEmpty && !spec.isInternal {
            #expect(markdown.contains("## trailbook-jobs \(spec.displayName)\n"), "\(spec.displayName)")
            for option in spec.options {
                #expect(markdown.contains("`--\(option.name)"), "\(spec.displayName) --\(option.name)")
            }
        }
        // The daemon's PostgreSQL options and the photo library's commands are in it.
        for text in ["`--store URL`", "`--queues NAME,…`", "## trailbook-jobs photos import", "## trailbook-jobs completions"] {
            #expect(markdown.contains(text), "\(text)")
        }
        #expect(!markdown.contains("## trailbook-jobs worker"), "the internal worker command is left out")
    }

    /// `help --man` renders with `man -l` and groff finds nothing to warn about.
    @Test func theManPageRenders() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tbj-man-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let page = directory.appendingPathComponent("trailbook-jobs.1")
        try ManPage.roff(ReferenceCommands.documented).write(to: page, atomically: true, encoding: .utf8)

        let warnings = try Self.run("/usr/bin/groff", ["-man", "-Tutf8", "-ww", "-z", page.path])
        #expect(warnings.status == 0 && warnings.stderr.isEmpty, "groff: \(warnings.stderr)")
        let rendered = try Self.run("/usr/bin/man", ["-l", page.path], environment: ["MANWIDTH": "100", "MANPAGER": "cat", "PAGER": "cat"])
        #expect(rendered.status == 0, "man -l: \(rendered.stderr)")
        for text in ["NAME", "COMMANDS", "EXIT STATUS", "submit upload", "--store URL", "--header"] {
            #expect(rendered.stdout.contains(text), "\(text) in:\n\(rendered.stdout.prefix(2000))")
        }
    }

    /// Runs `executable` and returns its status and output.
    static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws
        -> (status: Int32, stdout: String, stderr: String)
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }
}
