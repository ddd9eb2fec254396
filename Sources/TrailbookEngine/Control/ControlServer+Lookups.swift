import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

// Lookups: `ping`, `list`, `show` and `files`, which read and change nothing.
extension ControlServer {
    /// `ping`: this daemon's version, process id, kinds and the feed's last sequence number.
    func pong() -> JSONValue {
        [
            "ok": true, "version": .string(version), "pid": .number(Double(getpid())),
            "kinds": .array(scheduler.kindNames.map { .string($0) }), "feed_seq": .number(Double(scheduler.feed.lastSeq)),
        ]
    }

    /// `list`: the newest `limit` jobs (1 000 unless given, at most 100 000), optionally of `states` and `kind` and
    /// before the `sequence` `before`, with the counts of unfinished jobs by state. One list is built at a time
    /// (`heavyGate`).
    /// - Returns: `ok`, `jobs` and `counts`; `.null` (no reply) if the client went away while it waited its turn.
    /// - Throws: `JobError` `bad_request` for an unknown state or kind, a `limit` below 1 or a `before` below 1;
    ///   the store's read error.
    func list(_ request: JSONValue, on connection: Connection) async throws -> JSONValue {
        let states = try strings(request, "states")?.map { (name: String) throws(JobError) -> JobState in
            guard let state = JobState(rawValue: name) else {
                throw JobError(code: "bad_request", message: "unknown state \(Self.shortText(.string(name)))")
            }
            return state
        }
        let kind = try string(request, "kind")
        if let kind { try checkKinds([kind]) }
        let limit = try wholeNumber(request, "limit") ?? 1_000
        // 0 or less asked for nothing that makes sense (it was quietly read as 1); more than 100 000 is capped.
        guard limit >= 1 else {
            throw JobError(code: "bad_request", message: "\"limit\" must be 1 or more (the newest N jobs), not \(limit)")
        }
        // A page's cursor: the `sequence` of the oldest job of the page before (sequences start at 1).
        let before = try wholeNumber(request, "before")
        if let before, before < 1 {
            throw JobError(
                code: "bad_request",
                message: "\"before\" must be a job's \"sequence\" (1 or more; the oldest job of the page before), "
                    + "not \(before)")
        }
        // One list (or replay) built at a time, in about half the loop's time at most (`TurnGate`): a crowd
        // asking for big lists never stalls the rest.
        await heavyGate.enter()
        let building = Timestamp.monotonic()
        // Twice the build's time: its reply is encoded and written after it, in the same turn.
        defer { heavyGate.leave(pause: 2 * (Timestamp.monotonic() - building)) }
        // A client dropped while it waited (gone, or holding too much unread) gets nothing built.
        guard !connection.pipe.isClosing else { return .null }
        let (jobs, unfinished) = try await scheduler.fetchList(
            states: states, kind: kind, before: before, limit: Int(min(limit, 100_000)))
        // The counts of unfinished jobs in every state, from the scheduler's counters: a summary (`watch`)
        // needs them without loading a million queued jobs. On a shared store, every daemon's (the store's).
        let counts = unfinished.filter { $0.value > 0 }.map { ($0.key.rawValue, JSONValue.number(Double($0.value))) }
        return ["ok": true, "jobs": .array(jobs.map(\.json)), "counts": .object(Dictionary(uniqueKeysWithValues: counts))]
    }

    /// `show`: the job whose id is or starts with `job`.
    /// - Throws: `JobError` `bad_request` without a `job`; `no_such_job`, `ambiguous_id`.
    func show(_ request: JSONValue) async throws -> JSONValue {
        ["ok": true, "job": try await scheduler.fetchJob(try jobID(request, op: "show")).json]
    }

    /// `files`: one page of a job's file list (`show ID --files`; Entries/JobFilesRequest.swift).
    /// - Throws: `JobError`: the request's (`JobFilesRequest`), `no_such_job`, `ambiguous_id`, the store's.
    func files(_ request: JSONValue) async throws -> JSONValue {
        let files = try JobFilesRequest(request)
        return try files.answer(id: try await scheduler.fetchJob(files.job).id, store: scheduler.entryStore)
    }

    /// The `job` member (an id or a prefix of one) a request about one job needs.
    /// - Throws: `JobError` `bad_request` when it is missing or not a string.
    func jobID(_ request: JSONValue, op: String) throws -> String {
        guard let id = try string(request, "job") else {
            throw JobError(code: "bad_request", message: "\(op) needs a \"job\" id")
        }
        return id
    }
}
