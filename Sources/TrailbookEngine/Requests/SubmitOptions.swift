/// Per-submission overrides of the defaults; `nil` takes the daemon's default.
public struct SubmitOptions: Codable, Sendable, Equatable {
    /// Higher runs first; `nil` is 0.
    public var priority: Int?
    /// Deadline of one attempt, in seconds; `nil` takes the daemon's or the kind's default.
    public var timeoutSeconds: Double?
    /// Seconds without progress before the job is stopped with `timeout`; `nil` takes the daemon's default.
    public var stallTimeoutSeconds: Double?
    /// Attempts before failing; `nil` takes the daemon's default.
    public var maxAttempts: Int?
    /// Seconds of a service's outage to wait out before giving up; `nil` takes the daemon's default.
    public var giveUpAfterSeconds: Double?

    /// Options with the given overrides; each left `nil` takes the daemon's (or the kind's) default. Checked when
    /// the job is submitted (`Scheduler.submit` throws `invalid_options` for out-of-range values), not here.
    public init(
        priority: Int? = nil, timeoutSeconds: Double? = nil, stallTimeoutSeconds: Double? = nil, maxAttempts: Int? = nil,
        giveUpAfterSeconds: Double? = nil
    ) {
        self.priority = priority
        self.timeoutSeconds = timeoutSeconds
        self.stallTimeoutSeconds = stallTimeoutSeconds
        self.maxAttempts = maxAttempts
        self.giveUpAfterSeconds = giveUpAfterSeconds
    }

    /// The same JSON keys as `JobOptions`.
    typealias CodingKeys = JobOptions.CodingKeys
}
