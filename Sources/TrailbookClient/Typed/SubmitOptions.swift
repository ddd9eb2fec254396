import TrailbookProtocol

/// A submit's `options` (docs/reference/json.md, "Submit object"): every member optional, the daemon's defaults
/// for those not given.
public struct SubmitOptions: Sendable, Equatable {
    /// Higher runs first (default 0).
    public var priority: Int?
    /// Deadline of one attempt, in seconds.
    public var timeoutSeconds: Double?
    /// Stop with `timeout` after no progress for this many seconds.
    public var stallTimeoutSeconds: Double?
    /// Attempts before a retryable failure or a timeout ends the job `failed`.
    public var maxAttempts: Int?
    /// How long the kind keeps waiting out a service's outage, in seconds.
    public var giveUpAfterSeconds: Double?
    /// Queue it even if an unfinished job of the kind works on the same thing.
    public var allowDuplicate: Bool?
    /// The queue, on a shared PostgreSQL store.
    public var queue: String?
    /// The paths are the same on every host (shared store): any host's daemon may run it.
    public var anyHost: Bool?

    /// Options; see the members.
    public init(
        priority: Int? = nil, timeoutSeconds: Double? = nil, stallTimeoutSeconds: Double? = nil, maxAttempts: Int? = nil,
        giveUpAfterSeconds: Double? = nil, allowDuplicate: Bool? = nil, queue: String? = nil, anyHost: Bool? = nil
    ) {
        self.priority = priority
        self.timeoutSeconds = timeoutSeconds
        self.stallTimeoutSeconds = stallTimeoutSeconds
        self.maxAttempts = maxAttempts
        self.giveUpAfterSeconds = giveUpAfterSeconds
        self.allowDuplicate = allowDuplicate
        self.queue = queue
        self.anyHost = anyHost
    }

    /// The protocol's `options` object.
    var json: JSONValue {
        var members: [String: JSONValue] = [:]
        if let priority { members["priority"] = .number(Double(priority)) }
        if let timeoutSeconds { members["timeout_s"] = .number(timeoutSeconds) }
        if let stallTimeoutSeconds { members["stall_timeout_s"] = .number(stallTimeoutSeconds) }
        if let maxAttempts { members["max_attempts"] = .number(Double(maxAttempts)) }
        if let giveUpAfterSeconds { members["give_up_after_s"] = .number(giveUpAfterSeconds) }
        if let allowDuplicate { members["allow_duplicate"] = .bool(allowDuplicate) }
        if let queue { members["queue"] = .string(queue) }
        if let anyHost { members["any_host"] = .bool(anyHost) }
        return .object(members)
    }
}
