import TrailbookProtocol

/// `help` and `completions`: the command-line reference, the man page, the error code reference and the shell
/// completions, all made from the same command specs as `--help` (`Commands.all`) and the error code table
/// (`ErrorCodes`).
enum ReferenceCommands {
    /// The specs of `help` and `completions`.
    static let specs: [CommandSpec] = [
        CommandSpec(
            path: ["help"], summary: "show a command's help, or print the reference: Markdown, man page, error codes",
            positionals: [PositionalSpec(name: "COMMAND", min: 0, max: nil, completion: .command, help: "the command words, e.g. submit upload")],
            options: [
                OptionSpec("markdown", help: "print the command-line reference as Markdown (docs/reference/cli.md)"),
                OptionSpec("man", help: "print the man page as roff (view it with: trailbook-jobs help --man | man -l -)"),
                OptionSpec("errors", help: "print the error code reference as Markdown (docs/reference/errors.md)"),
            ],
            details: "The committed reference is regenerated with scripts/generate-reference.sh."),
        CommandSpec(
            path: ["completions"], summary: "print the shell completion script for bash, zsh or fish",
            positionals: [PositionalSpec(name: "SHELL", completion: .choices(ShellCompletion.Shell.allCases.map(\.rawValue)), help: "bash, zsh or fish")],
            details: """
                bash: trailbook-jobs completions bash > ~/.local/share/bash-completion/completions/trailbook-jobs
                zsh:  trailbook-jobs completions zsh > ~/.zfunc/_trailbook-jobs  (with fpath+=~/.zfunc before compinit)
                fish: trailbook-jobs completions fish > ~/.config/fish/completions/trailbook-jobs.fish
                Job IDs are completed by asking the running daemon (list --quiet); nothing is offered when none runs.
                """),
    ]

    /// The commands the reference covers: every one but the program itself and the internal ones, in table order.
    static var documented: [CommandSpec] { Commands.all.filter { !$0.path.isEmpty && !$0.isInternal } }

    /// `help`: one of the references, or the help of the command named by the positionals (the overview without).
    static func help(_ context: CommandContext) throws -> Int32 {
        let arguments = context.arguments
        let chosen = ["markdown", "man", "errors"].filter { arguments.flag($0) }
        guard chosen.count <= 1 else { throw UsageError("give one of --markdown, --man, --errors") }
        if !chosen.isEmpty, !arguments.positionals.isEmpty {
            throw UsageError("--\(chosen[0]) prints the whole reference; leave out the command words")
        }
        switch chosen.first {
        case "markdown": print(CommandReference.markdown(documented), terminator: "")
        case "man": print(ManPage.roff(documented), terminator: "")
        case "errors": print(ErrorReference.markdown(), terminator: "")
        default:
            let words = arguments.positionals
            if words.isEmpty {
                print(Commands.overview)
            } else if let group = CLI.groupHelp(words + ["--help"]) {
                print(group)
            } else if let spec = Commands.all.first(where: { $0.path == words && !$0.isInternal }) {
                print(spec.helpText)
            } else {
                _ = try ArgumentParser.command(for: words, in: Commands.all)  // throws the usual suggestion
                throw UsageError("unknown command '\(words.joined(separator: " "))'")
            }
        }
        return ExitCode.success
    }

    /// `completions SHELL`: the script.
    static func completions(_ context: CommandContext) throws -> Int32 {
        let name = context.arguments.positionals[0]
        guard let shell = ShellCompletion.Shell(rawValue: name) else {
            throw UsageError("completions are made for bash, zsh and fish, not '\(name)'")
        }
        print(ShellCompletion.script(for: shell, commands: documented), terminator: "")
        return ExitCode.success
    }
}
