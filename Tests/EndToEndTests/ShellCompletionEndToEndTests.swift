import Foundation
import Testing
import TrailbookEngine

/// Shell completion (issue 36) in real shells, from the scripts `trailbook-jobs completions SHELL` prints: bash
/// through its completion function (COMP_WORDS, COMP_CWORD), fish through `complete -C`, zsh loaded by compinit.
/// Job IDs come from the running daemon.
@Suite struct ShellCompletionEndToEndTests {
    /// The environment the shells run in: the binary's folder first in PATH (completion asks `trailbook-jobs` for
    /// job IDs), and `home` as the state directory.
    static func environment(home: String) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        let folder = URL(fileURLWithPath: Binary.path).deletingLastPathComponent().path
        environment["PATH"] = folder + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["TRAILBOOK_JOBS_HOME"] = home
        return environment
    }

    /// The script for `shell`, written to a file in `directory`.
    static func script(_ shell: String, in directory: TemporaryDirectory) throws -> String {
        let result = try DaemonHarness.run(Binary.path, ["completions", shell])
        try #require(result.status == 0, "completions \(shell): \(result.stderr)")
        let path = directory.file("completion.\(shell)")
        try result.stdout.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func quoted(_ word: String) -> String { "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    /// What bash's completion function offers for `words` (the last one is being completed), and its stderr.
    static func bash(_ words: [String], home: String) throws -> (candidates: [String], stderr: String) {
        let directory = TemporaryDirectory()
        let script = try script("bash", in: directory)
        let program = """
            source \(quoted(script))
            COMP_WORDS=(\(words.map(quoted).joined(separator: " "))); COMP_CWORD=\(words.count - 1)
            COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
            _trailbook_jobs
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let result = try DaemonHarness.run("/bin/bash", ["--norc", "--noprofile", "-c", program], environment: environment(home: home))
        try #require(result.status == 0, "bash: \(result.stderr)")
        return (result.stdout.split(separator: "\n").map(String.init), result.stderr)
    }

    /// What fish offers for the command line `line` (`complete -C`), without the descriptions.
    static func fish(_ line: String, home: String) throws -> [String] {
        let directory = TemporaryDirectory()
        let script = try script("fish", in: directory)
        let result = try DaemonHarness.run(
            "/usr/bin/fish", ["--no-config", "-c", "source \(quoted(script)); complete -C \(quoted(line))"],
            environment: environment(home: home))
        try #require(result.status == 0 && result.stderr.isEmpty, "fish: \(result.stderr)")
        return result.stdout.split(separator: "\n").map { String($0.split(separator: "\t").first ?? "") }
    }

    @Test func bashCompletesCommandsOptionsAndTheirValues() throws {
        let home = TemporaryDirectory()
        #expect(try Self.bash(["trailbook-jobs", "sub"], home: home.path).candidates == ["submit"])
        #expect(try Self.bash(["trailbook-jobs", "submit", "up"], home: home.path).candidates == ["upload"])
        #expect(try Self.bash(["trailbook-jobs", "photos", "i"], home: home.path).candidates == ["import"])
        #expect(try Self.bash(["trailbook-jobs", "list", "--st"], home: home.path).candidates == ["--state"])
        #expect(try Self.bash(["trailbook-jobs", "daemon", "--que"], home: home.path).candidates == ["--queues"])
        let states = try Self.bash(["trailbook-jobs", "list", "--state", ""], home: home.path).candidates
        #expect(states == ["queued", "running", "paused", "needs_retry", "succeeded", "failed", "cancelled"])
        #expect(try Self.bash(["trailbook-jobs", "list", "--state", "needs"], home: home.path).candidates == ["needs_retry"])
        // --state=needs, as bash splits it (COMP_WORDBREAKS has '=').
        #expect(try Self.bash(["trailbook-jobs", "list", "--state", "=", "needs"], home: home.path).candidates == ["needs_retry"])
        #expect(try Self.bash(["trailbook-jobs", "list", "--state", "="], home: home.path).candidates.count == 7)
        #expect(try Self.bash(["trailbook-jobs", "watch", "--kind", "auto"], home: home.path).candidates == ["autotag"])
        #expect(try Self.bash(["trailbook-jobs", "completions", ""], home: home.path).candidates == ["bash", "zsh", "fish"])
        #expect(try Self.bash(["trailbook-jobs", "help", "pho"], home: home.path).candidates == ["photos"])
        #expect(try Self.bash(["trailbook-jobs", "submit", "upload", "--checksum", ""], home: home.path).candidates == ["sha256", "md5"])
        // A file argument: the files there.
        try "x".write(toFile: home.file("photo-one.jpg"), atomically: true, encoding: .utf8)
        #expect(try Self.bash(["trailbook-jobs", "submit", "upload", home.file("photo-o")], home: home.path).candidates == [home.file("photo-one.jpg")])
    }

    /// Tab in an interactive bash in a real terminal (tmux): `trailbook-jobs sub<TAB>` becomes `submit`, and a job
    /// ID prefix the running daemon's job's ID.
    @Test func tabInAnInteractiveBashCompletesACommandAndAJobID() throws {
        let harness = try WatchHarness()
        defer { harness.stop() }
        let id = try harness.submitSleep(["units": 1000, "unit_ms": 100])
        let script = harness.home + "/completion.bash"
        try DaemonHarness.run(Binary.path, ["completions", "bash"]).stdout.write(toFile: script, atomically: true, encoding: .utf8)
        let folder = URL(fileURLWithPath: Binary.path).deletingLastPathComponent().path
        try harness.tmux([
            "new-session", "-d", "-s", harness.session, "-x", "150", "-y", "30",
            "env -i HOME='\(harness.home)' TERM=xterm PATH='\(folder)':/usr/bin:/bin TRAILBOOK_JOBS_HOME='\(harness.home)' bash --norc --noprofile",
        ])
        try harness.keys("source '\(script)'", "Enter")
        try harness.keys("trailbook-jobs sub", "Tab")
        try harness.waitForScreen("sub completed to submit") { $0.contains("trailbook-jobs submit") }
        try harness.keys("C-u")
        try harness.keys("trailbook-jobs show \(id.prefix(6))", "Tab")
        try harness.waitForScreen("the ID prefix completed") { $0.contains("trailbook-jobs show \(id)") }
    }

    @Test func bashOffersNoJobIDsAndNoErrorWhenNoDaemonRuns() throws {
        let home = TemporaryDirectory()
        let (candidates, stderr) = try Self.bash(["trailbook-jobs", "show", ""], home: home.path)
        #expect(candidates.isEmpty && stderr.isEmpty, "\(candidates) \(stderr)")
    }

    /// A job ID prefix completes against the running daemon: `show 1a2<TAB>` gives the job's ID.
    @Test func bashCompletesAJobIDPrefixFromTheRunningDaemon() throws {
        let daemon = try DaemonHarness()
        let first = try daemon.submitSleep(units: 1000, unitMilliseconds: 100)
        let second = try daemon.submitSleep(units: 1000, unitMilliseconds: 100)
        let prefix = String(first.prefix(5))
        let matching = try Self.bash(["trailbook-jobs", "show", prefix], home: daemon.statePath).candidates
        #expect(matching == [first], "\(prefix) → \(matching)")
        let all = try Self.bash(["trailbook-jobs", "cancel", ""], home: daemon.statePath).candidates
        #expect(Set(all) == [first, second])
        // --socket on the line names the daemon to ask, whatever TRAILBOOK_JOBS_HOME says.
        let elsewhere = TemporaryDirectory()
        let viaSocket = try Self.bash(["trailbook-jobs", "pause", "--socket", daemon.socketPath, prefix], home: elsewhere.path)
        #expect(viaSocket.candidates == [first])
        #expect(try daemon.cli(["list", "--quiet"]).stdout == "\(first)\n\(second)\n")
    }

    @Test func fishCompletesCommandsValuesAndJobIDs() throws {
        let daemon = try DaemonHarness()
        let id = try daemon.submitSleep(units: 1000, unitMilliseconds: 100)
        #expect(try Self.fish("trailbook-jobs sub", home: daemon.statePath) == ["submit"])
        #expect(try Self.fish("trailbook-jobs submit up", home: daemon.statePath) == ["upload"])
        #expect(try Self.fish("trailbook-jobs list --state needs", home: daemon.statePath) == ["needs_retry"])
        #expect(try Self.fish("trailbook-jobs show \(id.prefix(6))", home: daemon.statePath) == [id])
    }

    /// What zsh's completion function offers for `words` (the last one is being completed), with `compadd` and
    /// `_files` standing in for the completion system's: `compadd` prints the candidates that start with the word,
    /// as the real one keeps; `_files` prints `<files ARGUMENTS>`.
    static func zsh(_ words: [String], home: String) throws -> [String] {
        let directory = TemporaryDirectory()
        let script = try script("zsh", in: directory)
        let program = """
            compdef() { : }
            source \(quoted(script))
            compadd() { [[ $1 == -- ]] && shift; local w; for w in "$@"; do [[ $w == ${words[CURRENT]}* ]] && print -r -- $w; done }
            _files() { print -r -- "<files $*>" }
            words=(\(words.map(quoted).joined(separator: " "))); CURRENT=\(words.count)
            _trailbook_jobs
            """
        let result = try DaemonHarness.run("/usr/bin/zsh", ["-f", "-c", program], environment: environment(home: home))
        try #require(result.status == 0 && result.stderr.isEmpty, "zsh: \(result.stderr)")
        // Empty candidates kept: an empty job ID offered when no daemon runs is a fault.
        guard !result.stdout.isEmpty else { return [] }
        return result.stdout.dropLast().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    @Test func zshCompletesCommandsValuesAndJobIDs() throws {
        let daemon = try DaemonHarness()
        let home = daemon.statePath
        #expect(try Self.zsh(["trailbook-jobs", "sub"], home: home) == ["submit"])
        #expect(try Self.zsh(["trailbook-jobs", "submit", "up"], home: home) == ["upload"])
        #expect(try Self.zsh(["trailbook-jobs", "list", "--state", "needs"], home: home) == ["needs_retry"])
        #expect(try Self.zsh(["trailbook-jobs", "submit", "upload", "--to", ""], home: home) == ["<files -/>"])
        #expect(try Self.zsh(["trailbook-jobs", "show", ""], home: home).isEmpty, "no jobs, no candidates")
        let id = try daemon.submitSleep(units: 1000, unitMilliseconds: 100)
        #expect(try Self.zsh(["trailbook-jobs", "show", String(id.prefix(6))], home: home) == [id])
    }

    /// zsh: the script parses, and compinit loads it (it registers itself with compdef) without a word on stderr.
    @Test func zshLoadsTheScript() throws {
        let directory = TemporaryDirectory()
        let script = try Self.script("zsh", in: directory)
        let syntax = try DaemonHarness.run("/usr/bin/zsh", ["-n", script])
        #expect(syntax.status == 0 && syntax.stderr.isEmpty, "zsh -n: \(syntax.stderr)")
        let loaded = try DaemonHarness.run(
            "/usr/bin/zsh",
            ["-f", "-c", "autoload -Uz compinit && compinit -u -D && source \(Self.quoted(script)) && print -r -- ${_comps[trailbook-jobs]}"],
            environment: Self.environment(home: directory.path))
        #expect(loaded.status == 0 && loaded.stderr.isEmpty, "zsh: \(loaded.stderr)")
        #expect(loaded.stdout == "_trailbook_jobs\n")
    }
}
