import TrailbookLoop
import TrailbookSQLite

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

// Admission: `submit` (one job or a batch): keys, validation, duplicates, the submit's wait for the group commit.
extension Scheduler {
    /// Validates and queues a new job; with `key`, a job already submitted with that key is returned instead.
    ///
    /// - Parameter allowDuplicate: queue it even if an unfinished job of its kind works on the same thing (see
    ///   `JobKind.duplicateKeys`); the protocol's `options.allow_duplicate`. Not stored with the job.
    /// - Parameter key: the idempotency key (see `submit(_:)`).
    /// - Returns: the job as stored (state `queued`), and whether it already existed (found by its key).
    /// - Throws: `JobError` `unknown_kind`, `invalid_params`, `invalid_options`, the kind's own validation codes,
    ///   `duplicate_<kind>`, `bad_key`, `key_reused`, `shutting_down`, `store_write_failed` (the store cannot be
    ///   written: disk full, I/O error), or `store_busy` (another process held the store's lock for
    ///   `storeLockWaitSeconds`).
    public func submit(
        kind name: String, params: JSONValue, options submitted: SubmitOptions, allowDuplicate: Bool = false,
        key: String? = nil
    ) async throws(JobError) -> Submitted {
        try await submit(
            SubmitRequest(kind: name, params: params, options: submitted, allowDuplicate: allowDuplicate, key: key))
    }

    /// `submit(kind:params:options:allowDuplicate:key:)` of one request.
    /// - Throws: `JobError`, as that does.
    public func submit(_ request: SubmitRequest) async throws(JobError) -> Submitted {
        do {
            return try await submit([request])[0]
        } catch {
            throw error.error
        }
    }

    /// Validates and queues many jobs at once (the protocol's `submit_batch`): all of them are stored in one
    /// transaction, or none is.
    ///
    /// An entry with an idempotency `key` already stored is not queued again: its job is returned (marked
    /// `existing`), as long as its request (kind, params, options) is the same; keys are remembered as long as
    /// their job is kept. Entries are checked in order; the first refused one refuses the whole batch.
    /// - Returns: one `Submitted` per entry, in order.
    /// - Throws: `SubmitRefusal`: the index of the entry refused (`nil` when no one entry is to blame: the store,
    ///   a shutdown) and the `JobError` of `submit(kind:params:options:allowDuplicate:key:)`; within the batch,
    ///   a key given twice is `key_reused` and two entries doing the same thing are `duplicate_<kind>`.
    public func submit(_ requests: [SubmitRequest]) async throws(SubmitRefusal) -> [Submitted] {
        try await submit(requests, whenQueued: nil)
    }

    /// `submit(_:)`, calling `whenQueued` once its jobs wait for the group commit (checked, not yet durable): a
    /// control connection then handles its next submit meanwhile, so that pipelined submits share a group
    /// (`ControlServer`'s `OrderedReplies` keeps their replies in order). Not called when the submit ends before.
    func submit(
        _ requests: [SubmitRequest], whenQueued: (@LoopActor () -> Void)?
    ) async throws(SubmitRefusal) -> [Submitted] {
        guard !isShuttingDown else {
            throw SubmitRefusal(index: nil, error: JobError(code: "shutting_down", message: "the daemon is shutting down"))
        }
        var firstIndexOfKey: [String: Int] = [:]
        for (index, request) in requests.enumerated() {
            guard let key = request.key else { continue }
            if let problem = Self.keyProblem(key) {
                throw SubmitRefusal(index: index, error: JobError(code: "bad_key", message: problem))
            }
            if let earlier = firstIndexOfKey[key] {
                throw SubmitRefusal(
                    index: index,
                    error: JobError(
                        code: "key_reused",
                        message: "job \(index) of the batch has the same key as job \(earlier) ('\(key)'); give each job its own key"))
            }
            firstIndexOfKey[key] = index
        }
        // One submit per key at a time: a retry that arrives while the first try is still being validated waits
        // for it and then finds its job, instead of both passing the lookup and queueing two.
        let keys = Set(firstIndexOfKey.keys)
        await admission.hold(keys)
        defer { admission.release(keys) }

        var results: [Submitted?] = Array(repeating: nil, count: requests.count)
        // `keys`: what the job works on (`JobKind.duplicateKeys`, from the decoding that validates its params).
        var fresh: [(index: Int, job: JobRecord, digest: String?, keys: [String])] = []
        // What each entry does is claimed once it passes the check, until this submit is answered: entries after
        // it, here or in submits checked meanwhile (this one lets the loop run), are refused as its duplicates.
        let submit = admission.beginSubmit()
        var stored = false
        defer { admission.claims.release(submit: submit, stored: stored) }
        // A big batch is checked in slices of `LoopSlice.seconds`, so the loop answers other clients and runs jobs
        // in between (issue 14: 3 600 entries held it for 3.7 s); a batch checked within one slice takes no turn.
        var slice = LoopSlice()
        for (index, request) in requests.enumerated() {
            if index > 0, await slice.pause() {
                guard !isShuttingDown else {
                    throw SubmitRefusal(index: nil, error: JobError(code: "shutting_down", message: "the daemon is shutting down"))
                }
            }
            let digest = request.key.map { _ in request.digest }
            if let key = request.key, let known = try await lookUp(key: key, index: index) {
                guard known.digest == digest else {
                    throw SubmitRefusal(
                        index: index,
                        error: JobError(
                            code: "key_reused",
                            message: "key '\(key)' was used for job \(known.job.id) (\(known.job.kind)) with different "
                                + "params or options; use a new key for a new job"))
                }
                results[index] = Submitted(job: current(known.job.id, stored: known.job) ?? known.job, existing: true)
                continue
            }
            do throws(JobError) {
                let (job, kind, keys) = try await prepare(request)
                if !request.allowDuplicate {
                    try await refuseDuplicate(of: keys, kind: kind, submit: submit)
                }
                admission.claims.claim(keys, kind: kind.name, by: SubmitClaims.Holder(jobID: job.id, submit: submit, index: index))
                fresh.append((index, job, digest, keys))
            } catch {
                throw SubmitRefusal(index: index, error: error)
            }
        }
        guard !fresh.isEmpty else { return results.map { $0! } }
        // Written with the loop turn's group commit (see `commitGroup`), which announces the jobs; answered after it.
        guard !isShuttingDown else {
            throw SubmitRefusal(index: nil, error: JobError(code: "shutting_down", message: "the daemon is shutting down"))
        }
        let ticket = SubmitTicket()
        groupCommit.queue(GroupCommit.PendingSubmit(
            jobs: fresh.map(\.job), digests: fresh.map(\.digest),
            duplicateKeys: fresh.map(\.keys), reply: ticket))
        armGroupCommit()
        whenQueued?()
        let jobs: [JobRecord]
        do {
            jobs = try await ticket.jobs()
        } catch {
            throw SubmitRefusal(index: nil, error: error)
        }
        stored = true
        if let hook = options.exitAfterSubmitCommitForTests {
            // Test hook (TRAILBOOK_JOBS_TEST_EXIT_AFTER_SUBMIT): die as a kill would, after the commit and before
            // the reply, so tests can show that a retried key finds the job.
            DaemonLog.write("test hook: exiting with status \(hook) after committing a submit, before its reply")
            DaemonLog.flush()
            _exit(hook)
        }
        // As stored: the store gave them back with their sequence numbers and timestamps (no read of each).
        for (job, entry) in zip(jobs, fresh) { results[entry.index] = Submitted(job: job, existing: false) }
        return results.map { $0! }
    }

    /// What is wrong with an idempotency key, or `nil`: 1 to 200 bytes of printable ASCII.
    static func keyProblem(_ key: String) -> String? {
        let bytes = Array(key.utf8)
        guard !bytes.isEmpty, bytes.count <= 200, bytes.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            return "an idempotency key is 1 to 200 printable ASCII characters without spaces (a UUID will do)"
        }
        return nil
    }

    /// The job stored with idempotency key `key`, and its request's digest; read without holding the loop from a
    /// shared store (`JobQuery.idempotencyKey`).
    private func lookUp(key: String, index: Int) async throws(SubmitRefusal) -> (job: JobRecord, digest: String?)? {
        let found = await answer(.idempotencyKey(key)) { reading in reading.jobs.first.map { ($0, reading.submitDigest) } }
        switch found {
        case .success(let known): return known
        case .failure(let error):
            let refusal = StoreRefusal(error)
            throw SubmitRefusal(
                index: nil,
                error: JobError(
                    code: refusal.readErrorCode,
                    message: "cannot look up the key of job \(index): \(refusal.cause) (\(refusal)); submit again"))
        }
    }

    /// A new job record for `request`, its options resolved and its params validated by its kind, with what the job
    /// works on (`JobKind.duplicateKeys`, from the same decoding of its params).
    func prepare(_ request: SubmitRequest) async throws(JobError) -> (JobRecord, AnyJobKind, keys: [String]) {
        guard let kind = kinds[request.kind] else {
            throw JobError(
                code: "unknown_kind",
                message: "unknown job kind '\(request.kind)'; known: \(kindNames.joined(separator: ", "))")
        }
        let submitted = request.options
        let jobOptions = JobOptions(
            priority: submitted.priority ?? 0,
            timeoutSeconds: submitted.timeoutSeconds ?? options.timeoutSeconds ?? kind.traits.defaultTimeoutSeconds,
            stallTimeoutSeconds: submitted.stallTimeoutSeconds ?? options.stallTimeoutSeconds,
            maxAttempts: submitted.maxAttempts ?? options.maxAttempts,
            giveUpAfterSeconds: submitted.giveUpAfterSeconds ?? options.giveUpAfterSeconds)
        let longest = ControlProtocol.longestTimeoutSeconds
        guard jobOptions.timeoutSeconds > 0, jobOptions.timeoutSeconds <= longest, jobOptions.stallTimeoutSeconds > 0,
            jobOptions.stallTimeoutSeconds <= longest, jobOptions.maxAttempts >= 1, jobOptions.maxAttempts <= 1_000,
            jobOptions.giveUpAfterSeconds > 0, jobOptions.giveUpAfterSeconds <= longest,
            abs(jobOptions.priority) <= 1_000_000
        else {
            throw JobError(
                code: "invalid_options",
                message: "timeouts must be more than 0 and at most \(Int(longest)) s (a year), max_attempts between 1 "
                    + "and 1000, priority within ±1000000")
        }
        if let queue = request.queue {
            if let problem = ControlProtocol.queueNameProblem(queue) {
                throw JobError(code: "invalid_options", message: "options.queue: \(problem)")
            }
            guard dispatcher.acceptsQueues || queue == JobRecord.defaultQueue else {
                throw JobError(
                    code: "invalid_options",
                    message: "queue '\(queue)': this daemon's SQLite store has only the '\(JobRecord.defaultQueue)' queue; "
                        + "queues are for daemons sharing a PostgreSQL store (daemon --store postgres://… --queues …)")
            }
        }
        let keys = try await kind.validate(request.params)
        let now = Timestamp.nowISO8601()
        var job = JobRecord(
            id: UUID.random(), kind: request.kind, state: .queued, options: jobOptions, attempt: 0,
            progress: JobProgress(unit: kind.traits.unit), cancellation: nil, error: nil, createdAt: now,
            updatedAt: now, params: request.params, result: .null, retryAt: nil, sequence: 0, key: request.key)
        job.queue = request.queue ?? JobRecord.defaultQueue
        // The one place pinning is decided: a kind that reads this host's files, on a store other hosts share.
        if let host = dispatcher.pinningHost, kind.traits.readsHostFiles, !request.anyHost { job.pinnedHost = host }
        return (job, kind, keys)
    }

    /// Announces a job the store has just taken.
    func submitted(_ job: JobRecord) {
        activeCounts[.queued, default: 0] += 1
        feed.submitted(job)
        DaemonLog.write("job \(job.id.prefix(8)) \(job.kind) submitted (priority \(job.options.priority))")
    }

    /// Throws `duplicate_<kind>` when a job of `kind` that has not ended shares one of `newKeys` (its
    /// `duplicateKeys`; issue 11: a second submit of the same file to the same place would upload it twice):
    /// a job of a submit under way here (`Admission.claims`; `submit` is the asking one, whose own earlier entries
    /// are named by index), or one the store holds, found by an indexed lookup (`JobQuery.unfinished`), read
    /// without holding the loop from a shared store.
    /// - Throws: also `store_unavailable`, `store_busy` or `store_error` when the store cannot be read.
    func refuseDuplicate(of newKeys: [String], kind: AnyJobKind, submit: Int) async throws(JobError) {
        guard !newKeys.isEmpty else { return }
        try refuseClaimed(newKeys, kind: kind.name, submit: submit)
        let keys = Set(newKeys)
        // Claims of submits stored while the read is answered are kept until it ends: seen after it.
        let read = admission.claims.beginRead()
        defer { admission.claims.endRead(read) }
        let found = await answer(.unfinished(sharing: Array(keys), kind: kind.name), \.jobs)
        let active: [JobRecord]
        switch found {
        case .success(let jobs): active = jobs
        case .failure(let error):
            let refusal = StoreRefusal(error)
            throw JobError(
                code: refusal.readErrorCode,
                message: "cannot look for duplicate jobs: \(refusal.cause) (\(refusal)); submit again")
        }
        try refuseClaimed(newKeys, kind: kind.name, submit: submit)
        // A job whose end the store has not taken yet is over all the same.
        for job in active where !((pendingWrites.record(job.id) ?? groupCommit.endRecords[job.id])?.state.isTerminal ?? false) {
            guard let key = kind.duplicateKeys(job.params).first(where: keys.contains) else { continue }
            let state = ((running[job.id].map(live) ?? pendingWrites.record(job.id)) ?? job).state
            throw JobError(
                code: "duplicate_\(kind.name)",
                message: "job \(job.id) (\(state.rawValue)) is already doing the same: \(key); wait for it or cancel it, or "
                    + "submit again with --allow-duplicate")
        }
    }

    /// Throws `duplicate_<kind>` when a submit under way here claims one of `keys` (see `refuseDuplicate`).
    private func refuseClaimed(_ keys: [String], kind: String, submit: Int) throws(JobError) {
        guard let (holder, key) = admission.claims.holder(of: keys, kind: kind) else { return }
        if holder.submit == submit {
            throw JobError(
                code: "duplicate_\(kind)",
                message: "job \(holder.index) of the batch already does the same: \(key); submit it once, or with --allow-duplicate")
        }
        throw JobError(
            code: "duplicate_\(kind)",
            message: "job \(holder.jobID) (queued) is already doing the same: \(key); wait for it or cancel it, or "
                + "submit again with --allow-duplicate")
    }
}
