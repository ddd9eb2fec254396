import TrailbookProtocol

/// A job as the daemon showed it (docs/reference/json.md, "Job"), typed.
public struct JobSnapshot: Sendable, Equatable {
    /// The job's id (a UUID).
    public var id: String
    /// Its kind's name.
    public var kind: String
    /// Its lifecycle state.
    public var state: JobState
    /// The current or last attempt, 1-based (0 before the first start).
    public var attempt: Int
    /// Its progress in its kind's unit.
    public var progress: JobProgress
    /// The stop that put it in its current state (`nil` unless stopped).
    public var cancellation: Cancellation?
    /// The most recent stop, whatever the state.
    public var lastStop: Cancellation?
    /// Why it failed, or `nil`.
    public var error: JobError?
    /// Its result as JSON (`null` until it succeeded); `result(as:)` decodes it.
    public var result: JSONValue
    /// Its idempotency key, if it was submitted with one.
    public var key: String?
    /// The whole job as JSON, for members not typed here.
    public var json: JSONValue

    /// Reads the job JSON the daemon sends.
    /// - Throws: `JobClientError.badReply` if a member is missing or of the wrong type.
    public init(json: JSONValue) throws(JobClientError) {
        guard let id = json["id"]?.stringValue, let kind = json["kind"]?.stringValue,
            let state = json["state"]?.stringValue.flatMap(JobState.init(rawValue:)),
            let attempt = json["attempt"]?.intValue, let progress = json["progress"].flatMap(JobProgress.init(json:))
        else { throw .badReply("not a job: \(String(decoding: JSONCoding.encode(json).prefix(200), as: UTF8.self))") }
        self.id = id
        self.kind = kind
        self.state = state
        self.attempt = Int(attempt)
        self.progress = progress
        cancellation = json["cancellation"].flatMap { try? JSONCoding.convert($0, to: Cancellation.self) }
        lastStop = json["last_stop"].flatMap { try? JSONCoding.convert($0, to: Cancellation.self) }
        error = json["error"].flatMap { try? JSONCoding.convert($0, to: JobError.self) }
        result = json["result"] ?? .null
        key = json["key"]?.stringValue
        self.json = json
    }

    /// The result decoded as the kind's `Output`, or `nil` before the job succeeded.
    /// - Throws: `DecodingError` if it does not have `R`'s shape.
    public func result<R: Decodable>(as type: R.Type) throws -> R? {
        result.isNull ? nil : try JSONCoding.convert(result, to: type)
    }
}
