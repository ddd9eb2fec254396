import TrailbookProtocol

/// `show ID --files`: one page of a job's file list (a folder upload's files with what became of each), through
/// the control protocol's `files` request (`{"op": "files", "job", "state", "after", "limit"}`).
///
/// Text: a line of counts, then one line per file (`POSITION STATE SIZE NAME [CODE: MESSAGE]`), then how to ask
/// for the next page. `--json`: the daemon's reply as is.
enum ShowFiles {
    /// The options that page the list; they need `--files`.
    static let pagingOptions = ["state", "after", "limit"]
    /// The states `--state` takes (the engine's `JobEntryState`).
    static let states = ["pending", "done", "already_there", "failed", "passed_over"]

    /// Runs `show ID --files`.
    /// - Throws: `UsageError` for a bad `--after`/`--limit`; the daemon's `JobError` (`not_found`, `bad_request`,
    ///   `store_error`).
    static func run(_ context: CommandContext) throws -> Int32 {
        let id = context.arguments.positionals[0]
        var request: [String: JSONValue] = ["op": "files", "job": .string(id)]
        if let state = context.arguments.value("state") { request["state"] = .string(state) }
        for name in ["after", "limit"] {
            guard let text = context.arguments.value(name) else { continue }
            guard let number = Int(text) else { throw UsageError("--\(name) takes a whole number, not '\(text)'") }
            request[name] = .number(Double(number))
        }
        let reply = try context.call(.object(request))
        if context.json {
            print(JSONCoding.encodePretty(reply))
            return ExitCode.success
        }
        print(summary(reply))
        for file in reply["files"]?.arrayValue ?? [] { print(line(file)) }
        if let next = reply["next_after"]?.doubleValue {
            let state = context.arguments.value("state").map { " --state \($0)" } ?? ""
            print("more: trailbook-jobs show \(id) --files\(state) --after \(Int(next))")
        }
        return ExitCode.success
    }

    /// "12 files, 3.4 MiB: 10 done, 1 failed, 1 passed_over" (or that the job has no file list).
    static func summary(_ reply: JSONValue) -> String {
        let counts = members(reply["counts"])
        let sizes = members(reply["sizes"])
        guard !counts.isEmpty else { return "no file list (a job of files given one by one keeps none)" }
        let total = counts.values.compactMap(\.doubleValue).reduce(0, +)
        let bytes = sizes.values.compactMap(\.doubleValue).reduce(0, +)
        let parts = counts.sorted { $0.key < $1.key }.map { "\(Int($0.value.doubleValue ?? 0)) \($0.key)" }
        let sealed = reply["sealed"]?.boolValue == false ? " (still being listed)" : ""
        return "\(Int(total)) files, \(ByteCount.format(Int64(bytes))): " + parts.joined(separator: ", ") + sealed
    }

    /// One file: position, state, size, destination name (else its path), and a failure's or skip's reason.
    static func line(_ file: JSONValue) -> String {
        let position = Int(file["position"]?.doubleValue ?? -1)
        let state = file["state"]?.stringValue ?? "?"
        let size = ByteCount.format(Int64(file["size"]?.doubleValue ?? 0))
        let item = file["item"]
        let name = text(item?["name"]) ?? text(item?["path"]) ?? "?"
        var line = "\(position)\t\(state)\t\(size)\t\(name)"
        if state == "failed" || state == "passed_over", let code = file["code"]?.stringValue {
            line += "\t\(code): \(file["message"]?.stringValue ?? "")"
        }
        return line
    }

    private static func members(_ value: JSONValue?) -> [String: JSONValue] {
        if case .object(let members)? = value { return members }
        return [:]
    }

    /// A path's JSON (a string, or `{"base64", "text"}` when not UTF-8) as text.
    private static func text(_ path: JSONValue?) -> String? {
        path?.stringValue ?? path?["text"]?.stringValue
    }
}
