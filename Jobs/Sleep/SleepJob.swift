import TrailbookEngine

#if canImport(Glibc)
    import Glibc
#endif

/// A job kind for testing the scheduler: counts `units` items, `unit_ms` milliseconds each, with controllable
/// stalls and failures. Registered only when the daemon runs with `TRAILBOOK_JOBS_TEST_KINDS=1`.
///
/// Params: `units` (items to count), `unit_ms` (milliseconds per item), `stall_after` (stop reporting progress
/// after this many items and wait until stopped), `fail_code` (fail with this error code at the end), `stamp` (report
/// the wall-clock time of each progress change, Unix seconds, as `current`, so benchmarks can measure feed latency).
/// Its checkpoint is the number of items done, saved after each item, so it resumes where it stopped.
public struct SleepJob: JobKind {
    /// The params of a `sleep` job (JSON keys in snake case).
    public struct Params: Codable, Sendable {
        /// Items to count.
        public var units: Int64
        /// Milliseconds per item (default 10).
        public var unitMilliseconds: Int64?
        /// Stop reporting progress after this many items (provokes the stall timeout).
        public var stallAfter: Int64?
        /// Fail with this error code at the end.
        public var failCode: String?
        /// Report the wall-clock time of each progress change as `current` (the feed latency benchmark reads it).
        public var stamp: Bool?
        /// Test hook: the daemon stops itself (SIGSTOP) while it checks this job, so a test can line up other
        /// requests behind a batch the daemon has begun (it goes on at SIGCONT).
        public var stopInValidation: Bool?
        /// Test hook: checking this job holds the loop until this file exists (at most 60 s), as a costly check
        /// would; a test shows that the loop answers others between a batch's slices.
        public var holdValidationUntil: String?
        /// Test hook: checking this job holds the loop this many milliseconds (busy), as a costly check would.
        public var validationMilliseconds: Int64?

        /// `units` items of `unitMilliseconds` each (10 ms when `nil`), with no test hooks.
        public init(units: Int64, unitMilliseconds: Int64? = nil) {
            self.units = units
            self.unitMilliseconds = unitMilliseconds
        }

        enum CodingKeys: String, CodingKey {
            case stopInValidation = "stop_in_validation"
            case holdValidationUntil = "hold_validation_until"
            case validationMilliseconds = "validation_ms"
            case units
            case unitMilliseconds = "unit_ms"
            case stallAfter = "stall_after"
            case failCode = "fail_code"
            case stamp
        }
    }

    struct Checkpoint: Codable {
        var done: Int64
    }

    /// `sleep`.
    public static let name = "sleep"
    /// Items; long-running; the daemon loop only.
    public static let traits = JobKindTraits(unit: .items, isLongRunning: true, executionTargets: [.daemonLoop])

    /// The kind (stateless); callable off the loop.
    public nonisolated init() {}

    public func validate(_ params: Params) async throws(JobError) {
        guard params.units >= 0, (params.unitMilliseconds ?? 0) >= 0 else {
            throw JobError(code: "invalid_params", message: "units and unit_ms must not be negative")
        }
        if params.stopInValidation == true { kill(getpid(), SIGSTOP) }
        if let milliseconds = params.validationMilliseconds {
            let end = Timestamp.monotonic() + Double(milliseconds) / 1000
            while Timestamp.monotonic() < end {}
        }
        if let path = params.holdValidationUntil {
            let deadline = Timestamp.monotonic() + 60
            while access(path, F_OK) != 0, Timestamp.monotonic() < deadline { usleep(1_000) }
        }
    }

    public func run(_ params: Params, in job: JobContext) async throws -> JSONValue {
        var done = try job.loadCheckpoint(as: Checkpoint.self)?.done ?? 0
        let resumedAt = done
        job.reportProgress(completed: done, total: params.units)
        while done < params.units {
            if let stall = params.stallAfter, done >= stall {
                try await job.sleep(seconds: 86_400)
            }
            try await job.sleep(seconds: Double(params.unitMilliseconds ?? 10) / 1000)
            done += 1
            try job.saveCheckpoint(Checkpoint(done: done))
            let current = params.stamp == true ? String(Timestamp.now()) : nil
            job.reportProgress(completed: done, total: params.units, current: current)
        }
        if let code = params.failCode { throw JobError(code: code, message: "failed on request (\(code))") }
        return ["units": .number(Double(done)), "resumed_at": .number(Double(resumedAt)), "attempt": .number(Double(job.attempt))]
    }
}
