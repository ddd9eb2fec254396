import TrailbookLoop

/// The control protocol's `files` request: one page of a job's entry list (a folder upload's files, `JobEntries`),
/// for `show ID --files`.
///
/// Request: `{"op": "files", "job": ID, "state"?: STATE, "after"?: N, "limit"?: N}`: entries past position `after`
/// (default -1, from the first), at most `limit` (1…10 000, default 100), only those in `state` (`pending`,
/// `done`, `already_there`, `failed`, `passed_over`) when given. Reply: `{"ok": true, "job": ID, "files": [entry…],
/// "counts": {STATE: N}, "sizes": {STATE: BYTES}, "sealed": BOOL, "next_after": N|null}` (see `JobEntry.json`;
/// `next_after` is the `after` of the next page, `null` after the last). A job without a list (files given one
/// by one, or a job listed before lists were kept) answers no files and empty counts.
struct JobFilesRequest {
    /// The job id or unique prefix.
    var job: String
    /// Only entries in this state; `nil` for all.
    var state: JobEntryState?
    /// The position the page starts after.
    var after: Int
    /// Most entries in the page.
    var limit: Int

    /// Default `limit`.
    static let defaultLimit = 100

    /// Reads the request's members.
    /// - Throws: `JobError` `bad_request` naming the member that is missing or wrong, and what it takes.
    init(_ request: JSONValue) throws(JobError) {
        guard let job = request["job"]?.stringValue else {
            throw JobError(code: "bad_request", message: "files needs a \"job\" id")
        }
        self.job = job
        if let given = request["state"], !given.isNull {
            guard let name = given.stringValue, let state = JobEntryState(rawValue: name) else {
                throw JobError(
                    code: "bad_request",
                    message: "\"state\" must be one of " + JobEntryState.allCases.map(\.rawValue).joined(separator: ", "))
            }
            self.state = state
        }
        after = try Self.whole(request, "after", in: -1...Int(Int32.max)) ?? -1
        limit = try Self.whole(request, "limit", in: 1...JobEntries.maximumPage) ?? Self.defaultLimit
    }

    private static func whole(_ request: JSONValue, _ key: String, in range: ClosedRange<Int>) throws(JobError) -> Int? {
        guard let given = request[key], !given.isNull else { return nil }
        guard let number = given.doubleValue, number.rounded() == number, range.contains(Int(exactly: number) ?? .min)
        else {
            throw JobError(
                code: "bad_request",
                message: "\"\(key)\" must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return Int(number)
    }

    /// The reply for job `id` from `store`.
    /// - Throws: `JobError` `store_error` (retryable) when the store cannot be read.
    @LoopActor
    func answer(id: String, store: (any JobEntryStoring)?) throws(JobError) -> JSONValue {
        let entries = JobEntries(jobID: id, store: store)
        let page = try entries.page(after: after, limit: limit, state: state)
        let counts = try entries.counts()
        let next: JSONValue = page.count == limit ? page.last.map { .number(Double($0.position)) } ?? .null : .null
        return [
            "ok": true, "job": .string(id), "files": .array(page.map(\.json)),
            "counts": .object(Dictionary(uniqueKeysWithValues: counts.entries.map { ($0.key.rawValue, .number(Double($0.value))) })),
            "sizes": .object(Dictionary(uniqueKeysWithValues: counts.sizes.map { ($0.key.rawValue, .number(Double($0.value))) })),
            "sealed": .bool(counts.sealed), "next_after": next,
        ]
    }
}
