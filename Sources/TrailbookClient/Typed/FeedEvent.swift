import TrailbookProtocol

/// One event of the daemon's feed (docs/reference/protocol.md, "The feed"), typed.
public struct FeedEvent: Sendable, Equatable {
    /// What happened.
    public enum Payload: Sendable, Equatable {
        /// A job was submitted.
        case submitted
        /// A job moved from `from` (`nil` in a summary of an ended job) to `to`, in `attempt`; `cancellation`,
        /// `error` and `result` when relevant.
        case state(from: JobState?, to: JobState, attempt: Int, cancellation: Cancellation?, error: JobError?, result: JSONValue?)
        /// A job's progress.
        case progress(JobProgress)
        /// A job's log line: its level (`debug`, `info`, `warning`, `error`) and text.
        case log(level: String, message: String)
        /// Events were lost (too old to replay, or the watcher fell behind): read the jobs again (`JobClient.job`).
        case gap(message: String)
        /// An event type this client does not know (a newer daemon), as sent.
        case other(type: String)
    }

    /// The event's number on this daemon (increasing, also across restarts); `nil` for a `gap` or a summary.
    public var seq: Int64?
    /// The job's id (empty for a `gap`).
    public var jobID: String
    /// The job's kind (empty for a `gap`).
    public var kind: String
    /// When, ISO 8601 in UTC (empty for a `gap`).
    public var at: String
    /// What happened.
    public var payload: Payload
    /// The event as sent, for members not typed here.
    public var json: JSONValue

    /// Reads a feed line.
    /// - Throws: `JobClientError.badReply` if it has no `type`.
    public init(json: JSONValue) throws(JobClientError) {
        guard let type = json["type"]?.stringValue else { throw .badReply("a feed line without a type") }
        seq = json["seq"]?.intValue
        jobID = json["job"]?.stringValue ?? ""
        kind = json["kind"]?.stringValue ?? ""
        at = json["at"]?.stringValue ?? ""
        self.json = json
        switch type {
        case "submitted":
            payload = .submitted
        case "state":
            guard let to = json["to"]?.stringValue.flatMap(JobState.init(rawValue:)) else {
                throw .badReply("a state event without a valid 'to'")
            }
            payload = .state(
                from: json["from"]?.stringValue.flatMap(JobState.init(rawValue:)), to: to,
                attempt: Int(json["attempt"]?.intValue ?? 0),
                cancellation: json["cancellation"].flatMap { try? JSONCoding.convert($0, to: Cancellation.self) },
                error: json["error"].flatMap { try? JSONCoding.convert($0, to: JobError.self) },
                result: json["result"].flatMap { $0.isNull ? nil : $0 })
        case "progress":
            guard let progress = json["progress"].flatMap(JobProgress.init(json:)) else {
                throw .badReply("a progress event without a valid progress object")
            }
            payload = .progress(progress)
        case "log":
            payload = .log(level: json["level"]?.stringValue ?? "info", message: json["message"]?.stringValue ?? "")
        case "gap":
            payload = .gap(message: json["message"]?.stringValue ?? "events were lost")
        default:
            payload = .other(type: type)
        }
    }
}
