import TrailbookProtocol

/// Why a `JobClient` request failed.
public enum JobClientError: Error, Sendable, CustomStringConvertible {
    /// The daemon could not be reached or the connection broke; the message says how to start it.
    case unreachable(String)
    /// The daemon answered with an error: its stable code (docs/reference/errors.md) and message.
    case refused(JobError)
    /// The daemon's reply did not have the shape the protocol gives (a different version of the daemon).
    case badReply(String)

    /// What went wrong and what to do.
    public var description: String {
        switch self {
        case .unreachable(let message): message
        case .refused(let error): "\(error.code): \(error.message)"
        case .badReply(let message): "unexpected reply from the daemon: \(message)"
        }
    }
}
