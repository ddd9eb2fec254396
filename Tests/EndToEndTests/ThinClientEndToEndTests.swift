import Foundation
import TestSupport
import Testing
import TrailbookEngine

/// The two binaries: `trailbook-jobs` runs the client commands itself and links none of the daemon's C libraries;
/// it hands the other commands (`daemon`, the photo library's reads) to the `trailbook-jobsd` beside it with `exec`.
@Suite struct ThinClientEndToEndTests {
    /// `trailbook-jobsd`, beside the binary the tests run.
    static var fullBinary: String { URL(fileURLWithPath: Binary.path).deletingLastPathComponent().appendingPathComponent("trailbook-jobsd").path }

    /// The shared libraries `binary` loads, by file name, as the dynamic loader resolves them (`ldd`).
    static func libraries(of binary: String) throws -> [String] {
        let result = try DaemonHarness.run("/usr/bin/ldd", [binary])
        try #require(result.status == 0, "ldd \(binary): \(result.stderr)")
        return result.stdout.split(separator: "\n").compactMap { line in
            line.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.map { String($0.split(separator: "/").last ?? $0) }
        }
    }

    /// The libraries the daemon needs and the command line must not pay for at every start.
    static let daemonLibraries = [
        "libuv", "libsqlite3", "libcurl", "libheif", "libpq", "libexif", "libjpeg", "libexempi", "libcrypto",
        "libFoundation.so", "libFoundationInternationalization", "lib_FoundationICU",
    ]

    @Test func theClientLinksNoneOfTheDaemonsLibrariesAndTheFullBinaryHasThem() throws {
        let thin = try Self.libraries(of: Binary.path)
        #expect(thin.contains { $0.hasPrefix("libFoundationEssentials") }, "\(thin)")
        for library in Self.daemonLibraries {
            #expect(!thin.contains { $0.hasPrefix(library) }, "trailbook-jobs loads \(library): \(thin)")
        }
        let full = try Self.libraries(of: Self.fullBinary)
        for library in ["libuv", "libsqlite3", "libcurl", "libheif", "libpq"] {
            #expect(full.contains { $0.hasPrefix(library) }, "trailbook-jobsd lacks \(library): \(full)")
        }
    }

    /// `trailbook-jobs daemon` becomes `trailbook-jobsd` in the same process: the pid the test started is the
    /// daemon's (so `kill`, systemd and socket activation's `LISTEN_PID` reach it).
    @Test func theDaemonCommandBecomesTheFullBinaryInTheSameProcess() throws {
        let daemon = try DaemonHarness()
        defer { _ = try? daemon.stop() }
        let ping = try daemon.request(["op": "ping"])
        #expect(ping["pid"]?.intValue == Int64(daemon.pid))
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(daemon.pid)/exe")
        #expect(exe.hasSuffix("/trailbook-jobsd"), "\(exe)")
        // A client command of the thin binary and a handed-off one both work against it.
        #expect(try daemon.cli(["list"]).status == 0)
        let photos = try daemon.cli(["photos", "list"])
        #expect(photos.status == 0 && photos.stdout.contains("no photos"), "\(photos)")
        let stopped = try daemon.stop()
        #expect(stopped.status == 0)
    }

    /// Without `trailbook-jobsd` beside it, the client commands still run, and a command that needs it says what
    /// is missing and where it was looked for, instead of crashing or doing something else.
    @Test func withoutTheFullBinaryACommandThatNeedsItSaysWhatIsMissing() throws {
        let alone = TemporaryDirectory("tbj-alone")
        let copy = alone.file("trailbook-jobs")
        try FileManager.default.copyItem(atPath: Binary.path, toPath: copy)
        let environment = ["TRAILBOOK_JOBS_HOME": alone.file("state"), "PATH": "/usr/bin:/bin"]
        let daemon = try DaemonHarness.run(copy, ["daemon"], environment: environment)
        #expect(daemon.status == 1, "\(daemon)")
        #expect(daemon.stderr.contains("trailbook-jobsd"), "\(daemon.stderr)")
        #expect(daemon.stderr.contains(alone.file("trailbook-jobsd")), "\(daemon.stderr)")
        #expect(daemon.stderr.contains("install both binaries"), "\(daemon.stderr)")
        #expect(!FileManager.default.fileExists(atPath: alone.file("state/daemon.sock")))
        // Client commands: no daemon there, so exit 3 with the usual advice; help needs nothing at all.
        #expect(try DaemonHarness.run(copy, ["list"], environment: environment).status == 3)
        let help = try DaemonHarness.run(copy, ["daemon", "--help"], environment: environment)
        #expect(help.status == 0 && help.stdout.contains("--concurrency"), "\(help)")
        let usage = try DaemonHarness.run(copy, ["daemon", "--concurrency", "0"], environment: environment)
        #expect(usage.status == 1 && usage.stderr.contains("trailbook-jobsd"), "options are checked by the binary that runs the command: \(usage)")
    }

    /// Output that cannot be written (a full disk here) makes the command fail and say so, in either binary,
    /// instead of exiting 0 with the output lost.
    @Test func outputThatCannotBeWrittenFailsTheCommand() throws {
        for binary in [Binary.path, Self.fullBinary] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["--help"]
            process.standardOutput = try #require(FileHandle(forWritingAtPath: "/dev/full"))
            let errors = Pipe()
            process.standardError = errors
            try process.run()
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 1, "\(binary): \(text)")
            #expect(text.contains("cannot write to standard output: No space left on device"), "\(binary): \(text)")
        }
    }

    /// A `trailbook-jobsd` beside it that is in fact the thin client (a copy under the wrong name) gets the command
    /// back: it says so and exits 1 at once, instead of handing the command to itself forever.
    @Test func aThinClientInstalledAsTheFullBinaryIsReportedNotLoopedThrough() throws {
        let wrong = TemporaryDirectory("tbj-wrong")
        for name in ["trailbook-jobs", "trailbook-jobsd"] {
            try FileManager.default.copyItem(atPath: Binary.path, toPath: wrong.file(name))
        }
        let environment = ["TRAILBOOK_JOBS_HOME": wrong.file("state"), "PATH": "/usr/bin:/bin"]
        let result = try DaemonHarness.run(wrong.file("trailbook-jobs"), ["photos", "list"], environment: environment)
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("'photos list' was handed to \(wrong.file("trailbook-jobsd")), which is not the full binary"), "\(result.stderr)")
    }

    /// A handed-off command gets the arguments' bytes as the process received them: `submit autotag --places`
    /// with a Latin-1 file name sends that name's exact bytes, as the thin client's own commands do.
    @Test func aHandedOffCommandKeepsTheArgumentsBytes() throws {
        let daemon = try DaemonHarness()
        defer { _ = try? daemon.stop() }
        let name = BytePath(bytes: Array("pl".utf8) + [0xE9] + Array("ces.csv".utf8))
        try daemon.home.create(name, contents: Array("name,lat,lon\nHome,52.0,4.3\n".utf8))
        let places = BytePath.join(BytePath(daemon.home.path), name)
        let output = daemon.home.file("autotag.out")
        let pid = try ChildProcess.spawn(
            Binary.path, rawArguments: [Array("submit".utf8), Array("autotag".utf8), Array("--all".utf8), Array("--places".utf8), places.bytes],
            environment: daemon.environment, output: output)
        #expect(ChildProcess.exitStatus(of: pid) == 0, "\(String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self))")
        let id = String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let job = try daemon.show(id)
        #expect(job["params"]?["places"] == places.json, "\(job)")
        #expect(job["params"]?["places"]?["base64"] != nil, "a name that is not UTF-8 travels as base64: \(job)")
    }
    /// A text option (a tag, a queue, the destination) that is not valid UTF-8 is refused with exit 2 and nothing
    /// reaches the daemon: Swift's arguments hold it repaired to U+FFFD, which would name another tag or directory.
    @Test func aTextOptionThatIsNotUTF8IsRefusedAndNothingIsSubmitted() throws {
        let daemon = try DaemonHarness()
        defer { _ = try? daemon.stop() }
        let source = daemon.home.file("photo.bin")
        FileManager.default.createFile(atPath: source, contents: Data(repeating: 7, count: 1024))
        let latin1 = Array("caf".utf8) + [0xE9]
        let cases: [(arguments: [[UInt8]], shown: String)] = [
            // A URL is text (a directory's path is bytes: see below).
            ([Array("submit".utf8), Array("upload".utf8), Array(source.utf8), Array("--to".utf8), Array("http://127.0.0.1:9/".utf8) + latin1],
             "option --to: 'http://127.0.0.1:9/caf\\xe9' is not valid UTF-8 text; in a URL, percent-encode such bytes"),
            ([Array("submit".utf8), Array("upload".utf8), Array(source.utf8), Array("--to=/tmp".utf8), Array("--queue".utf8), latin1],
             "option --queue: 'caf\\xe9' is not valid UTF-8 text"),
            ([Array("photos".utf8), Array("list".utf8), Array("--tag".utf8), latin1], "option --tag: 'caf\\xe9' is not valid UTF-8 text"),
            ([Array("submit".utf8), Array("tag".utf8), Array("--all".utf8), Array("--tag=".utf8) + latin1],
             "option --tag: 'caf\\xe9' is not valid UTF-8 text"),
            // A header may hold a token: refused without being shown.
            ([Array("submit".utf8), Array("upload".utf8), Array(source.utf8), Array("--to=http://127.0.0.1:9/files/".utf8),
              Array("--header".utf8), Array("Authorization: Bearer s3cret-".utf8) + latin1],
             "option --header: its value (not shown: it may hold a secret) is not valid UTF-8 text"),
        ]
        for (index, test) in cases.enumerated() {
            let output = daemon.home.file("refused-\(index).out")
            let pid = try ChildProcess.spawn(Binary.path, rawArguments: test.arguments, environment: daemon.environment, output: output)
            let status = ChildProcess.exitStatus(of: pid)
            let printed = String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self)
            #expect(status == 2, "\(printed)")
            #expect(printed.contains(test.shown), "\(printed)")
            #expect(!printed.contains("s3cret"), "\(printed)")
        }
        #expect(try daemon.request(["op": "list"])["jobs"]?.arrayValue?.isEmpty == true)
    }

    /// `--to DIR` is that directory, byte for byte: the CLI percent-encodes what a `file://` URL would read as
    /// something else. It used to send the path as it was: `--to a%20b` uploaded into `a b`, `--to 'q?x'` was
    /// refused as a URL with a query, and a Latin-1 name was refused as text that is not UTF-8.
    @Test func anUploadGoesIntoTheDirectoryNamedWhateverItsBytes() throws {
        let daemon = try DaemonHarness()
        defer { _ = try? daemon.stop() }
        let source = daemon.home.file("photo.bin")
        FileManager.default.createFile(atPath: source, contents: Data(repeating: 7, count: 4096))
        let names: [[UInt8]] = [Array("a%20b".utf8), Array("q?x#y".utf8), Array("caf".utf8) + [0xE9], Array("50% off".utf8)]
        for name in names {
            // Decoys: what the old reading of each name would have named.
            try? FileManager.default.createDirectory(atPath: daemon.home.file("a b"), withIntermediateDirectories: true)
            let directory = BytePath.join(BytePath(daemon.home.path), BytePath(bytes: name))
            try #require(directory.withCString { mkdir($0, 0o700) } == 0)
            let output = daemon.home.file("to-\(names.firstIndex(of: name)!).out")
            let pid = try ChildProcess.spawn(
                Binary.path, rawArguments: [Array("submit".utf8), Array("upload".utf8), Array(source.utf8), Array("--to".utf8), directory.bytes, Array("--wait".utf8)],
                environment: daemon.environment, output: output)
            let status = ChildProcess.exitStatus(of: pid, within: 30)
            let printed = String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self)
            #expect(status == 0, "\(BytePath(bytes: name)): \(printed)")
            var info = stat()
            let landed = BytePath.join(directory, "photo.bin").withCString { stat($0, &info) } == 0
            #expect(landed && info.st_size == 4096, "\(BytePath(bytes: name)): not in its directory")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.home.file("a b")).isEmpty)
        let jobs = try daemon.request(["op": "list"])["jobs"]?.arrayValue ?? []
        #expect(jobs.compactMap { $0["params"]?["to"]?.stringValue?.split(separator: "/").last.map(String.init) } == ["a%2520b", "q%3Fx%23y", "caf%E9", "50%25%20off"])
    }

    /// An empty argument where a path goes is refused (exit 2) and nothing is submitted: made absolute it was the
    /// working directory, so `photos import ""` imported it whole and `submit upload ""` named it as the source. A
    /// `--since` above 2^53 is refused by the CLI: JSON would carry it rounded, as another seq.
    @Test func anEmptyPathIsRefusedNotReadAsTheWorkingDirectory() throws {
        let daemon = try DaemonHarness()
        defer { _ = try? daemon.stop() }
        let cases: [(arguments: [String], shown: String)] = [
            (["photos", "import", ""], "an empty argument is not a path"),
            (["submit", "upload", "", "--to", daemon.home.path], "an empty argument is not a path"),
            (["submit", "autotag", "--all", "--places", ""], "option --places is empty; give it a path"),
            (["submit", "tag", "--tag", "t", "--ids-file="], "option --ids-file is empty; give it a path"),
            (["submit", "--from", ""], "option --from is empty; give it a path"),
            (["submit", "upload", "a", "--to", ""], "option --to needs a destination"),
            (["watch", "--since", "9223372036854775807"], "option --since must be between 0 and 9007199254740992"),
        ]
        for test in cases {
            let result = try daemon.cli(test.arguments)
            #expect(result.status == 2, "\(test.arguments): \(result.stdout) \(result.stderr)")
            #expect(result.stderr.contains(test.shown), "\(test.arguments): \(result.stderr)")
        }
        #expect(try daemon.request(["op": "list"])["jobs"]?.arrayValue?.isEmpty == true)
    }

    /// A state directory made from a variable that is not valid UTF-8 is refused (exit 2) by the daemon and the
    /// client alike: the environment holds it repaired to U+FFFD, and the daemon would create and use that other
    /// directory while the one the user named stays empty. A command given `--socket` does not need it.
    @Test func aStateDirectoryNamedInBytesThatAreNotUTF8IsRefusedAndNothingIsCreated() throws {
        let daemon = try DaemonHarness()
        defer { _ = try? daemon.stop() }
        let parent = daemon.home.file("homes")
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        let latin1 = Array("\(parent)/caf".utf8) + [0xE9]
        try #require(mkdir(latin1.map { CChar(bitPattern: $0) } + [0], 0o700) == 0)
        var base = daemon.environment.mapValues { Array($0.utf8) }
        base["TRAILBOOK_JOBS_HOME"] = nil
        base["XDG_STATE_HOME"] = nil
        let fromHome = base.merging(["HOME": latin1]) { $1 }
        let cases: [(arguments: [String], environment: [String: [UInt8]], status: Int32, shown: String)] = [
            (["daemon"], base.merging(["TRAILBOOK_JOBS_HOME": latin1]) { $1 }, 2,
             "TRAILBOOK_JOBS_HOME is '\(parent)/caf\\xe9', which is not valid UTF-8"),
            (["list"], base.merging(["TRAILBOOK_JOBS_HOME": latin1]) { $1 }, 2, "a symbolic link with a UTF-8 name"),
            (["list"], base.merging(["XDG_STATE_HOME": latin1]) { $1 }, 2, "XDG_STATE_HOME is '\(parent)/caf\\xe9'"),
            (["photos", "list"], fromHome, 2, "HOME is '\(parent)/caf\\xe9', which is not valid UTF-8"),
            (["daemon"], fromHome, 2, "set TRAILBOOK_JOBS_HOME to a UTF-8 path"),
            // The running daemon's socket, given: the state directory is not needed.
            (["list", "--socket", daemon.socketPath], fromHome, 0, "no jobs"),
        ]
        for (index, test) in cases.enumerated() {
            let output = daemon.home.file("refused-home-\(index).out")
            let pid = try ChildProcess.spawn(
                Binary.path, rawArguments: test.arguments.map { Array($0.utf8) }, rawEnvironment: test.environment, output: output)
            let status = ChildProcess.exitStatus(of: pid, within: 10)
            let printed = String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self)
            #expect(status == test.status, "\(test.arguments): \(printed)")
            #expect(printed.contains(test.shown), "\(test.arguments): \(printed)")
        }
        // Only the directory the user made: no repaired `caf\u{FFFD}` beside it, and nothing in it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent).count == 1)
        #expect(try FileManager.default.subpathsOfDirectory(atPath: parent).count == 1)

        // A connection string that is not UTF-8 is refused without being shown (it may hold a password).
        let output = daemon.home.file("refused-store.out")
        var environment = daemon.environment.mapValues { Array($0.utf8) }
        environment["TRAILBOOK_JOBS_HOME"] = Array(daemon.home.file("other").utf8)
        environment["TRAILBOOK_JOBS_STORE"] = Array("postgres://app:pa55-".utf8) + [0xE9] + Array("@127.0.0.1:9/app".utf8)
        let pid = try ChildProcess.spawn(Binary.path, rawArguments: [Array("daemon".utf8)], rawEnvironment: environment, output: output)
        let status = ChildProcess.exitStatus(of: pid, within: 10)
        let printed = String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self)
        #expect(status == 2, "\(printed)")
        #expect(printed.contains("TRAILBOOK_JOBS_STORE is not valid UTF-8 text (not shown"), "\(printed)")
        #expect(!printed.contains("pa55"), "\(printed)")
    }
}
