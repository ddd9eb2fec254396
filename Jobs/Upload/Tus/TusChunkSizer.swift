/// The size of a tus upload's `PATCH`es, shrunk when something between the client and the server cuts large
/// requests off.
///
/// A proxy or gateway that buffers each whole request body and drops the connection past some size never lets a
/// byte of a larger `PATCH` reach the server. Every retry is then the same whole-chunk request from the same
/// offset and the upload makes no progress, for as long as `--give-up-after` allows. The sign: a `PATCH` whose
/// connection broke while its body was going out (bytes sent, no answer, not a silent stall), and the `HEAD` after
/// it reports that the server gained nothing. An ordinary reset leaves the bytes that arrived on a tus server, so
/// this is not the same as any dropped connection. After `cutsBeforeShrinking` such `PATCH`es in a row the chunk is
/// quartered, down to `floor`; when `PATCH`es of `floor` bytes are cut off as often, the upload fails
/// (`request_cut_off`). A chunk the server accepts ends the count.
public struct TusChunkSizer: Sendable, Equatable {
    /// Bytes per `PATCH` now.
    public private(set) var size: Int
    /// The smallest chunk it shrinks to: 256 KiB, or the configured chunk size if smaller.
    public let floor: Int
    /// Cut-off `PATCH`es in a row at one size before it shrinks (or, at the floor, gives up).
    public let cutsBeforeShrinking: Int

    /// The offset of the last `PATCH` whose connection broke mid-body, until a `HEAD` tells whether the server
    /// gained anything.
    private var pendingOffset: Int64?
    /// Cut-off `PATCH`es in a row at `size`.
    private var cuts = 0

    /// The default floor, 256 KiB: requests this small pass every proxy limit seen in practice (nginx's default
    /// `client_max_body_size` is 1 MiB).
    public static let defaultFloor = 256 << 10

    /// A sizer starting at `size` bytes per `PATCH`.
    public init(size: Int, floor: Int = TusChunkSizer.defaultFloor, cutsBeforeShrinking: Int = 2) {
        self.size = size
        self.floor = min(size, floor)
        self.cutsBeforeShrinking = cutsBeforeShrinking
    }

    /// What a `HEAD` after a cut-off `PATCH` means for the chunk size.
    public enum Verdict: Sendable, Equatable {
        /// Nothing to change.
        case keep
        /// The chunk shrinks from `from` to `to` bytes.
        case shrunk(from: Int, to: Int)
        /// `PATCH`es of `floor` bytes are cut off too: fail.
        case exhausted(cuts: Int, size: Int)
    }

    /// The `PATCH` at `offset` failed with `error`: remembered when its connection broke while its body was going
    /// out (`TusError.resetWhileSending`, not a stall).
    public mutating func patchFailed(at offset: Int64, _ error: TusError) {
        let stalled = error.transport?.kind == .timedOut
        pendingOffset = error.resetWhileSending && !stalled ? offset : nil
    }

    /// A `HEAD` reported the server's offset `offset`.
    public mutating func offsetReported(_ offset: Int64) -> Verdict {
        guard let pending = pendingOffset else { return .keep }
        pendingOffset = nil
        guard offset <= pending else {
            cuts = 0
            return .keep
        }
        cuts += 1
        guard cuts >= cutsBeforeShrinking else { return .keep }
        guard size > floor else { return .exhausted(cuts: cuts, size: size) }
        let from = size
        size = max(floor, size / 4)
        cuts = 0
        return .shrunk(from: from, to: size)
    }

    /// A `PATCH` was accepted: the count of cut-off ones starts again.
    public mutating func accepted() {
        cuts = 0
        pendingOffset = nil
    }
}
