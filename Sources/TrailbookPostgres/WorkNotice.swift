/// What a notice on `PostgresJobQueue.jobsChannel` says became claimable, so that a daemon claims only when it may
/// take some of it: each claim is a round trip, and every daemon hears every notice.
///
/// Payloads: `queue <name>` (jobs of that queue, any host), `queue <name> host <host>` (jobs of that queue pinned
/// to that host). Any other payload (`rescued`, `queued`, or an older daemon's bare queue name) says nothing
/// about where the work may run, and wakes every daemon.
public enum WorkNotice: Equatable, Sendable {
    /// Jobs of `queue` became claimable; when `pinnedHost` is set, only on that host.
    case queued(queue: String, pinnedHost: String?)
    /// Something became claimable somewhere (rescued jobs, or a notice this version does not read).
    case unspecified

    /// The most distinct notices one transaction sends; beyond that one `unspecified` notice is sent instead.
    public static let mostPerTransaction = 16

    /// The notice a payload carries; `unspecified` for anything but the forms above.
    public init(payload: String) {
        let parts = payload.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        switch parts.count {
        case 2 where parts[0] == "queue" && !parts[1].isEmpty:
            self = .queued(queue: parts[1], pinnedHost: nil)
        case 4 where parts[0] == "queue" && !parts[1].isEmpty && parts[2] == "host" && !parts[3].isEmpty:
            self = .queued(queue: parts[1], pinnedHost: parts[3])
        default:
            self = .unspecified
        }
    }

    /// The payload to send (`init(payload:)` reads it back).
    public var payload: String {
        switch self {
        case .queued(let queue, nil): "queue \(queue)"
        case .queued(let queue, let host?): "queue \(queue) host \(host)"
        case .unspecified: "queued"
        }
    }

    /// The `NOTIFY` that sends it on `PostgresJobQueue.jobsChannel` (delivered when its transaction commits).
    public var statement: PostgresStatement {
        PostgresStatement("SELECT pg_notify($1, $2)", [.text(PostgresJobQueue.jobsChannel), .text(payload)])
    }

    /// Whether a daemon claiming from `queues` on host `host` may take some of the work.
    public func concerns(queues: [String], host: String) -> Bool {
        switch self {
        case .queued(let queue, let pinned): queues.contains(queue) && (pinned == nil || pinned == host)
        case .unspecified: true
        }
    }

    /// The notices for jobs of these (queue, pinned host) pairs, each once, in order; one `unspecified` when
    /// there are more than `mostPerTransaction`.
    public static func notices(for jobs: [(queue: String, pinnedHost: String?)]) -> [WorkNotice] {
        var notices: [WorkNotice] = []
        for job in jobs {
            let notice = WorkNotice.queued(queue: job.queue, pinnedHost: job.pinnedHost)
            guard !notices.contains(notice) else { continue }
            guard notices.count < mostPerTransaction else { return [.unspecified] }
            notices.append(notice)
        }
        return notices
    }
}
