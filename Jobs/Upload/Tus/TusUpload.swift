/// The resume policy of one tus upload as a state machine value: events in, the next request out.
///
/// It performs no I/O and reads no clock: the upload job carries out each `Action` with `TusClient` and feeds the
/// outcome back through the matching event method. Policy (tus 1.0 and issue 4):
///
/// - The server's offset rules: every resume starts with `HEAD`, never with what the client hopes it sent.
/// - 409 `offset_mismatch` → `HEAD`, then continue from the server's offset (at most `maxOffsetMismatches` in a row).
/// - 404/410 `gone` → create a new upload and start over, at most `maxRecreates` times; then fail with `gone`.
/// - 460 `checksum_mismatch` → send the same chunk again, at most `maxChecksumResends` times in a row.
/// - `too_large`, `unauthorized`, `protocol_error`, `cancelled` → fail at once; no retry storm.
/// - `retryable` (5xx, reset, DNS, TLS, timeout) → wait (exponential backoff with jitter), then redo the request;
///   after a failed `PATCH` the redo is a `HEAD`, since part of the chunk may have arrived. After `maxRetries`
///   failures in a row → `giveUp`, which the job turns into `needs_retry` (reason `timeout`) and keeps the
///   upload for resume.
public struct TusUpload: Sendable, Equatable {
    /// Limits of the policy. Defaults are documented with their reason.
    public struct Policy: Sendable, Equatable {
        /// Consecutive retryable failures before giving up. 5: with the default backoff that is about 15 s of
        /// trying, after which the scheduler's own retry with backoff takes over.
        public var maxRetries = 5
        /// First backoff delay in milliseconds; it doubles per consecutive failure. 500 ms.
        public var baseBackoffMilliseconds = 500
        /// Cap on a backoff delay in milliseconds. 30 s.
        public var maxBackoffMilliseconds = 30_000
        /// New uploads created after the server lost one (404/410). 1, as issue 4 asks: a second loss is a real
        /// problem to report, not to loop on.
        public var maxRecreates = 1
        /// Resends of one chunk after 460. 3: repeated corruption points at a broken path, not bad luck.
        public var maxChecksumResends = 3
        /// 409 answers in a row before giving up. 3: a `HEAD` should have fixed the first.
        public var maxOffsetMismatches = 3

        public init() {}
    }

    /// What to do next.
    public enum Action: Sendable, Equatable {
        /// `OPTIONS`; report with `discovered(_:)`.
        case discover
        /// `POST` an upload of `length` bytes; report with `created(url:)`.
        case create(length: Int64)
        /// `HEAD` the upload; report with `offsetReported(_:)`.
        case queryOffset(url: String)
        /// `PATCH` the file's bytes `offset ..< offset + length`; report with `chunkAccepted(_:)`.
        case send(url: String, offset: Int64, length: Int)
        /// Wait this long, then call `backoffElapsed()`.
        case wait(milliseconds: Int)
        /// Done: the server has every byte.
        case succeed(url: String, bytes: Int64, bytesResent: Int64)
        /// Stop for good with this error (the job's `failed`).
        case fail(TusError)
        /// Retries exhausted for now; keep the upload (url and offset are in the checkpoint) and retry later.
        case giveUp(TusError)
    }

    /// The file's length in bytes.
    public let length: Int64
    /// Bytes per `PATCH`.
    public let chunkSize: Int
    /// The policy's limits.
    public let policy: Policy

    /// The upload URL, once created (or restored from a checkpoint).
    public private(set) var url: String?
    /// Bytes the server has confirmed, from the start of the file. Checkpoint this with `url`.
    public private(set) var confirmedOffset: Int64 = 0
    /// The end of the furthest range ever sent. Checkpoint it too, so resent bytes are counted after a crash.
    public private(set) var sentThrough: Int64 = 0
    /// Bytes sent more than once (resumes, resends, recreations).
    public private(set) var bytesResent: Int64 = 0
    /// The server's `Upload-Expires`, as last reported.
    public private(set) var expires: String?

    private var inFlight: Action?
    private var afterWait: Action?
    private var retries = 0
    private var recreates = 0
    private var checksumResends = 0
    private var offsetMismatches = 0

    /// A new upload, or one resumed from a checkpoint.
    ///
    /// - Parameters:
    ///   - length: the file's size in bytes.
    ///   - chunkSize: bytes per `PATCH` (more than 0).
    ///   - url: the upload URL from a checkpoint, if any.
    ///   - sentThrough: the checkpoint's `sentThrough`, to count resent bytes after a crash.
    public init(length: Int64, chunkSize: Int, policy: Policy = Policy(), url: String? = nil, sentThrough: Int64 = 0) {
        precondition(chunkSize > 0 && length >= 0)
        self.length = length
        self.chunkSize = chunkSize
        self.policy = policy
        self.url = url
        self.sentThrough = sentThrough
    }

    /// The first action: `discover` (to learn the size limit and checksum algorithms before anything is sent).
    public mutating func start() -> Action { issue(.discover) }

    /// `OPTIONS` answered. A length above `Tus-Max-Size` fails with `too_large` before any byte is sent; then a
    /// checkpointed upload is resumed from the server's offset, a new one created.
    public mutating func discovered(_ info: TusServerInfo) -> Action {
        retries = 0
        if let max = info.maxSize, length > max {
            return .fail(TusError(code: .tooLarge, message: "\(length) bytes exceed the server's Tus-Max-Size of \(max)"))
        }
        if let url { return issue(.queryOffset(url: url)) }
        return issue(.create(length: length))
    }

    /// `POST` created the upload at `url`.
    public mutating func created(url: String) -> Action {
        retries = 0
        self.url = url
        confirmedOffset = 0
        return nextChunk()
    }

    /// `HEAD` reported the server's offset: continue from there.
    ///
    /// It does not reset the count of retryable failures: a `HEAD` that works between `PATCH`es that keep failing
    /// (a server answering 503 to every `PATCH`) must not make the retries endless. Only an accepted chunk does.
    public mutating func offsetReported(_ status: TusUploadStatus) -> Action {
        if let serverLength = status.length, serverLength != length {
            return .fail(TusError(
                code: .protocolError, message: "server's Upload-Length \(serverLength) is not the file's \(length)"))
        }
        guard status.offset <= length else {
            return .fail(TusError(code: .protocolError, message: "server's offset \(status.offset) is past the end"))
        }
        confirmedOffset = status.offset
        expires = status.expires ?? expires
        return nextChunk()
    }

    /// `PATCH` was accepted; the server's offset is now `status.offset`.
    public mutating func chunkAccepted(_ status: TusUploadStatus) -> Action {
        retries = 0
        checksumResends = 0
        offsetMismatches = 0
        confirmedOffset = status.offset
        expires = status.expires ?? expires
        return nextChunk()
    }

    /// The action in flight failed with `error`.
    ///
    /// - Parameter random: a number in `0 ..< 1` for the backoff's jitter; tests pass a fixed one.
    public mutating func failed(_ error: TusError, random: Double = Double.random(in: 0..<1)) -> Action {
        switch error.code {
        case .offsetMismatch:
            offsetMismatches += 1
            guard offsetMismatches <= policy.maxOffsetMismatches, let url else { return .giveUp(error) }
            return issue(.queryOffset(url: url))
        case .gone:
            guard recreates < policy.maxRecreates else { return .fail(error) }
            recreates += 1
            url = nil
            confirmedOffset = 0
            return issue(.create(length: length))
        case .checksumMismatch:
            checksumResends += 1
            guard checksumResends <= policy.maxChecksumResends, case .send? = inFlight else { return .giveUp(error) }
            return issue(inFlight!)
        case .retryable:
            retries += 1
            guard retries <= policy.maxRetries else { return .giveUp(error) }
            switch inFlight {
            case .send(let url, _, _)?: afterWait = .queryOffset(url: url)
            default: afterWait = inFlight ?? .discover
            }
            return .wait(milliseconds: backoff(random: random))
        default:
            return .fail(error)
        }
    }

    /// The wait of a `wait` action is over: the request to redo.
    public mutating func backoffElapsed() -> Action {
        let next = afterWait ?? .discover
        afterWait = nil
        return issue(next)
    }

    /// The delay before retry number `retries` (1-based): `base · 2^(retries-1)`, capped, with "equal jitter"
    /// (half fixed, half random) so that many clients do not retry in lockstep.
    private func backoff(random: Double) -> Int {
        let exponent = min(retries - 1, 30)
        let full = min(policy.maxBackoffMilliseconds, policy.baseBackoffMilliseconds << exponent)
        return full / 2 + Int(Double(full / 2) * min(max(random, 0), 1))
    }

    private mutating func nextChunk() -> Action {
        guard let url else { return issue(.create(length: length)) }
        if confirmedOffset >= length {
            inFlight = nil
            return .succeed(url: url, bytes: length, bytesResent: bytesResent)
        }
        let count = Int(min(Int64(chunkSize), length - confirmedOffset))
        return issue(.send(url: url, offset: confirmedOffset, length: count))
    }

    private mutating func issue(_ action: Action) -> Action {
        if case .send(_, let offset, let count) = action {
            let end = offset + Int64(count)
            bytesResent += max(0, min(sentThrough, end) - offset)
            sentThrough = max(sentThrough, end)
        }
        inFlight = action
        return action
    }
}
