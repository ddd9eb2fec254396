/// Defaults and limits of the scheduler, set by the daemon's command line.
public struct SchedulerOptions: Sendable {
    /// Jobs running at once (`--concurrency`, default 4: two cores, jobs mostly waiting on I/O).
    public var concurrency: Int = 4
    /// Default stall timeout in seconds (`--stall-timeout`, default 60 s).
    public var stallTimeoutSeconds: Double = 60
    /// Default deadline in seconds of one attempt (`--timeout`); `nil` uses the kind's (1 h long-running, 30 s).
    public var timeoutSeconds: Double?
    /// Default attempts (`--max-attempts`, default 5).
    public var maxAttempts: Int = 5
    /// Default time a job waits out a service's outage before giving up, in seconds (`--give-up-after`, 24 h).
    public var giveUpAfterSeconds: Double = JobOptions.defaultGiveUpAfterSeconds
    /// Backoff between attempts (`--retry-base`, default 1 s doubling up to 5 min).
    public var backoff = RetryBackoff()
    /// How often a running job's progress is written to the store, in seconds (the feed gets it live).
    public var progressPersistInterval: Double = 1
    /// How long shutdown waits for running jobs to checkpoint, in seconds (the daemon must exit within 2 s).
    public var shutdownGraceSeconds: Double = 1.5
    /// How long after a job's end its clean-up (`JobKind.cleanUp`) is retried before the engine gives up and logs
    /// what was left behind, in seconds (`daemon --cleanup-budget`): 7 days (a server down for a long weekend is
    /// still cleaned up).
    public var cleanUpBudgetSeconds: Double = 7 * 24 * 3600
    /// Longest wait between two tries of a clean-up, in seconds: 10 min (the wait starts at 1 s and doubles).
    public var cleanUpMaxDelaySeconds: Double = 600
    /// How long a submit waits for another process to release the store's write lock before it is refused with
    /// `store_busy`, in seconds (the loop goes on serving meanwhile).
    public var storeLockWaitSeconds: Double = 10
    /// Tests only (`TRAILBOOK_JOBS_TEST_EXIT_AFTER_SUBMIT`, honoured with the test kinds): the daemon exits with
    /// this status right after a submit's commit, before its reply, as a `kill -9` at that moment would.
    public var exitAfterSubmitCommitForTests: Int32?

    /// The wait before each next try of a clean-up: 1 s doubling, at most `cleanUpMaxDelaySeconds`, times a random
    /// factor in [0.5, 1] (the same formula as the retries' `backoff`).
    public var cleanUpBackoff: RetryBackoff { RetryBackoff(baseSeconds: 1, capSeconds: cleanUpMaxDelaySeconds) }

    /// The furthest ahead a retry may be due, in seconds: the backoff's cap. A stored due time further ahead
    /// than this (the wall clock stepped back while the daemon was down) is brought back to it on start.
    public var longestRetryDelaySeconds: Double { backoff.capSeconds }

    /// The defaults described on each property.
    public init() {}
}
