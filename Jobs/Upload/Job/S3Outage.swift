import S3Client

/// The waits of one S3 request through an outage: failures with no answer from the endpoint (refused, reset, DNS,
/// TLS, or a network gone silent, which `NetworkQuietLimit` turns into a failure before the job's stall timeout).
///
/// Like the tus upload's: a backoff of 0.5 s doubling to 60 s with jitter in [0.5, 1], given up by elapsed time
/// rather than by count, once the failures have gone on for `--give-up-after` since the first of them (never
/// past it: the last wait ends then, for one last try). In memory: a restart starts the count again.
struct S3Outage {
    /// How long failures may go on before giving up, in seconds.
    let giveUpAfterSeconds: Double
    /// When the first failure of this run of them happened (monotonic seconds), `nil` before one.
    private(set) var since: Double?
    private var failures = 0

    /// Ceiling of the backoff, doubling per failure from `firstBackoff`, in seconds.
    static let firstBackoff = 0.5
    static let maxBackoff = 60.0

    init(giveUpAfterSeconds: Double) { self.giveUpAfterSeconds = giveUpAfterSeconds }

    /// Whether `error` is a failure with no answer from the endpoint (as opposed to a server's error status).
    static func isOutage(_ error: S3Error) -> Bool { error.code == .unavailable && error.status == nil }

    /// A failure at `now` (monotonic seconds).
    /// - Parameter random: a number in `0.5 ... 1` scaling the backoff (jitter); tests pass a fixed one.
    /// - Returns: seconds to wait before the next try, or `nil` when the failures have gone on for
    ///   `giveUpAfterSeconds`.
    mutating func failed(at now: Double, random: Double = Double.random(in: 0.5...1)) -> Double? {
        let start = since ?? now
        since = start
        let left = giveUpAfterSeconds - (now - start)
        guard left > 0 else { return nil }
        failures += 1
        let ceiling = min(Self.maxBackoff, Self.firstBackoff * Double(1 << min(failures - 1, 20)))
        return min(left, ceiling * random)
    }
}
