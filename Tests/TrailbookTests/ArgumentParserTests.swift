import Testing

@testable import TrailbookClient

/// The message of the `UsageError` that `body` throws, `nil` if it throws none, or a note if it throws another error.
private func usageMessage<T>(_ body: () throws -> T) -> String? {
    do {
        _ = try body()
        return nil
    } catch let error as UsageError {
        return error.message
    } catch {
        return "not a UsageError: \(error)"
    }
}

struct ArgumentParserTests {
    static let upload = CommandSpec(
        path: ["submit", "upload"],
        summary: "Uploads files in chunks.",
        positionals: [PositionalSpec(name: "FILE", min: 1, max: nil, help: "A file to upload.")],
        options: [
            OptionSpec(
                "to", .value(placeholder: "DEST"), required: true, help: "file:///dir or an http(s):// tus endpoint."),
            OptionSpec("chunk-size", .value(placeholder: "SIZE"), help: "Bytes per chunk."),
            OptionSpec("timeout", .value(placeholder: "DUR"), help: "Deadline."),
            OptionSpec("priority", .value(placeholder: "N"), help: "Higher runs first."),
            OptionSpec("header", short: "H", .value(placeholder: "LINE"), repeatable: true, help: "Extra HTTP header."),
            OptionSpec("json", help: "Print JSON."),
            OptionSpec("wait", short: "w", help: "Block until the job ends."),
            OptionSpec("verbose", short: "v", help: "Say more."),
        ],
        details: "Exit codes: 0 success, 2 usage error."
    )
    static let show = CommandSpec(
        path: ["show"],
        summary: "Shows a job.",
        positionals: [PositionalSpec(name: "ID", help: "The job.")],
        options: [OptionSpec("json", help: "Print JSON.")]
    )
    static let list = CommandSpec(
        path: ["list"], summary: "Lists jobs.", options: [OptionSpec("json", help: "Print JSON.")])
    static let watch = CommandSpec(
        path: ["watch"],
        summary: "Shows live progress.",
        positionals: [PositionalSpec(name: "ID", min: 0, max: nil, help: "Jobs to watch; all if none.")]
    )
    static let copy = CommandSpec(
        path: ["copy"],
        summary: "Copies.",
        positionals: [
            PositionalSpec(name: "SRC", min: 1, max: nil, help: "Sources."),
            PositionalSpec(name: "DST", help: "Destination."),
        ]
    )
    static let commands = [
        list, show, watch, upload,
        CommandSpec(path: ["submit", "tag"], summary: "Adds a keyword to photos."),
        CommandSpec(path: ["submit", "autotag"], summary: "Analyses photos and writes tags."),
        CommandSpec(path: ["photos", "list"], summary: "Lists photos."),
    ]

    // MARK: Options

    @Test func readsValuesInBothFormsAroundPositionals() throws {
        let parsed = try ArgumentParser.parse(
            ["a.jpg", "--to", "file:///tmp/out", "b.jpg", "--chunk-size=8MiB", "--json", "c.jpg"],
            for: Self.upload
        )
        #expect(parsed.positionals == ["a.jpg", "b.jpg", "c.jpg"])
        #expect(parsed.value("to") == "file:///tmp/out")
        #expect(parsed.value("chunk-size") == "8MiB")
        #expect(parsed.flag("json"))
        #expect(!parsed.flag("wait"))
        #expect(parsed.value("timeout") == nil)
        #expect(!parsed.wantsHelp)
    }

    /// Each value records where its bytes are (argument index, bytes before it), so a path given to an option
    /// keeps bytes that are not UTF-8 (`--ids-file caf\xe9.txt`), as positionals do.
    @Test func valueSourcesPointAtTheRawBytes() throws {
        let raw: [[UInt8]] = [
            Array("f".utf8), Array("--to=caf".utf8) + [0xE9], Array("--header".utf8), Array("X: ".utf8) + [0xE9],
            Array("-Hb".utf8),
        ]
        let text = raw.map { String(decoding: $0, as: UTF8.self) }
        let parsed = try ArgumentParser.parse(text, for: Self.upload)
        let to = try #require(parsed.valueSources["to"]?.first ?? nil)
        #expect(Array(raw[to.index].dropFirst(to.offset)) == Array("caf".utf8) + [0xE9])
        let headers = parsed.valueSources["header"] ?? []
        #expect(headers.count == 2)
        let first = try #require(headers.first ?? nil)
        #expect(Array(raw[first.index].dropFirst(first.offset)) == Array("X: ".utf8) + [0xE9])
        #expect(headers.last! == nil, "a short option's attached value has no raw source: its text is used")
        var context = CommandContext(arguments: parsed, environment: [:])
        context.rawValues = parsed.valueSources.mapValues { $0.map { $0.map { Array(raw[$0.index].dropFirst($0.offset)) } } }
        #expect(try context.valuePath("to")?.bytes == Array("caf".utf8) + [0xE9])
        #expect(try context.valuePath("chunk-size") == nil)
    }

    @Test func doubleDashEndsOptions() throws {
        let parsed = try ArgumentParser.parse(["--to", "d", "--", "--json", "-w", "--"], for: Self.upload)
        #expect(parsed.positionals == ["--json", "-w", "--"])
        #expect(!parsed.flag("json"))
    }

    @Test func dashAndNegativeNumbersArePositionalsAndValues() throws {
        let parsed = try ArgumentParser.parse(["-", "--priority", "-5", "--to", "-"], for: Self.upload)
        #expect(parsed.positionals == ["-"])
        #expect(parsed.value("priority") == "-5")
        #expect(parsed.value("to") == "-")
        #expect(try parsed.integer("priority", range: -10...10) == -5)
    }

    @Test func repeatableOptionsKeepEveryValueInOrder() throws {
        let parsed = try ArgumentParser.parse(
            ["f", "--to", "d", "--header", "A: 1", "-H", "B: 2", "-HC: 3", "--header=D: 4"],
            for: Self.upload
        )
        #expect(parsed.values("header") == ["A: 1", "B: 2", "C: 3", "D: 4"])
        #expect(parsed.value("header") == "D: 4")
        #expect(parsed.values("to") == ["d"])
        #expect(parsed.values("chunk-size") == [])
    }

    @Test func shortFlagsCluster() throws {
        let parsed = try ArgumentParser.parse(["f", "--to", "d", "-wv"], for: Self.upload)
        #expect(parsed.flag("wait"))
        #expect(parsed.flag("verbose"))
    }

    @Test func valueMayBeEmptyOrContainEquals() throws {
        let parsed = try ArgumentParser.parse(["f", "--to=", "--header=X-A=b"], for: Self.upload)
        #expect(parsed.value("to") == "")
        #expect(parsed.value("header") == "X-A=b")
    }

    @Test func unknownOptionSuggestsByEditDistance() {
        #expect(
            usageMessage { try ArgumentParser.parse(["f", "--to", "d", "--chunksize", "8MiB"], for: Self.upload) }
                == "unknown option --chunksize; did you mean --chunk-size?"
        )
        #expect(
            usageMessage { try ArgumentParser.parse(["--jsno"], for: Self.list) }
                == "unknown option --jsno; did you mean --json?"
        )
        #expect(
            usageMessage { try ArgumentParser.parse(["--hlep"], for: Self.list) }
                == "unknown option --hlep; did you mean --help?"
        )
    }

    @Test func unknownOptionSuggestsByPrefix() {
        #expect(
            usageMessage { try ArgumentParser.parse(["--chunk"], for: Self.upload) }
                == "unknown option --chunk; did you mean --chunk-size?"
        )
    }

    @Test func unknownOptionWithoutAnythingClose() {
        #expect(usageMessage { try ArgumentParser.parse(["--colour"], for: Self.list) } == "unknown option --colour")
        #expect(usageMessage { try ArgumentParser.parse(["-x"], for: Self.list) } == "unknown option -x")
    }

    @Test func singleDashLongNameSuggestsDoubleDash() {
        #expect(
            usageMessage { try ArgumentParser.parse(["-json"], for: Self.list) }
                == "unknown option -json; did you mean --json?"
        )
    }

    @Test func missingValueNamesThePlaceholder() {
        #expect(
            usageMessage { try ArgumentParser.parse(["f", "--to"], for: Self.upload) }
                == "option --to needs a value (DEST)"
        )
        #expect(
            usageMessage { try ArgumentParser.parse(["f", "--to", "--json"], for: Self.upload) }
                == "option --to needs a value (DEST); for a value starting with '-', write --to=DEST"
        )
    }

    @Test func flagGivenAValueIsAnError() {
        #expect(
            usageMessage { try ArgumentParser.parse(["f", "--to", "d", "--json=x"], for: Self.upload) }
                == "option --json does not take a value"
        )
    }

    @Test func nonRepeatableOptionGivenTwice() {
        #expect(
            usageMessage { try ArgumentParser.parse(["f", "--to", "a", "--to=b"], for: Self.upload) }
                == "option --to given more than once"
        )
        #expect(
            usageMessage { try ArgumentParser.parse(["f", "--to", "a", "-w", "--wait"], for: Self.upload) }
                == "option --wait given more than once"
        )
    }

    @Test func missingRequiredOption() {
        #expect(usageMessage { try ArgumentParser.parse(["f"], for: Self.upload) } == "submit upload needs --to DEST")
    }

    @Test func helpWinsOverOtherProblems() throws {
        let cases: [(CommandSpec, [String])] = [
            (Self.show, ["--help"]),
            (Self.show, ["-h"]),
            (Self.show, ["--bogus", "-h"]),
            (Self.show, ["a", "b", "--help"]),
            (Self.upload, ["--to", "--help"]),
        ]
        for (spec, arguments) in cases {
            #expect(try ArgumentParser.parse(arguments, for: spec).wantsHelp, "\(arguments)")
        }
        // After `--`, `--help` is a positional.
        let parsed = try ArgumentParser.parse(["--", "--help"], for: Self.show)
        #expect(!parsed.wantsHelp)
        #expect(parsed.positionals == ["--help"])
    }

    // MARK: Positionals

    @Test func tooFewPositionals() {
        #expect(
            usageMessage { try ArgumentParser.parse(["--to", "d"], for: Self.upload) }
                == "submit upload needs at least one FILE"
        )
        #expect(usageMessage { try ArgumentParser.parse([], for: Self.show) } == "show needs one ID")
        #expect(usageMessage { try ArgumentParser.parse(["a"], for: Self.copy) } == "copy needs one DST")
    }

    @Test func tooManyPositionals() {
        #expect(
            usageMessage { try ArgumentParser.parse(["1", "2"], for: Self.show) }
                == "unexpected argument '2'; usage: trailbook-jobs show ID [options]"
        )
        #expect(
            usageMessage { try ArgumentParser.parse(["x"], for: Self.list) }
                == "unexpected argument 'x'; list takes no arguments"
        )
    }

    @Test func optionalAndUnboundedPositionals() throws {
        #expect(try ArgumentParser.parse([], for: Self.watch).positionals == [])
        #expect(try ArgumentParser.parse(["1", "2", "3"], for: Self.watch).positionals == ["1", "2", "3"])
        #expect(try ArgumentParser.parse(["a", "b", "c"], for: Self.copy).positionals == ["a", "b", "c"])
    }

    // MARK: Typed values

    @Test func typedAccessorsConvertAndNameTheOption() throws {
        let good = try ArgumentParser.parse(
            ["f", "--to", "d", "--chunk-size", "8MiB", "--timeout", "1h30m", "--priority", "3"],
            for: Self.upload
        )
        #expect(try good.size("chunk-size") == 8_388_608)
        #expect(try good.duration("timeout") == 5400)
        #expect(try good.integer("priority", range: 0...10) == 3)
        #expect(try good.size("missing") == nil)
        #expect(try good.duration("missing") == nil)
        #expect(try good.integer("missing", range: 0...1) == nil)

        let bad = try ArgumentParser.parse(
            ["f", "--to", "d", "--chunk-size", "8XB", "--timeout", "-1s", "--priority", "high"],
            for: Self.upload
        )
        #expect(
            usageMessage { try bad.size("chunk-size") }?.hasPrefix("option --chunk-size: '8XB' is not a size") == true)
        #expect(
            usageMessage { try bad.duration("timeout") } == "option --timeout: duration must not be negative, got '-1s'"
        )
        #expect(
            usageMessage { try bad.integer("priority", range: 0...10) }
                == "option --priority needs a whole number, got 'high'")
    }

    @Test func integerOutsideRange() {
        let parsed = ParsedArguments(values: ["priority": ["11"], "huge": ["99999999999999999999999"]])
        #expect(
            usageMessage { try parsed.integer("priority", range: 0...10) }
                == "option --priority must be between 0 and 10, got 11"
        )
        #expect(
            usageMessage { try parsed.integer("huge", range: 0...10) }
                == "option --huge must be between 0 and 10, got 99999999999999999999999"
        )
    }

    // MARK: Commands

    @Test func picksTheLongestMatchingCommand() throws {
        let (spec, rest) = try ArgumentParser.command(
            for: ["submit", "upload", "a.jpg", "--to", "d"], in: Self.commands)
        #expect(spec.path == ["submit", "upload"])
        #expect(rest == ["a.jpg", "--to", "d"])

        let (list, listRest) = try ArgumentParser.command(for: ["list"], in: Self.commands)
        #expect(list.path == ["list"])
        #expect(listRest == [])

        let (photos, _) = try ArgumentParser.command(for: ["photos", "list", "--json"], in: Self.commands)
        #expect(photos.summary == "Lists photos.")
    }

    @Test func unknownCommandSuggestsAndListsCommands() {
        let message = usageMessage { try ArgumentParser.command(for: ["lst"], in: Self.commands) }
        #expect(message?.hasPrefix("unknown command 'lst'; did you mean 'list'?\n\nCommands:\n") == true)
        #expect(message?.contains("\n  submit upload   Uploads files in chunks.\n") == true)
        #expect(message?.contains("\n  photos list     Lists photos.\n") == true)
    }

    @Test func unknownSubcommandSuggestsWithinItsGroup() {
        let message = usageMessage { try ArgumentParser.command(for: ["submit", "uplod", "f"], in: Self.commands) }
        #expect(
            message
                == """
                unknown command 'submit uplod'; did you mean 'submit upload'?

                Commands:
                  submit upload   Uploads files in chunks.
                  submit tag      Adds a keyword to photos.
                  submit autotag  Analyses photos and writes tags.

                """
        )
    }

    /// A command that is also a group (`submit --from F` beside `submit upload`): options go to it, a word after
    /// it is still a subcommand (suggested when mistyped), and the bare group still needs a subcommand.
    @Test func aCommandThatIsAlsoAGroupTakesOnlyOptions() throws {
        let commands = Self.commands + [
            CommandSpec(
                path: ["submit"], summary: "Submits jobs from a file.",
                options: [OptionSpec("from", .value(placeholder: "FILE"), required: true, help: "the file")])
        ]
        let (spec, rest) = try ArgumentParser.command(for: ["submit", "--from", "jobs.ndjson"], in: commands)
        #expect(spec.path == ["submit"])
        #expect(rest == ["--from", "jobs.ndjson"])
        let (upload, _) = try ArgumentParser.command(for: ["submit", "upload", "a.jpg"], in: commands)
        #expect(upload.path == ["submit", "upload"])
        let typo = usageMessage { try ArgumentParser.command(for: ["submit", "uplod", "f"], in: commands) }
        #expect(typo?.hasPrefix("unknown command 'submit uplod'; did you mean 'submit upload'?") == true)
        let bare = usageMessage { try ArgumentParser.command(for: ["submit"], in: commands) }
        #expect(bare?.hasPrefix("'submit' needs a subcommand") == true)
        // Options before the subcommand are named as such, not "unknown option --wait" of the group; a value of
        // the group's own option is no subcommand (`--from upload` is a file named upload).
        let early = usageMessage { try ArgumentParser.command(for: ["submit", "--wait", "upload", "a.jpg"], in: commands) }
        #expect(early == "options go after the subcommand: 'trailbook-jobs submit upload … --wait', not before 'upload'")
        let valued = usageMessage { try ArgumentParser.command(for: ["submit", "--from=x", "--json", "upload", "a"], in: commands) }
        #expect(valued?.hasPrefix("options go after the subcommand: 'trailbook-jobs submit upload … --from'") == true)
        let file = try ArgumentParser.command(for: ["submit", "--from", "upload"], in: commands)
        #expect(file.0.path == ["submit"] && file.1 == ["--from", "upload"])
    }

    @Test func missingCommandAndMissingSubcommand() {
        #expect(
            usageMessage { try ArgumentParser.command(for: [], in: Self.commands) }?.hasPrefix(
                "missing command\n\nCommands:\n  list") == true)
        let message = usageMessage { try ArgumentParser.command(for: ["submit", "--help"], in: Self.commands) }
        #expect(message?.hasPrefix("'submit' needs a subcommand\n\nCommands:\n  submit upload") == true)
        #expect(message?.contains("photos list") == false)
        #expect(
            usageMessage { try ArgumentParser.command(for: ["frobnicate"], in: Self.commands) }?.hasPrefix(
                "unknown command 'frobnicate'\n\n") == true)
    }

    @Test func rootCommandMatchesOnlyOptionsOrNothing() throws {
        let root = CommandSpec(
            path: [], summary: "Runs jobs.", options: [OptionSpec("version", help: "Print the version.")])
        let commands = Self.commands + [root]
        #expect(try ArgumentParser.command(for: ["--help"], in: commands).0.path == [])
        #expect(try ArgumentParser.command(for: [], in: commands).0.path == [])
        #expect(
            usageMessage { try ArgumentParser.command(for: ["lst"], in: commands) }?.hasPrefix("unknown command 'lst'")
                == true)
    }

    // MARK: Help and suggestions

    @Test func helpTextHasUsageSummaryAndAlignedColumns() {
        #expect(
            Self.upload.helpText
                == """
                Usage: trailbook-jobs submit upload FILE… --to DEST [options]

                Uploads files in chunks.

                Arguments:
                  FILE                   A file to upload.

                Options:
                      --to DEST          file:///dir or an http(s):// tus endpoint.
                      --chunk-size SIZE  Bytes per chunk.
                      --timeout DUR      Deadline.
                      --priority N       Higher runs first.
                  -H, --header LINE      Extra HTTP header. (repeatable)
                      --json             Print JSON.
                  -w, --wait             Block until the job ends.
                  -v, --verbose          Say more.
                  -h, --help             Show this help.

                Exit codes: 0 success, 2 usage error.

                """
        )
        #expect(Self.watch.helpText.hasPrefix("Usage: trailbook-jobs watch [ID…] [options]\n"))
    }

    @Test func editDistanceCountsSwapsAsOne() {
        #expect(ArgumentParser.editDistance("list", "list") == 0)
        #expect(ArgumentParser.editDistance("lst", "list") == 1)
        #expect(ArgumentParser.editDistance("lsit", "list") == 1)
        #expect(ArgumentParser.editDistance("", "abc") == 3)
        #expect(ArgumentParser.editDistance("kitten", "sitting") == 3)
        #expect(ArgumentParser.suggestion(for: "x", among: ["to"]) == nil)
        #expect(ArgumentParser.suggestion(for: "ot", among: ["to"]) == "to")
        #expect(ArgumentParser.suggestion(for: "s", among: ["show", "submit"]) == nil)
    }
}
