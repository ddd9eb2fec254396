/// Shell completion scripts for bash, zsh and fish, made from the command specs: command words, options, option
/// values where they are a closed set (states, kinds, shells), files and directories, and job IDs asked of the
/// running daemon with `list --quiet` (nothing, and no error, when none runs).
///
/// Every script works the same way: the words typed so far give the command (the longest run of leading words that
/// is a command's path); the word before the cursor, if it is an option that takes a value, says what to offer;
/// else a word starting with `-` gets the command's options, and any other its subcommands and its arguments.
enum ShellCompletion {
    /// A shell a script is made for.
    enum Shell: String, CaseIterable {
        case bash, zsh, fish
    }

    /// The script for `shell` that completes `commands`.
    static func script(for shell: Shell, commands: [CommandSpec]) -> String {
        let table = CompletionTable(commands)
        switch shell {
        case .bash: return BashCompletion.script(table)
        case .zsh: return ZshCompletion.script(table)
        case .fish: return FishCompletion.script(table)
        }
    }
}

/// What the scripts need to know of the commands, in the shape the shells use.
struct CompletionTable {
    /// A command's path joined by spaces, e.g. `submit upload`; `""` for the program itself.
    struct Command {
        var path: String
        var summary: String
        var options: [OptionSpec]
        /// How its arguments are completed (`nil` when it takes none).
        var argument: CompletionKind?
        /// Its subcommands' words with their summaries, e.g. `upload` under `submit`.
        var subcommands: [(word: String, summary: String)]
    }

    /// Every path, the program's own (`""`) first, then the commands and the groups without a command of their own.
    var commands: [Command] = []

    init(_ specs: [CommandSpec]) {
        var paths: [[String]] = [[]]
        for spec in specs {
            for length in 1...spec.path.count where !paths.contains(Array(spec.path.prefix(length))) {
                paths.append(Array(spec.path.prefix(length)))
            }
        }
        for path in paths {
            let spec = specs.first { $0.path == path }
            var subcommands: [(word: String, summary: String)] = []
            for child in specs where child.path.count == path.count + 1 && child.path.starts(with: path) {
                subcommands.append((child.path.last!, child.summary))
            }
            for child in paths
            where child.count == path.count + 1 && child.starts(with: path)
                && !subcommands.contains(where: { $0.word == child.last! })
            {
                subcommands.append((child.last!, "\(child.joined(separator: " ")) commands"))
            }
            let commandWords = paths.filter { $0.count == 1 }.map { $0[0] }
            let options = spec?.allOptions ?? (path.isEmpty ? [OptionSpec("help", short: "h", help: "Show the help."), OptionSpec("version", help: "Show the version.")] : [])
            commands.append(
                Command(
                    path: path.joined(separator: " "), summary: spec?.summary ?? "",
                    options: options.map { option in
                        var option = option
                        if option.completion == .command { option.completion = .choices(commandWords) }
                        return option
                    },
                    argument: spec?.positionals.first.map { $0.completion == .command ? .choices(commandWords) : $0.completion },
                    subcommands: subcommands))
        }
    }

    /// The word a script uses for a completion kind: `none`, `file`, `directory`, `jobid`, or `choices` (`.command`
    /// is made `.choices` of the command words when the table is built).
    static func word(_ kind: CompletionKind) -> String {
        switch kind {
        case .none, .command: "none"
        case .file: "file"
        case .directory: "directory"
        case .jobID: "jobid"
        case .choices: "choices"
        }
    }

    /// The words of a `.choices` kind, else none.
    static func choices(_ kind: CompletionKind) -> [String] {
        if case .choices(let words) = kind { return words }
        return []
    }

    /// Whether the option takes a value.
    static func takesValue(_ option: OptionSpec) -> Bool {
        if case .value = option.kind { return true }
        return false
    }

    /// `text` in single quotes for any POSIX-like shell (fish too): `'` written as `'\''` (fish: `\'`).
    static func quoted(_ text: String, fish: Bool = false) -> String {
        guard fish else { return "'" + text.replacing("'", with: "'\\''") + "'" }
        return "'" + text.replacing("\\", with: "\\\\").replacing("'", with: "\\'") + "'"
    }

    /// The functions bash and zsh share (the same `case` syntax): `_trailbook_jobs_paths` (every path between `|`),
    /// and `_trailbook_jobs_options PATH`, `_trailbook_jobs_value PATH OPTION`, `_trailbook_jobs_words PATH`,
    /// `_trailbook_jobs_argument PATH`, which set `REPLY`.
    var posixTables: String {
        var text = "_trailbook_jobs_paths='|" + commands.map(\.path).joined(separator: "|") + "|'\n\n"
        text += "# The options of a command (REPLY: words).\n_trailbook_jobs_options() {\n    case \"$1\" in\n"
        for command in commands where !command.options.isEmpty {
            let words = command.options.flatMap { option in ["--" + option.name] + (option.short.map { ["-" + String($0)] } ?? []) }
            text += "        \(Self.quoted(command.path))) REPLY=\(Self.quoted(words.joined(separator: " "))) ;;\n"
        }
        text += "        *) REPLY='' ;;\n    esac\n}\n\n"
        text += "# What an option's value is (REPLY: none, file, directory, jobid or 'choices WORD…'); '' for a flag.\n"
        text += "_trailbook_jobs_value() {\n    case \"$1|$2\" in\n"
        for command in commands {
            for option in command.options where Self.takesValue(option) {
                let kind = ([Self.word(option.completion)] + Self.choices(option.completion)).joined(separator: " ")
                var patterns = [Self.quoted(command.path + "|--" + option.name)]
                if let short = option.short { patterns.append(Self.quoted(command.path + "|-" + String(short))) }
                text += "        \(patterns.joined(separator: " | "))) REPLY=\(Self.quoted(kind)) ;;\n"
            }
        }
        text += "        *) REPLY='' ;;\n    esac\n}\n\n"
        text += "# The subcommands of a command (REPLY: words).\n_trailbook_jobs_words() {\n    case \"$1\" in\n"
        for command in commands where !command.subcommands.isEmpty {
            text += "        \(Self.quoted(command.path))) REPLY=\(Self.quoted(command.subcommands.map(\.word).joined(separator: " "))) ;;\n"
        }
        text += "        *) REPLY='' ;;\n    esac\n}\n\n"
        text += "# What a command's arguments are (REPLY as for _trailbook_jobs_value; '' when it takes none).\n"
        text += "_trailbook_jobs_argument() {\n    case \"$1\" in\n"
        for command in commands {
            guard let argument = command.argument else { continue }
            let kind = ([Self.word(argument)] + Self.choices(argument)).joined(separator: " ")
            text += "        \(Self.quoted(command.path))) REPLY=\(Self.quoted(kind)) ;;\n"
        }
        text += "        *) REPLY='' ;;\n    esac\n}\n"
        return text
    }
}
