/// The exit statuses of `trailbook-jobs` and `trailbook-jobsd`: the one list `--help`, the generated reference
/// (docs/reference/errors.md) and the error code table (`ErrorCodes`) use.
public enum ExitStatus: Int32, CaseIterable, Sendable {
    /// The command did what was asked.
    case success = 0
    /// A job followed with `--wait` or `--watch` ended `failed` or `cancelled`, or the daemon could not do what was
    /// asked (cancel a job that had ended, say), or the daemon could not start.
    case jobFailed = 1
    /// The command line was wrong, or the daemon refused the request's input (a missing file, a bad destination).
    case usage = 2
    /// The daemon is not reachable, or its shared job store (PostgreSQL) is not.
    case daemonUnreachable = 3
    /// No job or photo has that ID (or the prefix matches several).
    case notFound = 4

    /// One line for people, as `--help` and the reference show it.
    public var meaning: String {
        switch self {
        case .success: "success"
        case .jobFailed: "the job ended failed or cancelled (with --wait or --watch), or the daemon could not do it"
        case .usage: "usage error, or input the daemon refused"
        case .daemonUnreachable: "the daemon, or its shared job store, is not reachable"
        case .notFound: "no such job or photo"
        }
    }

    /// `Exit codes: 0 success; 1 …; 4 no such job or photo.`: the line at the end of a command's `--help`.
    public static var summaryLine: String {
        "Exit codes: " + allCases.map { "\($0.rawValue) \($0.meaning)" }.joined(separator: "; ") + "."
    }
}
