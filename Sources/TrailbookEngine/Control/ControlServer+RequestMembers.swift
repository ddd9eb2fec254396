import TrailbookLoop

// Reading a request's members: typed look-ups whose errors name the member, the members each op takes, submit
// objects, and the error reply lines.
extension ControlServer {
    /// The error reply for a request line the parser refused.
    static func refusal(_ failure: JSONParser.Failure) -> JobError {
        switch failure.kind {
        case .syntax:
            return JobError(code: "bad_request", message: "request is not valid JSON: \(failure.message)")
        case .duplicateKey:
            return JobError(code: "duplicate_key", message: "request is ambiguous: \(failure.message); send each key once")
        case .limit:
            return JobError(code: "request_too_large", message: "request is too large: \(failure.message)")
        }
    }

    /// The member `key` of `request`, or `nil` when it is absent or `null`.
    /// - Throws: `bad_request` naming the member and the expected type when it is something else.
    func member<T>(_ request: JSONValue, _ key: String, _ expected: String, _ extract: (JSONValue) -> T?)
        throws(JobError) -> T?
    {
        guard let value = request[key], !value.isNull else { return nil }
        guard let typed = extract(value) else {
            throw JobError(code: "bad_request", message: "\"\(key)\" must be \(expected), got \(Self.shortText(value))")
        }
        return typed
    }

    func string(_ request: JSONValue, _ key: String) throws(JobError) -> String? {
        try member(request, key, "a string", \.stringValue)
    }

    func strings(_ request: JSONValue, _ key: String) throws(JobError) -> [String]? {
        try member(request, key, "an array of strings") { value in
            value.arrayValue.flatMap { elements in
                let strings = elements.compactMap(\.stringValue)
                return strings.count == elements.count ? strings : nil
            }
        }
    }

    func bool(_ request: JSONValue, _ key: String) throws(JobError) -> Bool? {
        try member(request, key, "true or false", \.boolValue)
    }

    func wholeNumber(_ request: JSONValue, _ key: String) throws(JobError) -> Int64? {
        try member(request, key, "a whole number", \.intValue)
    }

    /// A value for an error message: its JSON, cut at 64 bytes.
    static func shortText(_ value: JSONValue) -> String {
        let text = String(decoding: JSONCoding.encode(value), as: UTF8.self)
        return text.count > 64 ? String(text.prefix(64)) + "…" : text
    }

    /// The members each op takes. Any other is refused (`refuseUnknownMembers`): a misspelt one (`optoins`,
    /// `limt`) would otherwise be ignored, and the request done without what it asked for.
    static let knownMembers: [String: [String]] = [
        "ping": ["op"], "submit": ["op"] + submitMembers, "submit_batch": ["op", "jobs"],
        "list": ["op", "states", "kind", "limit", "before"], "show": ["op", "job"], "cancel": ["op", "job"],
        "pause": ["op", "job"], "resume": ["op", "job", "headers"], "prune": ["op", "older_than_s"],
        "watch": ["op", "since", "jobs", "kinds", "local"],
    ]
    /// The members of a submit object (a `submit` without its `op`, or a `submit_batch` entry).
    static let submitMembers = ["kind", "params", "options", "key"]
    /// The members of a submit's `options`: `SubmitOptions`' keys, `allow_duplicate`, `queue` and `any_host`.
    static let optionMembers = JobOptions.CodingKeys.allCases.map(\.rawValue) + ["allow_duplicate", "queue", "any_host"]

    /// Throws `code` (`bad_request` unless given) naming the first member of `object` (in key order) that is not
    /// in `known`, and the known ones, e.g. `unknown member "optoins" in submit; known: kind, params, options, key`.
    static func refuseUnknownMembers(
        of object: JSONValue, known: [String], in what: String, code: String = "bad_request"
    ) throws(JobError) {
        guard case .object(let members) = object,
            let unknown = members.keys.filter({ !known.contains($0) }).min()
        else { return }
        throw JobError(
            code: code,
            message: "unknown member \(shortText(.string(unknown))) in \(what); known: \(known.joined(separator: ", "))")
    }

    /// A `submit` request, or one job of a `submit_batch`: `kind`, `params`, `options`, `key`.
    /// - Throws: `bad_request` for a member of the wrong type or an unknown one, `invalid_options` for bad
    ///   options (an unknown option too).
    func submitRequest(_ request: JSONValue, op: String) throws(JobError) -> SubmitRequest {
        guard case .object = request else {
            throw JobError(code: "bad_request", message: "\(op) is a JSON object with a \"kind\"")
        }
        // A `submit`'s own members were checked with its op's.
        if op != "submit" { try Self.refuseUnknownMembers(of: request, known: Self.submitMembers, in: op) }
        guard let kind = try string(request, "kind") else {
            throw JobError(code: "bad_request", message: "\(op) needs a \"kind\" string")
        }
        let params = try member(request, "params", "an object") { value -> JSONValue? in
            if case .object = value { return value } else { return nil }
        }
        let optionsObject = try member(request, "options", "an object") { value -> JSONValue? in
            if case .object = value { return value } else { return nil }
        }
        if let optionsObject {
            try Self.refuseUnknownMembers(of: optionsObject, known: Self.optionMembers, in: "options", code: "invalid_options")
        }
        for key in ["priority", "max_attempts"] {
            if let value = optionsObject?[key], !value.isNull,
                value.intValue.map({ abs($0) > 1_000_000_000 }) ?? true
            {
                let text = String(decoding: JSONCoding.encode(value), as: UTF8.self)
                throw JobError(code: "invalid_options", message: "options.\(key) must be a whole number, got \(text)")
            }
        }
        let options: SubmitOptions
        do {
            options = try JSONCoding.convert(optionsObject ?? [:], to: SubmitOptions.self)
        } catch {
            throw JobError(code: "invalid_options", message: "bad options: \(JSONCoding.describe(error))")
        }
        let allowDuplicate = optionsObject?["allow_duplicate"] ?? .null
        guard allowDuplicate.isNull || allowDuplicate.boolValue != nil else {
            throw JobError(code: "invalid_options", message: "options.allow_duplicate must be true or false")
        }
        let anyHost = optionsObject?["any_host"] ?? .null
        guard anyHost.isNull || anyHost.boolValue != nil else {
            throw JobError(code: "invalid_options", message: "options.any_host must be true or false")
        }
        let queue = optionsObject?["queue"] ?? .null
        guard queue.isNull || queue.stringValue != nil else {
            throw JobError(code: "invalid_options", message: "options.queue must be a string (a queue name)")
        }
        return SubmitRequest(
            kind: kind, params: params ?? [:], options: options, allowDuplicate: allowDuplicate.boolValue ?? false,
            key: try string(request, "key"), queue: queue.stringValue, anyHost: anyHost.boolValue ?? false)
    }

    /// A refused batch as one error: the entry's code, its index in `index` and at the start of the message.
    static func batchError(_ refusal: SubmitRefusal) -> BatchError {
        guard let index = refusal.index else { return BatchError(error: refusal.error, index: nil) }
        var error = refusal.error
        error.message = "job \(index) of the batch (from 0): \(error.message); nothing was queued"
        return BatchError(error: error, index: index)
    }

    /// An error reply that names the refused entry of a batch: `{"ok": false, "error": {"code", "message",
    /// "index"}}`.
    struct BatchError: Error {
        var error: JobError
        var index: Int?
    }

    /// Refuses a filter naming a job kind this daemon does not have (a typo would otherwise match nothing, silently).
    func checkKinds(_ kinds: some Collection<String>) throws(JobError) {
        for kind in kinds where !scheduler.kindNames.contains(kind) {
            throw JobError(
                code: "unknown_kind",
                message: "unknown job kind '\(kind)'; known: \(scheduler.kindNames.joined(separator: ", "))")
        }
    }

    /// An error reply line; URLs in the message are shown without their secrets (`JobError.redacted`).
    static func errorLine(_ error: JobError, index: Int? = nil) -> [UInt8] {
        var object = JSONCoding.value(of: error.redacted)
        if let index, case .object(var members) = object {
            members["index"] = .number(Double(index))
            object = .object(members)
        }
        return JSONCoding.encode(["ok": false, "error": object] as JSONValue) + [0x0A]
    }
}
