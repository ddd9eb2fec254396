import PhotoLibrary
import TrailbookEngine

/// The daemon's default for XMP sidecars (`daemon --xmp [--xmp-naming lightroom]`): jobs that do not say
/// `xmp` themselves follow it.
public struct XMPSidecarDefaults: Sendable {
    /// Whether `tag` and `autotag` write sidecars unless a job says `"xmp": false`.
    public var enabled = false
    /// The naming used unless a job gives `xmp_naming`.
    public var naming: XMPSidecarNaming = .darktable

    /// Defaults: off, darktable naming.
    public init(enabled: Bool = false, naming: XMPSidecarNaming = .darktable) {
        self.enabled = enabled
        self.naming = naming
    }

    /// The naming a job with these params uses, or `nil` when it writes no sidecars.
    func naming(xmp: Bool?, naming: XMPSidecarNaming?) -> XMPSidecarNaming? {
        (xmp ?? enabled) ? (naming ?? self.naming) : nil
    }
}

/// A tagging job's sidecar bookkeeping, kept in its checkpoint.
///
/// Where the writes sit relative to the batch commit: a batch's tag writes and its checkpoint commit first, and the
/// checkpoint lists the batch's sidecar changes as `pending`; then the sidecars are written (on the thread pool),
/// and the next commit clears `pending` with the counts. After a `kill -9` between the commit and the sidecar
/// writes (or in the middle of them) the resumed job writes `pending` again before anything else; a change is a
/// set operation (hold these keywords once, drop those), so a sidecar written twice is the same as once.
struct XMPSidecarTally: Codable {
    /// Sidecars that now hold the change (written, or already holding it).
    var done = 0
    /// Of `done`, those left untouched because they already held the change.
    var unchanged = 0
    /// Sidecars that could not be read or written.
    var failedCount = 0
    /// The first `listLimit` of them.
    var failures: [Failure] = []
    /// The committed batch's changes whose sidecars may not be written yet.
    var pending: [XMPSidecarChange] = []

    /// Paths as bytes: a string in JSON, or `{"base64", "text"}` for a name that is not UTF-8.
    struct Failure: Codable {
        var path: BytePath
        var sidecar: BytePath
        var code: String
        var message: String
    }

    /// How many failures the result lists in full; the count is always exact.
    static let listLimit = 1_000

    /// Writes the pending sidecars on the thread pool and counts the outcomes; `pending` is empty after.
    ///
    /// - Throws: `JobStopped` if the job was stopped while waiting; a failing sidecar is counted, never thrown.
    mutating func writePending(naming: XMPSidecarNaming, in job: JobContext) async throws {
        guard !pending.isEmpty else { return }
        let changes = pending
        let outcomes = try await job.runOnPool { XMPSidecarWriter.apply(changes, naming: naming) }
        for (change, outcome) in zip(changes, outcomes) {
            switch outcome {
            case .written: done += 1
            case .unchanged:
                done += 1
                unchanged += 1
            case .failed(let code, let message):
                failedCount += 1
                if failures.count < Self.listLimit {
                    failures.append(
                        Failure(path: change.path, sidecar: naming.sidecarPath(for: change.path), code: code, message: message))
                }
            }
        }
        pending = []
    }

    /// The result's `xmp` object.
    func result(naming: XMPSidecarNaming) -> JSONValue {
        [
            "naming": .string(naming.rawValue), "sidecars": .number(done), "unchanged": .number(unchanged),
            "failed": .number(failedCount), "failures": JSONCoding.value(of: failures),
        ]
    }
}
