import TrailbookEngine
import TrailbookLoop

/// How long one upload request may go quiet before the upload takes the network for down.
///
/// A network can fall silent without a reset (Wi-Fi gone, a host or firewall dropping packets): the sockets stay
/// open and nothing moves. That is an outage, to be waited out like a server that cannot be reached, not a job
/// that stopped working. The scheduler only sees that the job's progress stopped, and stops it with `timeout`
/// after `--stall-timeout`, using an attempt. So every request's own limits (no byte moved, connect, a bodyless
/// request's total) are kept below the job's stall timeout: the request fails first, as a transport failure,
/// and the upload waits it out (`JobContext.waitOut`, which stops the stall clock and starts it afresh) and
/// counts it towards `--give-up-after`. A job whose own code stops reporting progress is still stopped with
/// `timeout`.
struct NetworkQuietLimit: Equatable {
    /// Seconds with no byte moving before a request is aborted (`HTTPRequest.stallTimeoutSeconds`): half the
    /// job's stall timeout (the request notices within about a second more), at most 60 and at least 1.
    let stallSeconds: Int
    /// Time allowed to connect, in milliseconds: at most 10 s, and within `stallSeconds`.
    let connectMilliseconds: Int
    /// Time allowed for a request without a large body, in milliseconds: at most 30 s, and within `stallSeconds`.
    let requestMilliseconds: Int

    /// The limits for a job whose stall timeout is `stallTimeoutSeconds`.
    init(stallTimeoutSeconds: Double) {
        let stall = max(1, min(60, Int((stallTimeoutSeconds / 2).rounded(.down))))
        stallSeconds = stall
        connectMilliseconds = min(10_000, stall * 1000)
        requestMilliseconds = min(30_000, stall * 1000)
    }

    /// The limits for `job`.
    @LoopActor init(for job: JobContext) { self.init(stallTimeoutSeconds: job.stallTimeoutSeconds) }
}
