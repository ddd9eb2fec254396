// A small table-driven command-line parser: each command is a `CommandSpec` value, and one parser reads any of
// them. Hand-written because no outside Swift packages can be fetched on the build machines.

/// A problem with the command line: an unknown option or command, a missing value, a bad size or duration.
///
/// The CLI prints `message` to stderr and exits with status 2 (docs/reference/errors.md).
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, for people; names the option, command or argument concerned.
    public var message: String
    /// The same as `message`.
    public var description: String { message }

    /// Creates an error with the given message.
    public init(_ message: String) { self.message = message }
}

/// One option of a command: a flag such as `--json` or an option with a value such as `--chunk-size 8MiB`.
public struct OptionSpec: Sendable {
    /// Whether the option stands alone or takes a value.
    public enum Kind: Sendable, Equatable {
        /// Present or absent, e.g. `--json`; `--json=x` is an error.
        case flag
        /// Takes a value, as `--name value` or `--name=value`; `placeholder` names it in help, e.g. `SIZE`.
        case value(placeholder: String)
    }

    /// The long name without dashes, e.g. `chunk-size` for `--chunk-size`.
    public var name: String
    /// The one-letter form, e.g. `H` for `-H`; `-h` is always `--help`.
    public var short: Character?
    /// Flag or value.
    public var kind: Kind
    /// Whether the option may be given more than once (e.g. `--header`); otherwise a second use is an error.
    public var repeatable: Bool
    /// Whether the command fails without the option; required options appear in the usage line.
    public var required: Bool
    /// One line of help.
    public var help: String
    /// Whether the value is a file name, read with its exact bytes (`CommandContext.valuePath`), so it need not be
    /// UTF-8. Every other value is text and is refused when it is not valid UTF-8 (`CLI.run`): Swift would repair
    /// it to U+FFFD, and the command would act on a tag, queue or directory the user did not name.
    public var takesPath: Bool
    /// Whether the value may hold a secret (an `Authorization` header, a connection string's password): no
    /// message ever shows it.
    public var holdsSecret: Bool
    /// What shell completion offers for the value: by default files for an option that takes a path, else
    /// nothing.
    public var completion: CompletionKind

    /// Creates an option; by default a flag that may be given once and is not required.
    public init(
        _ name: String,
        short: Character? = nil,
        _ kind: Kind = .flag,
        repeatable: Bool = false,
        required: Bool = false,
        takesPath: Bool = false,
        holdsSecret: Bool = false,
        completion: CompletionKind? = nil,
        help: String
    ) {
        self.name = name
        self.short = short
        self.kind = kind
        self.repeatable = repeatable
        self.required = required
        self.takesPath = takesPath
        self.holdsSecret = holdsSecret
        self.completion = completion ?? (takesPath ? .file : .none)
        self.help = help
    }

    /// `--name`, or `--name PLACEHOLDER` for an option with a value.
    public var synopsis: String {
        switch kind {
        case .flag: "--\(name)"
        case .value(let placeholder): "--\(name) \(placeholder)"
        }
    }
}

/// What shell completion offers for an option's value or a positional argument.
public enum CompletionKind: Sendable, Equatable {
    /// Nothing: free text such as a tag or a size.
    case none
    /// File names.
    case file
    /// Directory names.
    case directory
    /// The IDs of the daemon's jobs (`trailbook-jobs list --quiet`).
    case jobID
    /// One of these words, e.g. the job states.
    case choices([String])
    /// A command's first word (`help COMMAND`).
    case command
}

/// One positional argument of a command, e.g. `FILE…` for `submit upload`.
public struct PositionalSpec: Sendable {
    /// The name shown in usage, help and errors, e.g. `FILE`.
    public var name: String
    /// The fewest values the command needs.
    public var min: Int
    /// The most values the command takes; `nil` for no limit.
    public var max: Int?
    /// One line of help.
    public var help: String
    /// What shell completion offers for it: by default files.
    public var completion: CompletionKind

    /// Creates a positional argument; by default exactly one value, completed as a file name.
    public init(name: String, min: Int = 1, max: Int? = 1, completion: CompletionKind = .file, help: String) {
        self.name = name
        self.min = min
        self.max = max
        self.completion = completion
        self.help = help
    }

    /// `ID`, `[ID]`, `FILE…` or `[ID…]`.
    public var synopsis: String {
        let repeated = max.map { $0 > 1 } ?? true
        let text = repeated ? "\(name)…" : name
        return min == 0 ? "[\(text)]" : text
    }

    /// `one FILE`, `at least one FILE`, `2 FILE arguments`, `at least 2 FILE arguments`.
    var quantity: String {
        let count = min == 1 ? "one \(name)" : "\(min) \(name) arguments"
        return max == min ? count : "at least \(count)"
    }
}

/// One command of the CLI: its words, arguments and options, and the help made from them.
public struct CommandSpec: Sendable {
    /// The program name at the start of usage lines.
    public static let programName = "trailbook-jobs"

    /// The command words after the program name, e.g. `["submit", "upload"]`; empty for the program itself.
    public var path: [String]
    /// One line saying what the command does.
    public var summary: String
    /// The positional arguments, in order; at most one of them should be unbounded.
    public var positionals: [PositionalSpec]
    /// The options; `--help`/`-h` is always accepted without being listed.
    public var options: [OptionSpec]
    /// Extra paragraphs at the end of `--help`: examples, exit codes.
    public var details: String?

    /// Creates a command.
    public init(
        path: [String],
        summary: String,
        positionals: [PositionalSpec] = [],
        options: [OptionSpec] = [],
        details: String? = nil
    ) {
        self.path = path
        self.summary = summary
        self.positionals = positionals
        self.options = options
        self.details = details
    }

    /// Whether the command is for the daemon's own use (`worker`): left out of help, the reference and completion.
    public var isInternal: Bool { summary.hasPrefix("(internal)") }

    /// The command as typed, e.g. `submit upload`, or the program name for the program itself.
    public var displayName: String { path.isEmpty ? Self.programName : path.joined(separator: " ") }

    /// The options including the implicit `--help`.
    public var allOptions: [OptionSpec] {
        if options.contains(where: { $0.name == "help" }) { return options }
        return options + [OptionSpec("help", short: "h", help: "Show this help.")]
    }

    /// `Usage: trailbook-jobs submit upload FILE… --to DEST [options]`.
    public var usageLine: String {
        let words =
            [Self.programName] + path + positionals.map(\.synopsis)
            + options.filter(\.required).map(\.synopsis) + ["[options]"]
        return "Usage: " + words.joined(separator: " ")
    }

    /// The text `--help` prints: usage line, summary, arguments and options in aligned columns, then `details`.
    public var helpText: String {
        var rows: [(section: String, left: String, help: String)] = []
        for positional in positionals {
            rows.append(("Arguments:", positional.name, positional.help))
        }
        for option in allOptions {
            let short = option.short.map { "-\($0), " } ?? "    "
            let help = option.repeatable ? "\(option.help) (repeatable)" : option.help
            rows.append(("Options:", short + option.synopsis, help))
        }
        var text = "\(usageLine)\n\n\(summary)\n"
        var section = ""
        for row in rows {
            if row.section != section {
                section = row.section
                text += "\n\(section)\n"
            }
            text += formatRow(row.left, row.help, width: min(rows.map(\.left.count).max() ?? 0, 30))
        }
        if let details { text += "\n\(details)\n" }
        return text
    }
}

/// A help row: two spaces, the left column padded to `width`, two spaces, the help; help moves to the next line
/// when the left column is wider.
func formatRow(_ left: String, _ help: String, width: Int) -> String {
    let indent = String(repeating: " ", count: width + 4)
    let lines = help.split(separator: "\n", omittingEmptySubsequences: false)
    var text = "  \(left)"
    if left.count > width {
        text += "\n" + indent
    } else {
        text += String(repeating: " ", count: width - left.count + 2)
    }
    text += lines.joined(separator: "\n" + indent)
    return text + "\n"
}

/// What `ArgumentParser.parse` found: positionals in order, flags, and option values by long name.
public struct ParsedArguments: Sendable {
    /// The positional arguments, in order, including everything after `--`.
    public var positionals: [String]
    /// For each positional, its index in the arguments parsed (to find its raw bytes: see `CLI.run`).
    public var positionalIndices: [Int] = []
    /// For each value of an option, by long name and in order: the index of the argument that holds it and how
    /// many bytes of that argument precede it (0 for `--name VALUE`, `--name=`'s length for `--name=VALUE`);
    /// `nil` for a short option's attached value. To find its raw bytes (see `CommandContext.valuePath`).
    public var valueSources: [String: [(index: Int, offset: Int)?]] = [:]
    /// Whether `--help` or `-h` was given; the other fields may then be incomplete.
    public var wantsHelp: Bool
    /// The flags given, by long name.
    var givenFlags: Set<String>
    /// The values given, by long name, in order.
    var valuesByName: [String: [String]]

    /// Creates parsed arguments directly, for tests of code that consumes them.
    public init(
        positionals: [String] = [],
        flags: Set<String> = [],
        values: [String: [String]] = [:],
        wantsHelp: Bool = false
    ) {
        self.positionals = positionals
        self.givenFlags = flags
        self.valuesByName = values
        self.wantsHelp = wantsHelp
    }

    /// Whether the flag `--name` was given.
    public func flag(_ name: String) -> Bool { givenFlags.contains(name) }

    /// The value of `--name`, the last one if given several times, or `nil` if not given.
    public func value(_ name: String) -> String? { valuesByName[name]?.last }

    /// All values of `--name` in the order given; empty if not given.
    public func values(_ name: String) -> [String] { valuesByName[name] ?? [] }

    /// The value of `--name` as a size in bytes (see `ByteCount.parse`), or `nil` if not given.
    ///
    /// - Throws: `UsageError` naming the option if the value is not a size.
    public func size(_ name: String) throws(UsageError) -> Int64? {
        guard let text = value(name) else { return nil }
        do throws(UsageError) {
            return try ByteCount.parse(text)
        } catch {
            throw UsageError("option --\(name): \(error.message)")
        }
    }

    /// The value of `--name` as a duration in seconds (see `parseDuration`), or `nil` if not given.
    ///
    /// - Throws: `UsageError` naming the option if the value is not a duration.
    public func duration(_ name: String) throws(UsageError) -> Double? {
        guard let text = value(name) else { return nil }
        do throws(UsageError) {
            return try parseDuration(text)
        } catch {
            throw UsageError("option --\(name): \(error.message)")
        }
    }

    /// The value of `--name` as a whole number within `range`, or `nil` if not given.
    ///
    /// - Throws: `UsageError` naming the option if the value is not a whole number or is outside `range`.
    public func integer(_ name: String, range: ClosedRange<Int>) throws(UsageError) -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = Int(text) else {
            let digits = text.drop { $0 == "-" || $0 == "+" }
            if !digits.isEmpty && digits.allSatisfy(\.isASCIIDigit) {
                throw UsageError(
                    "option --\(name) must be between \(range.lowerBound) and \(range.upperBound), got \(text)")
            }
            throw UsageError("option --\(name) needs a whole number, got '\(text)'")
        }
        guard range.contains(number) else {
            throw UsageError(
                "option --\(name) must be between \(range.lowerBound) and \(range.upperBound), got \(text)")
        }
        return number
    }
}

/// Reads command lines against `CommandSpec`s.
///
/// Options: `--name value`, `--name=value`, `-x value`, `-xvalue`, clustered short flags (`-vq`); they may come
/// before, after or between positionals; `--` ends them. A value that starts with `-` and a letter must be
/// attached (`--name=-x`); `-` alone and negative numbers are ordinary values and positionals.
public enum ArgumentParser {
    /// Parses the arguments after the command words against `spec`.
    ///
    /// When `--help` or `-h` is present the result has `wantsHelp` set and no error is thrown for anything else.
    /// - Parameters:
    ///   - arguments: the arguments, without the program name and command words.
    ///   - spec: the command they belong to.
    /// - Returns: positionals, flags and values.
    /// - Throws: `UsageError` for an unknown option (with a suggestion when one is close), a missing value, a value
    ///   given to a flag, a non-repeatable option given twice, too few or too many positionals, or a missing
    ///   required option. The first problem found is reported.
    public static func parse(_ arguments: [String], for spec: CommandSpec) throws(UsageError) -> ParsedArguments {
        var scan = ArgumentScan(spec: spec)
        scan.run(arguments)
        if scan.result.wantsHelp { return scan.result }
        if let error = scan.firstError { throw error }
        try checkPositionals(scan.result.positionals, for: spec)
        for option in spec.options where option.required {
            if scan.result.valuesByName[option.name] == nil && !scan.result.givenFlags.contains(option.name) {
                throw UsageError("\(spec.displayName) needs \(option.synopsis)")
            }
        }
        return scan.result
    }

    /// Picks the command among `commands` by the longest matching path prefix of `arguments`; returns it and
    /// the rest.
    ///
    /// A command with an empty path (the program itself, e.g. for `trailbook-jobs --help`) matches only when
    /// `arguments` is empty or starts with an option.
    /// - Parameters:
    ///   - arguments: the command line without the program name.
    ///   - commands: every command of the CLI.
    /// - Returns: the command and the arguments after its words.
    /// - Throws: `UsageError` for a missing or unknown command, suggesting a close one, with the list of commands.
    public static func command(
        for arguments: [String],
        in commands: [CommandSpec]
    ) throws(UsageError) -> (CommandSpec, [String]) {
        let matches = commands.filter { !$0.path.isEmpty && arguments.starts(with: $0.path) }
        if let best = matches.max(by: { $0.path.count < $1.path.count }) {
            let rest = Array(arguments.dropFirst(best.path.count))
            // A command that is also a group (`submit --from F` beside `submit upload`) takes only options: a word
            // after it is a subcommand, mistyped or missing, and gets the group's error and suggestion.
            let isGroup = commands.contains { $0.path.count > best.path.count && $0.path.starts(with: best.path) }
            if isGroup, let (option, word) = subcommandAfterOptions(rest, of: best, in: commands) {
                // `submit --wait upload a.jpg`: read as the group's options, it would be "unknown option --wait".
                let command = (best.path + [word]).joined(separator: " ")
                throw UsageError("options go after the subcommand: 'trailbook-jobs \(command) … \(option)', not before '\(word)'")
            }
            if !isGroup || rest.first?.hasPrefix("-") == true { return (best, rest) }
        }
        if let root = commands.first(where: { $0.path.isEmpty }), arguments.first?.hasPrefix("-") ?? true {
            return (root, arguments)
        }

        // How many leading words match the start of some command, e.g. 1 for `submit uplod`.
        let words = Array(arguments.prefix { !$0.hasPrefix("-") })
        var depth = 0
        while depth < words.count, commands.contains(where: { $0.path.starts(with: words.prefix(depth + 1)) }) {
            depth += 1
        }
        let prefix = Array(words.prefix(depth))
        let candidates = commands.filter { $0.path.count > depth && $0.path.starts(with: prefix) }
        let message: String
        if depth < words.count {
            var nextWords: [String] = []
            for word in candidates.map({ $0.path[depth] }) where !nextWords.contains(word) { nextWords.append(word) }
            let typed = (prefix + [words[depth]]).joined(separator: " ")
            if let suggestion = suggestion(for: words[depth], among: nextWords) {
                let full = (prefix + [suggestion]).joined(separator: " ")
                message = "unknown command '\(typed)'; did you mean '\(full)'?"
            } else {
                message = "unknown command '\(typed)'"
            }
        } else if depth == 0 {
            message = "missing command"
        } else {
            message = "'\(prefix.joined(separator: " "))' needs a subcommand"
        }
        // The internal ones (`worker`) are left out, as in the help.
        let listed = (candidates.isEmpty ? commands : candidates).filter { !$0.summary.contains("(internal)") }
        throw UsageError(message + "\n\n" + commandList(listed))
    }

    /// The first option of `rest` and the subcommand of `group` that comes after it, when `rest` holds options of
    /// the group command and then one of its subcommands' names (values of the group's own options passed over:
    /// `submit --from upload` is a file named `upload`); else `nil`.
    static func subcommandAfterOptions(
        _ rest: [String], of group: CommandSpec, in commands: [CommandSpec]
    ) -> (option: String, word: String)? {
        guard let first = rest.first, first.hasPrefix("-"), first != "--" else { return nil }
        let subcommands = Set(
            commands.filter { $0.path.count == group.path.count + 1 && $0.path.starts(with: group.path) }.map { $0.path.last! })
        var index = 0
        while index < rest.count {
            let argument = rest[index]
            if argument == "--" { return nil }
            if argument.hasPrefix("-") {
                let name = argument.drop { $0 == "-" }
                let takesValue = group.options.contains { option in
                    if case .value = option.kind { return option.name == name } else { return false }
                }
                index += takesValue && !argument.contains("=") ? 2 : 1
                continue
            }
            let option = String(first.prefix { $0 != "=" })
            return subcommands.contains(argument) ? (option, argument) : nil
        }
        return nil
    }

    /// The commands with their summaries in aligned columns, under a `Commands:` heading, for errors and help.
    ///
    /// - Parameter commands: the commands to list, in the order given; one with an empty path is left out.
    /// - Returns: the heading and one line per command.
    public static func commandList(_ commands: [CommandSpec]) -> String {
        let listed = commands.filter { !$0.path.isEmpty }
        let width = min(listed.map(\.displayName.count).max() ?? 0, 30)
        return "Commands:\n" + listed.map { formatRow($0.displayName, $0.summary, width: width) }.joined()
    }

    /// Checks the number of positionals against the command's `PositionalSpec`s, filled left to right.
    static func checkPositionals(_ values: [String], for spec: CommandSpec) throws(UsageError) {
        var remaining = values.count
        for (index, positional) in spec.positionals.enumerated() {
            guard remaining >= positional.min else {
                throw UsageError("\(spec.displayName) needs \(positional.quantity)")
            }
            let neededLater = spec.positionals[(index + 1)...].reduce(0) { $0 + $1.min }
            let taken = min(positional.max ?? Int.max, max(positional.min, remaining - neededLater))
            remaining -= taken
        }
        if remaining > 0 {
            let extra = values[values.count - remaining]
            let usage =
                spec.positionals.isEmpty
                ? "\(spec.displayName) takes no arguments"
                : "usage: " + spec.usageLine.dropFirst("Usage: ".count)
            throw UsageError("unexpected argument '\(extra)'; \(usage)")
        }
    }

    /// The candidate closest to `typed`: within an edit distance of 1 (2 for names of 6 or more characters), or
    /// else the only candidate that starts with `typed` (2 or more characters).
    static func suggestion(for typed: String, among candidates: [String]) -> String? {
        let lowered = typed.lowercased()
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(lowered, candidate)
            let limit = min(2, max(1, candidate.count / 3))
            if distance <= limit, distance < (best?.distance ?? .max) { best = (candidate, distance) }
        }
        if let best { return best.candidate }
        let prefixed = candidates.filter { lowered.count >= 2 && $0.hasPrefix(lowered) }
        return prefixed.count == 1 ? prefixed[0] : nil
    }

    /// The optimal-string-alignment distance: insertions, deletions, substitutions and adjacent swaps count 1.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }
}

/// One pass over the arguments; keeps going after a problem so that a later `--help` still wins.
private struct ArgumentScan {
    let spec: CommandSpec
    let options: [OptionSpec]
    var result = ParsedArguments()
    var firstError: UsageError?
    var seen: Set<String> = []

    init(spec: CommandSpec) {
        self.spec = spec
        self.options = spec.allOptions
    }

    /// Whether `token` is an option rather than a positional or value: `-` alone and `-5` are not.
    static func looksLikeOption(_ token: String) -> Bool {
        guard token.hasPrefix("-"), let second = token.dropFirst().first else { return false }
        return !(second.isASCIIDigit || second == ".")
    }

    mutating func fail(_ message: String) {
        if firstError == nil { firstError = UsageError(message) }
    }

    mutating func run(_ arguments: [String]) {
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let token = arguments[index]
            index += 1
            if optionsEnded || !Self.looksLikeOption(token) {
                result.positionals.append(token)
                result.positionalIndices.append(index - 1)
            } else if token == "--" {
                optionsEnded = true
            } else if token.hasPrefix("--") {
                let body = token.dropFirst(2)
                let equals = body.firstIndex(of: "=")
                let name = String(body[..<(equals ?? body.endIndex)])
                let inline = equals.map { String(body[body.index(after: $0)...]) }
                guard let option = options.first(where: { $0.name == name }) else {
                    let suggestion = ArgumentParser.suggestion(for: name, among: options.map(\.name))
                    fail("unknown option --\(name)" + (suggestion.map { "; did you mean --\($0)?" } ?? ""))
                    continue
                }
                accept(option, inline: inline, arguments, &index, inlineOffset: 2 + name.utf8.count + 1)
            } else {
                var letters = token.dropFirst()
                while let letter = letters.first {
                    letters = letters.dropFirst()
                    guard let option = options.first(where: { $0.short == letter }) else {
                        // `-json` is more likely a mistyped `--json` than a cluster of short flags.
                        let long = String(token.dropFirst())
                        let suggestion =
                            token.count > 2
                            ? ArgumentParser.suggestion(for: long, among: options.map(\.name)) : nil
                        fail("unknown option \(token)" + (suggestion.map { "; did you mean --\($0)?" } ?? ""))
                        break
                    }
                    if case .value = option.kind {
                        let attached = letters.first == "=" ? letters.dropFirst() : letters
                        accept(option, inline: letters.isEmpty ? nil : String(attached), arguments, &index)
                        break
                    }
                    accept(option, inline: nil, arguments, &index)
                }
            }
        }
    }

    /// Records one use of `option`, taking its value from `inline` or the next argument.
    mutating func accept(
        _ option: OptionSpec, inline: String?, _ arguments: [String], _ index: inout Int, inlineOffset: Int? = nil
    ) {
        if option.name == "help" && option.kind == .flag {
            result.wantsHelp = true
            return
        }
        if !option.repeatable && seen.contains(option.name) {
            fail("option --\(option.name) given more than once")
            return
        }
        seen.insert(option.name)
        switch option.kind {
        case .flag:
            guard inline == nil else {
                fail("option --\(option.name) does not take a value")
                return
            }
            result.givenFlags.insert(option.name)
        case .value(let placeholder):
            if let inline {
                result.valuesByName[option.name, default: []].append(inline)
                result.valueSources[option.name, default: []].append(inlineOffset.map { (index - 1, $0) })
            } else if index < arguments.count && !Self.looksLikeOption(arguments[index]) {
                result.valuesByName[option.name, default: []].append(arguments[index])
                result.valueSources[option.name, default: []].append((index, 0))
                index += 1
            } else {
                var message = "option --\(option.name) needs a value (\(placeholder))"
                if index < arguments.count {
                    message += "; for a value starting with '-', write --\(option.name)=\(placeholder)"
                }
                fail(message)
            }
        }
    }
}
