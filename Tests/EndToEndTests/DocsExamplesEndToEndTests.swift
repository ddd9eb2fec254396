import Foundation
import Testing

/// The shell examples of the how-to pages, run as written. A fenced block whose info string is `sh {run}` in a page of
/// `docs/how-to/` is run with `bash -e -o pipefail`; the blocks of one page run in order, against one throwaway
/// daemon (with the `sleep` test kind), in one scratch folder that is also `HOME`. The folder holds
/// `IMG_0001.jpg`…`IMG_0003.jpg`, and `~/Pictures/Lisbon` holds three photos with EXIF (a date in 2024, a camera,
/// GPS in Lisbon), so the pages can upload files to folders and tag photos. `PATH` starts with the directory of the
/// binaries under test.
@Suite(.serialized)
struct DocsExamplesEndToEndTests {
    /// One runnable example: where it is and what it runs.
    struct Example: CustomStringConvertible {
        var page: String
        /// The line of its opening fence, from 1.
        var line: Int
        var script: String
        var description: String { "\(page):\(line)" }
    }

    /// The repository's root, from this file's path.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The how-to pages, by path relative to the root, sorted.
    static let pages: [String] = {
        let folder = root.appendingPathComponent("docs/how-to")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasSuffix(".md") }.sorted().map { "docs/how-to/" + $0 }
    }()

    /// The info string that marks a block to run.
    static let marker = "sh {run}"

    /// The runnable examples of `markdown`, in order. A fence is a line starting with three backticks; a block marked
    /// `{run}` with another language, or left open, is an error (it would silently not run).
    static func examples(in markdown: String, page: String) throws -> [Example] {
        var examples: [Example] = []
        var open: (line: Int, runs: Bool, body: [String])?
        for (index, line) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let text = String(line)
            guard text.hasPrefix("```") else {
                open?.body.append(text)
                continue
            }
            if let block = open {
                if block.runs { examples.append(Example(page: page, line: block.line, script: block.body.joined(separator: "\n"))) }
                open = nil
                continue
            }
            let info = text.dropFirst(3).trimmingCharacters(in: .whitespaces)
            if info.contains("{run}") && info != marker {
                throw HarnessError("\(page):\(index + 1): a runnable block must be marked exactly ```\(marker), not ```\(info)")
            }
            open = (index + 1, info == marker, [])
        }
        if let open { throw HarnessError("\(page):\(open.line): the block is never closed") }
        return examples
    }

    /// The pages that have runnable examples (a page that does not parse is reported by the test below).
    static let pagesWithExamples: [String] = pages.filter { page in
        let text = (try? String(contentsOf: root.appendingPathComponent(page), encoding: .utf8)) ?? ""
        return !((try? examples(in: text, page: page)) ?? []).isEmpty
    }

    @Test func theHowTosHaveRunnableExamplesAndEveryMarkIsWellFormed() throws {
        var count = 0
        for page in Self.pages {
            let text = try String(contentsOf: Self.root.appendingPathComponent(page), encoding: .utf8)
            count += try Self.examples(in: text, page: page).count
        }
        // The pages this test was written with: batches, retention, tag-photos, troubleshooting. Removing the marks
        // would make the docs untested; this catches it.
        #expect(Self.pagesWithExamples.count >= 4, "pages with runnable examples: \(Self.pagesWithExamples)")
        #expect(count >= 15, "runnable examples found: \(count)")
        // The parser itself: a mark on another language, and an open block, are refused.
        #expect(throws: HarnessError.self) { try Self.examples(in: "```bash {run}\nls\n```\n", page: "x.md") }
        #expect(throws: HarnessError.self) { try Self.examples(in: "```sh {run}\nls\n", page: "x.md") }
        #expect(try Self.examples(in: "```sh\nls\n```\n```sh {run}\necho a\necho b\n```\n", page: "x.md").map(\.script) == ["echo a\necho b"])
    }

    @Test(arguments: pagesWithExamples)
    func theExamplesOfAPageRunAsWritten(page: String) throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent(page), encoding: .utf8)
        let examples = try Self.examples(in: text, page: page)
        let daemon = try DaemonHarness()
        let scratch = TemporaryDirectory("docs")
        try Self.writeFixtures(into: scratch.path)
        var environment = daemon.environment
        environment["HOME"] = scratch.path
        let binaries = URL(fileURLWithPath: Binary.path).deletingLastPathComponent().path
        environment["PATH"] = binaries + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        for example in examples {
            let result = try Self.bash(example.script, in: scratch.path, environment: environment)
            #expect(
                result.status == 0,
                "\(example) exited \(result.status)\n--- script\n\(example.script)\n--- stdout\n\(result.stdout)\n--- stderr\n\(result.stderr)")
            if result.status != 0 { break }
        }
    }

    /// Three small files to upload, and three photos with EXIF in `~/Pictures/Lisbon`.
    static func writeFixtures(into home: String) throws {
        for n in 1...3 {
            PhotoTestSupport.write(Array(repeating: UInt8(n), count: 64 * 1024 + n), home + "/IMG_000\(n).jpg")
        }
        try FileManager.default.createDirectory(atPath: home + "/Pictures/Lisbon", withIntermediateDirectories: true)
        for n in 1...3 {
            let exif = Fixtures.EXIF(
                make: "Canon", model: "Canon EOS 40D", dateTimeOriginal: "2024:05:0\(n) 18:22:10",
                gps: (38.7139, "N", 9.1394, "W"))
            let jpeg = Fixtures.withEXIF(try Fixtures.scene(96, 64, seed: n).jpegData(), exif)
            PhotoTestSupport.write(jpeg, home + "/Pictures/Lisbon/IMG_100\(n).jpg")
        }
    }

    /// Runs `script` with `bash -e -o pipefail` in `directory`. Its stderr goes to a file of its own, so neither pipe
    /// can fill up while the other is read.
    static func bash(_ script: String, in directory: String, environment: [String: String]) throws -> CommandResult {
        let logs = TemporaryDirectory("docs-stderr")
        let errPath = logs.file("stderr")
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-e", "-o", "pipefail", "-c", script]
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return CommandResult(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }
}
