import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Submits with idempotency keys: one job (`submit KIND …`), or a batch (`submit upload … --each`,
/// `submit --from FILE.ndjson`) in one `submit_batch` request, queued all or none.
///
/// Every submit carries a key (`--key`, else a new random one per invocation). When the reply is lost after the
/// request went out (the daemon died between its commit and its answer), the same request, with the same key, is
/// sent again on a new connection: every 0.25 s doubling to 2 s, for up to `retryWindowSeconds`. The daemon
/// answers a known key with the job it already made, so a retried submit never queues a second job.
enum BatchSubmit {
    /// How long a submit whose reply was lost keeps reconnecting to ask again, in seconds.
    static let retryWindowSeconds = 30.0

    /// The key of this invocation: `--key`, or a new random one.
    static func key(_ arguments: ParsedArguments) -> String {
        arguments.value("key") ?? ControlProtocol.newKey()
    }

    /// Sends a submit (or submit_batch) request and returns the daemon's reply, asking again with the same
    /// request (the same keys) when the reply is lost.
    /// - Throws: `ClientError` when the daemon is not reachable at first (nothing was sent), or stays unreachable
    ///   for `retryWindowSeconds` after a lost reply (the message names the key to submit again with).
    static func send(_ request: JSONValue, key: String, _ context: CommandContext) throws -> JSONValue {
        let client = try context.connect()
        let lost: ClientError
        do {
            return try client.request(request)
        } catch {
            lost = error
        }
        CLI.printError("\(lost.message): the daemon may have queued the job; asking again with the same key (\(key)) "
            + "for up to \(Int(retryWindowSeconds)) s")
        let deadline = Timestamp.monotonic() + retryWindowSeconds
        var delay = 0.25
        while Timestamp.monotonic() < deadline {
            usleep(UInt32(min(delay, max(0, deadline - Timestamp.monotonic())) * 1_000_000))
            delay = min(delay * 2, 2)
            guard let reply = try? context.connect().request(request) else { continue }
            // A daemon stopping (SIGTERM) refuses before it looks at the key: ask its successor.
            if reply["error"]?["code"]?.stringValue == "shutting_down" { continue }
            return reply
        }
        throw ClientError(
            message: "lost the daemon's reply to the submit and could not ask again for \(Int(retryWindowSeconds)) s; "
                + "the job may have been queued: once the daemon runs, submit the same again with --key \(key) "
                + "(it returns the job if there is one, else queues it)")
    }

    /// One entry of a batch, with what names it in messages (`b.jpg`, `jobs.ndjson line 7`).
    struct Entry {
        var request: [String: JSONValue]
        var label: String
    }

    /// Submits `entries` as one batch and prints their IDs in order (`--json`: `{"ids", "existing"}`).
    ///
    /// Each entry lacking a key gets `KEY/INDEX` (its index in the batch, from 0); each lacking an option given on
    /// the command line (`--priority`, …) gets it.
    /// - Throws: `UsageError` when the batch is over the daemon's request limit, `DaemonReply` when the daemon
    ///   refuses it (the message names the entry), `ClientError` as `send`.
    static func submit(_ entries: [Entry], _ context: CommandContext) throws -> Int32 {
        let arguments = context.arguments
        guard !arguments.flag("wait"), !arguments.flag("watch") else {
            throw UsageError("--wait and --watch follow one job; follow a batch's jobs with 'trailbook-jobs watch ID…'")
        }
        let key = Self.key(arguments)
        // Entries without their own key get `KEY/INDEX`, which must fit the daemon's 200 bytes: said here, about
        // --key, rather than as a `bad_key` of job 0 for a key the user typed within the limit.
        let longest = key.utf8.count + 1 + String(entries.count - 1).utf8.count
        if longest > 200, entries.contains(where: { $0.request["key"] == nil }) {
            throw UsageError(
                "--key is \(key.utf8.count) characters, and the jobs of this batch get KEY/INDEX (up to "
                    + "/\(entries.count - 1)), over the 200 a key may have; give a --key of at most "
                    + "\(key.utf8.count - (longest - 200)) characters")
        }
        guard case .object(let common) = try Commands.submitOptions(arguments) else { return ExitCode.usage }
        var jobs: [JSONValue] = []
        jobs.reserveCapacity(entries.count)
        for (index, entry) in entries.enumerated() {
            var request = entry.request
            if request["key"] == nil { request["key"] = .string("\(key)/\(index)") }
            if !common.isEmpty {
                switch request["options"] ?? .null {
                case .null: request["options"] = .object(common)
                case .object(let given): request["options"] = .object(given.merging(common) { given, _ in given })
                // Not an object (`"options": "junk"`): sent as it is, so the daemon refuses the line, naming it,
                // instead of the command line's options quietly replacing it.
                default: break
                }
            }
            jobs.append(.object(request))
        }
        let request: JSONValue = ["op": "submit_batch", "jobs": .array(jobs)]
        let size = JSONCoding.encode(request).count
        guard size < ControlProtocol.maxLineBytes else {
            throw UsageError(
                "these \(entries.count) jobs make a request of \(size) bytes, over the daemon's limit of "
                    + "\(ControlProtocol.maxLineBytes); submit them in parts of at most "
                    + "\(max(1, entries.count * ControlProtocol.maxLineBytes / size * 9 / 10)) jobs")
        }
        let reply = try send(request, key: key, context)
        if reply["ok"]?.boolValue != true {
            var error = reply["error"].flatMap { try? JSONCoding.convert($0, to: JobError.self) }
                ?? JobError(code: "bad_reply", message: "unexpected reply from the daemon")
            if let index = reply["error"]?["index"]?.intValue, entries.indices.contains(Int(index)) {
                error.message = "\(entries[Int(index)].label): \(error.message)"
            }
            throw DaemonReply(error: error)
        }
        let ids = reply["ids"]?.arrayValue ?? []
        let existing = reply["existing"]?.arrayValue?.map { $0.boolValue == true } ?? []
        if context.json {
            print(JSONCoding.encodePretty(["ids": .array(ids), "existing": .array(existing.map { .bool($0) })] as JSONValue))
        } else {
            for id in ids { print(id.stringValue ?? "") }
        }
        let known = existing.filter { $0 }.count
        if known > 0 {
            CLI.printError(
                "\(known) of the \(ids.count) jobs had been submitted before with the same key; \(ids.count - known) queued now")
        }
        return ExitCode.success
    }

    /// The entries of an NDJSON file (`-`: standard input): one submit object per line (`kind`, `params`,
    /// `options`, `key`; an `op` of `submit` is allowed), blank lines skipped.
    /// - Throws: `UsageError` naming the line that is not a submit object, or a file that cannot be read.
    static func entries(fromFile path: BytePath) throws -> [Entry] {
        let name = path == "-" ? "standard input" : TerminalText.escape(path.description)
        var bytes = try readAll(path)
        // A UTF-8 byte order mark (Windows editors write one) is not part of the first line's JSON; RFC 8259,
        // section 8.1, lets a parser ignore it.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        var entries: [Entry] = []
        var number = 0
        for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            number += 1
            guard line.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }) else { continue }
            let label = "\(name) line \(number)"
            let value: JSONValue
            do {
                value = try JSONParser.parse(line)
            } catch {
                throw UsageError("\(label) is not JSON: \(error.message)")
            }
            guard case .object(var members) = value, members["kind"]?.stringValue != nil else {
                throw UsageError("\(label) is not a submit object: {\"kind\": …, \"params\": {…}, \"options\": {…}, \"key\": …}")
            }
            if let op = members.removeValue(forKey: "op"), op.stringValue != "submit" {
                throw UsageError("\(label) has op \(String(decoding: JSONCoding.encode(op), as: UTF8.self)); only submit objects go in a batch")
            }
            entries.append(Entry(request: members, label: label))
        }
        guard !entries.isEmpty else { throw UsageError("\(name) holds no jobs (one submit object per line)") }
        return entries
    }

    /// The most a batch file may hold, in bytes: 4 MiB. The batch goes to the daemon as one request line of at
    /// most `ControlProtocol.maxLineBytes` (1 MiB), so a larger file can never be sent; this leaves room for
    /// blank lines and indentation that the request does not carry.
    static let maxFileBytes = 4 * ControlProtocol.maxLineBytes

    /// The whole content of `path` (its exact bytes: the name need not be UTF-8), or of standard input for `-`.
    /// - Throws: `UsageError` when it cannot be read, or holds more than `maxFileBytes`: a regular file that large
    ///   is refused before a byte is read, a stream (`/dev/zero`, a pipe) once that much has come.
    static func readAll(_ path: BytePath) throws(UsageError) -> [UInt8] {
        let name = path == "-" ? "standard input" : TerminalText.escape(path.description)
        let fd = path == "-" ? 0 : path.withCString { open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { throw UsageError("cannot open \(name): \(String(cString: strerror(errno)))") }
        defer { if fd != 0 { close(fd) } }
        func tooLarge(_ what: String) -> UsageError {
            UsageError(
                "\(name) is \(what), over the \(maxFileBytes >> 20) MiB a batch file may hold (the batch goes to the "
                    + "daemon as one request of at most \(ControlProtocol.maxLineBytes >> 20) MiB); split it into "
                    + "several files and submit each")
        }
        var info = stat()
        if fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size > maxFileBytes {
            throw tooLarge("\(info.st_size) bytes")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw UsageError("cannot read \(name): \(String(cString: strerror(errno)))") }
            if n == 0 { return bytes }
            guard bytes.count + n <= maxFileBytes else { throw tooLarge("larger than that (\(bytes.count + n) bytes read)") }
            bytes += chunk[..<n]
        }
    }
}
