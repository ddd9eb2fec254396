/// The resume policy of one tus upload as a state machine value: events in, the next request out.
///
/// It performs no I/O and reads no clock: the upload job carries out each `Action` with `TusClient` and feeds the
/// outcome back through the matching event method. Policy (tus 1.0 and issue 4):
///
/// - The server's offset rules: every resume starts with `HEAD`, never with what the client hopes it sent.
/// - 409 `offset_mismatch` → `HEAD`, then continue from the server's offset. When the server reports the very
///   offset it just refused, the conflict is persistent: wait (`conflictBackoffMilliseconds`, doubling) before the
///   next `PATCH`. After `maxOffsetMismatches` 409s in a row, fail with `offset_mismatch` (so at most 4 `PATCH`es
///   in all against a server that refuses every one).
/// - 404/410 `gone` → create a new upload and start over, at most `maxRecreates` times; then fail with `gone`.
/// - 460 `checksum_mismatch` → wait, then send the same chunk again, at most `maxChecksumResends` times in a row;
///   then fail with `checksum_mismatch` (at most 4 `PATCH`es of one chunk).
/// - Checksum probe: when the server offers the checksum extension, the first request of each run after the
///   offset is known is a 0-byte `PATCH` with a deliberately wrong `Upload-Checksum`. A server that verifies
///   answers 460 (`checksumVerified` becomes true); one that accepts it does not check what it stores.
/// - Resent bytes are counted when they are handed to the transport (a `PATCH`'s `bytesSent`), not when a
///   `PATCH` is planned, so a request that never left counts nothing.
/// - `too_large`, `unauthorized`, `protocol_error`, `cancelled` → fail at once; no retry storm.
/// - `retryable` (5xx, 423, 429, reset, DNS, TLS, stall, a host held after a 429) → wait, then redo the request;
///   after a failed `PATCH` the redo is a `HEAD`, since part of the chunk may have arrived. The wait is the
///   server's `Retry-After` (capped at `maxRetryAfterMilliseconds`) plus capped exponential backoff with full
///   jitter (issue 11: retries of many jobs must not land together). Failures are given up by elapsed time, not
///   by count: once they have gone on for `giveUpAfterMilliseconds` (24 h by default) since the last request that
///   worked (`failingSince`), → `giveUp`, which the job turns into `failed` with code `unavailable`.
public struct TusUpload: Sendable, Equatable {
    /// Limits of the policy. Defaults are documented with their reason.
    public struct Policy: Sendable, Equatable {
        /// How long retryable failures may go on, in milliseconds since the first of them with no success
        /// between, before giving up. 24 h: an outage of hours is weather to wait out, not a reason to fail.
        public var giveUpAfterMilliseconds: Int64 = 24 * 3_600_000
        /// Ceiling of the backoff in milliseconds before jitter; it doubles per consecutive failure from 500 ms.
        public var baseBackoffMilliseconds = 500
        /// Cap on that ceiling (and on conflict waits) in milliseconds. 60 s: an outage is noticed to be over
        /// within a minute.
        public var maxBackoffMilliseconds = 60_000
        /// Cap on a server's `Retry-After` in milliseconds. 10 min, like `HTTPClient.maxHoldSeconds`.
        public var maxRetryAfterMilliseconds = 600_000
        /// New uploads created after the server lost one (404/410). 1, as issue 4 asks: a second loss is a real
        /// problem to report, not to loop on.
        public var maxRecreates = 1
        /// Resends of one chunk after 460, then `fail`. 3: repeated corruption points at a broken path, not bad
        /// luck, and another attempt would only send the same bytes again.
        public var maxChecksumResends = 3
        /// 409 answers in a row before failing. 3: a `HEAD` should have fixed the first.
        public var maxOffsetMismatches = 3
        /// First wait, in milliseconds, before a `PATCH` that follows a persistent 409 or a 460; it doubles with
        /// each one in a row (500, 1000, 2000 ms), with jitter.
        public var conflictBackoffMilliseconds = 500
        /// The smallest chunk, in bytes, the chunk shrinks to when `PATCH`es are cut off on the way
        /// (`TusChunkSizer`); a configured chunk below it is never shrunk.
        public var minChunkSize = TusChunkSizer.defaultFloor

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
        /// `PATCH` no bytes at `offset` with a wrong `Upload-Checksum` (`TusClient.probeChecksum`); report a 2xx
        /// with `chunkAccepted(_:)`, a 460 or other failure with `failed(_:)`.
        case probeChecksum(url: String, offset: Int64)
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
    /// Bytes per `PATCH` now: the configured size, less if `PATCH`es were cut off on the way (`chunkSizer`).
    public var chunkSize: Int { chunkSizer.size }
    /// Shrinks the chunk when an intermediary cuts large requests off.
    public private(set) var chunkSizer: TusChunkSizer
    /// Bytes per `PATCH` as configured.
    public let configuredChunkSize: Int
    /// The changes of the chunk size so far, oldest first, for the job to announce.
    public private(set) var shrinks: [ChunkShrink] = []

    /// The chunk shrank from `from` to `to` bytes (`TusChunkSizer`).
    public struct ChunkShrink: Sendable, Equatable {
        /// Bytes per `PATCH` before.
        public var from: Int
        /// Bytes per `PATCH` from now on.
        public var to: Int

        /// A change from `from` to `to` bytes per `PATCH`.
        public init(from: Int, to: Int) {
            self.from = from
            self.to = to
        }
    }
    /// The policy's limits.
    public let policy: Policy

    /// The upload URL, once created (or restored from a checkpoint).
    public private(set) var url: String?
    /// Bytes the server has confirmed, from the start of the file. Checkpoint this with `url`.
    public private(set) var confirmedOffset: Int64 = 0
    /// The end of the furthest range ever handed to the transport. Checkpoint it too, so resent bytes are counted
    /// after a crash (before a `PATCH`, checkpoint `sendingThrough`, which covers the bytes it may send).
    public private(set) var sentThrough: Int64 = 0
    /// Bytes sent more than once (resumes, resends, recreations).
    public private(set) var bytesResent: Int64 = 0
    /// The server's `Upload-Expires`, as last reported.
    public private(set) var expires: String?
    /// What this run's checksum probe showed: `true` when the server verifies `Upload-Checksum` (it answered 460
    /// to a wrong one), `false` when it accepted the wrong one (or refused the probe otherwise); `nil` before the
    /// probe and without the checksum extension.
    public private(set) var checksumVerified: Bool?
    /// When the current run of retryable failures began (the caller's clock, in milliseconds; the job uses Unix
    /// time so it can be checkpointed), `nil` while requests work. Checkpoint it, so a restart does not reset
    /// the give-up clock.
    public private(set) var failingSince: Int64?
    /// Whether the server offers the checksum extension (from `discovered(_:)`).
    public private(set) var checksumOffered = false
    /// Offsets the server had confirmed and later reported lower (`HEAD`), as (confirmed, reported), oldest first:
    /// the server lost bytes it had acknowledged. The job logs and announces each.
    public private(set) var regressions: [OffsetRegression] = []

    /// The server reported `reported` bytes after it had confirmed `confirmed` (more).
    public struct OffsetRegression: Sendable, Equatable {
        /// The offset the server had confirmed.
        public var confirmed: Int64
        /// The lower offset it reported later.
        public var reported: Int64

        public init(confirmed: Int64, reported: Int64) {
            self.confirmed = confirmed
            self.reported = reported
        }
    }

    /// The end of the range the request in flight may hand to the transport: the value to checkpoint as
    /// `sent_through` before a `PATCH`, so a crash during it counts those bytes as resent (at most one chunk).
    public var sendingThrough: Int64 {
        if case .send(_, let offset, let count)? = inFlight { return max(sentThrough, offset + Int64(count)) }
        return sentThrough
    }

    private var inFlight: Action?
    private var afterWait: Action?
    private var retries = 0
    private var recreates = 0
    private var checksumResends = 0
    private var offsetMismatches = 0
    /// The offset of the last `PATCH` refused with 409, until the `HEAD` after it answers.
    private var refusedOffset: Int64?
    private var probed = false

    /// A new upload, or one resumed from a checkpoint.
    ///
    /// - Parameters:
    ///   - length: the file's size in bytes.
    ///   - chunkSize: bytes per `PATCH` (more than 0).
    ///   - url: the upload URL from a checkpoint, if any.
    ///   - sentThrough: the checkpoint's `sentThrough`, to count resent bytes after a crash.
    ///   - confirmedOffset: the offset the server had confirmed before (the checkpoint's), so a `HEAD` reporting
    ///     less is noticed (`regressions`).
    ///   - failingSince: the checkpoint's `failingSince`, so failures before a restart count towards giving up.
    public init(
        length: Int64, chunkSize: Int, policy: Policy = Policy(), url: String? = nil, sentThrough: Int64 = 0,
        confirmedOffset: Int64 = 0, failingSince: Int64? = nil
    ) {
        precondition(chunkSize > 0 && length >= 0)
        self.length = length
        self.chunkSizer = TusChunkSizer(size: chunkSize, floor: policy.minChunkSize)
        self.configuredChunkSize = chunkSize
        self.policy = policy
        self.url = url
        self.sentThrough = sentThrough
        self.confirmedOffset = url == nil ? 0 : confirmedOffset
        self.failingSince = failingSince
    }

    /// The first action: `discover` (to learn the size limit and checksum algorithms before anything is sent).
    public mutating func start() -> Action { issue(.discover) }

    /// `OPTIONS` answered. A length above `Tus-Max-Size` fails with `too_large` before any byte is sent; then a
    /// checkpointed upload is resumed from the server's offset, a new one created.
    public mutating func discovered(_ info: TusServerInfo) -> Action {
        recovered()
        checksumOffered = info.checksumAlgorithm != nil
        if let max = info.maxSize, length > max {
            return .fail(TusError(code: .tooLarge, message: "\(length) bytes exceed the server's Tus-Max-Size of \(max)"))
        }
        if let url { return issue(.queryOffset(url: url)) }
        return issue(.create(length: length))
    }

    /// `POST` created the upload at `url`.
    public mutating func created(url: String) -> Action {
        recovered()
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
        switch chunkSizer.offsetReported(status.offset) {
        case .keep: break
        case .shrunk(let from, let to): shrinks.append(ChunkShrink(from: from, to: to))
        case .exhausted(let cuts, let size):
            return .fail(TusError(
                code: .requestCutOff,
                message: "\(cuts) PATCHes of \(size) bytes in a row were cut off mid-body and the server gained "
                    + "nothing, after shrinking the chunk from \(configuredChunkSize) bytes"))
        }
        if status.offset < confirmedOffset { regressions.append(OffsetRegression(confirmed: confirmedOffset, reported: status.offset)) }
        confirmedOffset = status.offset
        expires = status.expires ?? expires
        if let refused = refusedOffset {
            refusedOffset = nil
            if refused == status.offset, let url {
                // The server refuses the offset it reports itself: a persistent conflict. Sending at once again
                // would only be refused again, so wait first.
                afterWait = chunk(url: url)
                return .wait(milliseconds: conflictDelay(offsetMismatches, random: pendingRandom))
            }
        }
        return nextChunk()
    }

    /// `PATCH` was accepted (or the checksum probe was: then the server does not verify checksums); the server's
    /// offset is now `status.offset`.
    public mutating func chunkAccepted(_ status: TusUploadStatus) -> Action {
        if case .probeChecksum? = inFlight {
            probed = true
            checksumVerified = false
        } else {
            handed(bytes: nil)
            chunkSizer.accepted()
            recovered()
            checksumResends = 0
            offsetMismatches = 0
        }
        confirmedOffset = status.offset
        expires = status.expires ?? expires
        return nextChunk()
    }

    /// The `PATCH` in flight was stopped (the job is stopping) after handing `bytesSent` of its bytes to the
    /// transport: counts them, so the checkpoint saved next has an exact `sentThrough`.
    public mutating func stopped(bytesSent: Int64) {
        handed(bytes: bytesSent)
        inFlight = nil
    }

    /// The action in flight failed with `error`.
    ///
    /// - Parameters:
    ///   - now: the time, in milliseconds on the caller's clock (the job passes Unix time), for giving up by
    ///     elapsed time; tests pass a fake clock. With the default 0 the clock never moves: no give-up.
    ///   - random: a number in `0 ..< 1` for the backoff's jitter; tests pass a fixed one.
    public mutating func failed(_ error: TusError, at now: Int64 = 0, random: Double = Double.random(in: 0..<1)) -> Action {
        if case .probeChecksum? = inFlight, error.code != .retryable, error.code != .cancelled,
            error.code != .unauthorized, error.code != .gone
        {
            // 460: the server checked the wrong digest. Anything else (a server that refuses an empty PATCH) says
            // nothing about verification: count it as not verified and go on.
            probed = true
            checksumVerified = error.code == .checksumMismatch
            return nextChunk()
        }
        if case .send(_, let offset, _)? = inFlight {
            handed(bytes: error.bytesSent)
            chunkSizer.patchFailed(at: offset, error)
        }
        pendingRandom = random
        switch error.code {
        case .offsetMismatch:
            offsetMismatches += 1
            var stated = error
            stated.message += "; \(offsetMismatches) PATCHes in a row refused"
            guard offsetMismatches <= policy.maxOffsetMismatches, let url else { return .fail(stated) }
            if case .send(_, let offset, _)? = inFlight { refusedOffset = offset }
            return issue(.queryOffset(url: url))
        case .gone:
            guard recreates < policy.maxRecreates else { return .fail(error) }
            recreates += 1
            url = nil
            confirmedOffset = 0
            return issue(.create(length: length))
        case .checksumMismatch:
            checksumResends += 1
            var stated = error
            stated.message += "; the same chunk was refused \(checksumResends) times in a row"
            guard checksumResends <= policy.maxChecksumResends, case .send? = inFlight else { return .fail(stated) }
            afterWait = inFlight
            return .wait(milliseconds: conflictDelay(checksumResends, random: random))
        case .retryable:
            retries += 1
            let since = failingSince ?? now
            failingSince = since
            let left = policy.giveUpAfterMilliseconds - (now - since)
            guard left > 0 else { return .giveUp(error) }
            switch inFlight {
            case .send(let url, _, _)?: afterWait = .queryOffset(url: url)
            default: afterWait = inFlight ?? .discover
            }
            // Never past the give-up time: one last try then, so the job ends when --give-up-after says.
            let wait = backoff(retryAfter: error.retryAfterMilliseconds, random: random)
            return .wait(milliseconds: Int(min(Int64(wait), left)))
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

    /// The delay before retry number `retries` (1-based): the server's `Retry-After` (capped) as the minimum,
    /// plus "full jitter" over `base · 2^(retries-1)` capped
    /// (https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/), so that the retries of many
    /// jobs spread out even when one `Retry-After` told them all the same time.
    private func backoff(retryAfter: Int?, random: Double) -> Int {
        let exponent = min(retries - 1, 30)
        let ceiling = min(policy.maxBackoffMilliseconds, policy.baseBackoffMilliseconds << exponent)
        let floor = min(max(retryAfter ?? 0, 0), policy.maxRetryAfterMilliseconds)
        return floor + Int(Double(ceiling) * min(max(random, 0), 1))
    }

    /// A request other than `HEAD` worked: a run of retryable failures is over.
    private mutating func recovered() {
        retries = 0
        failingSince = nil
    }

    /// The delay before the `PATCH` that follows the `n`th (1-based) conflict or checksum refusal in a row:
    /// `conflictBackoffMilliseconds · 2^(n-1)`, half of it random.
    private func conflictDelay(_ n: Int, random: Double) -> Int {
        let full = min(policy.maxBackoffMilliseconds, policy.conflictBackoffMilliseconds << min(max(n - 1, 0), 20))
        return full / 2 + Int(Double(full / 2) * min(max(random, 0), 1))
    }

    /// The random number of the last `failed(_:random:)`, for a wait decided by the event after it.
    private var pendingRandom = 0.5

    private mutating func nextChunk() -> Action {
        guard let url else { return issue(.create(length: length)) }
        if confirmedOffset >= length {
            inFlight = nil
            return .succeed(url: url, bytes: length, bytesResent: bytesResent)
        }
        if checksumOffered && !probed { return issue(.probeChecksum(url: url, offset: confirmedOffset)) }
        return issue(chunk(url: url))
    }

    /// The `PATCH` of the next chunk from the confirmed offset (not yet issued).
    private func chunk(url: String) -> Action {
        .send(url: url, offset: confirmedOffset, length: Int(min(Int64(chunkSize), length - confirmedOffset)))
    }

    /// The `PATCH` in flight handed `bytes` of its body to the transport (`nil`: all of it): counts the part
    /// below `sentThrough` as resent and moves `sentThrough`.
    private mutating func handed(bytes: Int64?) {
        guard case .send(_, let offset, let count)? = inFlight else { return }
        let end = offset + min(Int64(count), max(0, bytes ?? Int64(count)))
        bytesResent += max(0, min(sentThrough, end) - offset)
        sentThrough = max(sentThrough, end)
    }

    private mutating func issue(_ action: Action) -> Action {
        inFlight = action
        return action
    }
}
