import Foundation
import TrailbookPostgres

extension PostgresJobStore {
    /// One statement inserting every job of `jobs` (`digests`: their request digests), set-based: one array a
    /// column (`unnest`), rows made in `jobs`' order so that their `sequence` follows it. Returns a row
    /// `id, sequence, created_at` per job.
    static func insertStatement(_ jobs: [JobRecord], digests: [String?]) -> PostgresStatement {
        let digests = jobs.indices.map { $0 < digests.count ? digests[$0] : nil }
        func column(_ value: (JobRecord) -> PostgresValue) -> PostgresValue { .array(jobs.map(value)) }
        return PostgresStatement(
            """
            INSERT INTO trailbook_jobs (id, kind, state, priority, timeout_s, stall_timeout_s, max_attempts, attempt,
                params, progress, created_at, updated_at, give_up_after_s, idempotency_key, submit_digest, queue,
                pinned_host)
            SELECT id, kind, state, priority, timeout_s, stall_timeout_s, max_attempts, attempt, params, progress,
                \(DatabaseClock.now), \(DatabaseClock.now), give_up_after_s, idempotency_key, submit_digest, queue,
                pinned_host
            FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::float8[], $6::float8[], $7::integer[],
                $8::integer[], $9::text[], $10::text[], $11::float8[], $12::text[], $13::text[], $14::text[],
                $15::text[])
                WITH ORDINALITY AS new(id, kind, state, priority, timeout_s, stall_timeout_s, max_attempts, attempt,
                    params, progress, give_up_after_s, idempotency_key, submit_digest, queue, pinned_host, ord)
            ORDER BY ord
            RETURNING id, sequence, created_at
            """,
            [
                column { .text($0.id) }, column { .text($0.kind) }, column { .text($0.state.rawValue) },
                column { .integer(Int64($0.options.priority)) }, column { .double($0.options.timeoutSeconds) },
                column { .double($0.options.stallTimeoutSeconds) }, column { .integer(Int64($0.options.maxAttempts)) },
                column { .integer(Int64($0.attempt)) }, column { .text(JobStore.text($0.params)) },
                column { .text($0.progress.jsonText) }, column { .double($0.options.giveUpAfterSeconds) },
                column { $0.key.map { .text($0) } ?? .null }, .array(digests.map { $0.map { .text($0) } ?? .null }),
                column { .text($0.queue) }, column { $0.pinnedHost.map { .text($0) } ?? .null },
            ])
    }

    /// One statement recording the duplicate keys of every job of `jobs` (`keys[i]` are `jobs[i]`'s), or `nil`
    /// when there is none.
    static func duplicateKeysStatement(_ jobs: [JobRecord], _ keys: [[String]]) -> PostgresStatement? {
        var pairs: [(key: String, id: String)] = []
        for (job, jobKeys) in zip(jobs, keys) { pairs += Set(jobKeys).sorted().map { ($0, job.id) } }
        guard !pairs.isEmpty else { return nil }
        return PostgresStatement(
            """
            INSERT INTO trailbook_duplicate_keys (key, job_id) SELECT * FROM unnest($1::text[], $2::text[])
            ON CONFLICT DO NOTHING
            """, [.textArray(pairs.map(\.key)), .textArray(pairs.map(\.id))])
    }

    /// A lifecycle write, fenced: a job this daemon holds the lease of is written only while that lease holds (and
    /// the lease is released when the run is over); any other job only while it waits (`queued`, `paused`,
    /// `needs_retry`): not while another daemon runs it, nor once it ended (a cancel read the job queued, and
    /// another daemon ran it to its end before the cancel's write). An end drops the
    /// job's duplicate keys, and `addingCleanUp` records its clean-up, only if the write itself happened.
    ///
    /// A run's write out of `running` also records the run's lease token (`end_token`): the same write tried again
    /// (its first answer was lost, past the request timeout or in a cut) finds that it landed, and counts as
    /// written without writing anything again, where another daemon's end of the job fences it off. Its result
    /// has one row when written (now or by that earlier try), none when fenced off. Times are the database's
    /// (`DatabaseClock`).
    func writeStatement(_ job: JobRecord, addingCleanUp: Bool) -> PostgresStatement {
        let token = fenceToken(of: job.id)
        let releases = job.state != .running
        let fence =
            token != nil
            ? "lease_token = $10::bigint AND state = 'running'"
            : "lease_token IS NULL AND state IN ('queued', 'paused', 'needs_retry') AND $10::bigint IS NULL"
        let release =
            releases
            ? ", lease_host = NULL, lease_daemon = NULL, lease_token = NULL, lease_expires_at = NULL, control = NULL, "
                + "end_token = $10::bigint" : ""
        // A run that ends with a control request pending tells the daemon waiting for it (`onControlledEnd`).
        // `asked` reads the row as it was before this statement's UPDATE (one snapshot for every part of it); a
        // request committed in between is not seen here, and its daemon finds the end by polling.
        let told =
            releases
            ? ", (SELECT pg_notify('\(PostgresJobQueue.controlChannel)', 'ended ' || id) FROM asked)::text" : ""
        // An earlier try of this very write that landed: the row left `running` under this run's token, for the
        // state this write gives it (both read before this statement's UPDATE, which then finds no running row).
        let landed =
            token != nil && releases
            ? "UNION ALL SELECT id, NULL::text FROM trailbook_jobs WHERE id = $1 AND end_token = $10::bigint AND state = $2"
            : ""
        return PostgresStatement(
            """
            WITH asked AS (
                SELECT 1 FROM trailbook_jobs WHERE id = $1 AND control IS NOT NULL
            ), written AS (
                UPDATE trailbook_jobs SET state = $2, attempt = $3::integer, cancellation = $4, error = $5, result = $6,
                    retry_at = \(DatabaseClock.at(7)), progress = $8, updated_at = \(DatabaseClock.now),
                    resumes_attempt = $9::boolean\(release)
                WHERE id = $1 AND \(fence)
                RETURNING id
            ), dropped AS (
                DELETE FROM trailbook_duplicate_keys WHERE $11::boolean AND job_id IN (SELECT id FROM written)
            ), cleanup AS (
                INSERT INTO trailbook_cleanups (job_id, tries, next_at, created_at)
                SELECT id, 0, \(DatabaseClock.now), \(DatabaseClock.now) FROM written WHERE $12::boolean
                ON CONFLICT DO NOTHING
            )
            SELECT id\(told) FROM written \(landed)
            """,
            [
                .text(job.id), .text(job.state.rawValue), .integer(Int64(job.attempt)),
                Self.optionalText(job.cancellation.map { JSONCoding.value(of: $0) }),
                Self.optionalText(job.error.map { JSONCoding.value(of: $0) }), Self.optionalText(job.result),
                DatabaseClock.offset(of: job.retryAt), .text(job.progress.jsonText), .bool(job.resumesAttempt),
                token.map { .integer($0) } ?? .null, .bool(job.state.isTerminal),
                .bool(addingCleanUp),
            ])
    }

    /// The lease token a write of job `id` is fenced by now (`writeStatement`), `nil` for an unleased write.
    func fenceToken(of id: String) -> Int64? { (leases[id] ?? lostLeases[id])?.token }

    /// Notes which of the writes of `jobs` (each with the lease token it was fenced by; `written[i]`: whether
    /// `jobs[i]`'s landed) were fenced off, and releases the leases of runs that are over. A lease that changed
    /// since the write was made (the job was claimed again while a group was in flight) is not this write's to
    /// release.
    /// - Returns: the ids fenced off.
    func settle(_ jobs: [(job: JobRecord, token: Int64?)], written: [Bool]) -> Set<String> {
        var lost: Set<String> = []
        for ((job, token), landed) in zip(jobs, written) {
            if !landed { lost.insert(job.id) }
            guard !landed || job.state != .running else { continue }
            if leases[job.id]?.token == token { leases[job.id] = nil }
            if lostLeases[job.id]?.token == token { lostLeases[job.id] = nil }
        }
        return lost
    }

    // MARK: JobStoring writes

    public func insert(_ jobs: inout [JobRecord], digests: [String?], duplicateKeys: [[String]]) throws {
        try commitGroup(inserting: &jobs, digests: digests, duplicateKeys: duplicateKeys, updating: [], durable: true)
    }

    /// A write back to `queued` (a resume, a retry coming due) notifies the daemons that may claim the job, in the
    /// same transaction, as a group's does.
    public func update(_ job: JobRecord, addingCleanUp: Bool) throws {
        let token = fenceToken(of: job.id)
        let results = try run([writeStatement(job, addingCleanUp: addingCleanUp)] + Self.workNotices(for: [job]))
        if !settle([(job, token)], written: [!results[0].rows.isEmpty]).isEmpty { throw JobStoreError.leaseLost(id: job.id) }
    }

    /// The `NOTIFY`s that wake the daemons that may claim those of `jobs` that are `queued` (`WorkNotice`).
    static func workNotices(for jobs: [JobRecord]) -> [PostgresStatement] {
        WorkNotice.notices(for: jobs.filter { $0.state == .queued }.map { ($0.queue, $0.pinnedHost) }).map(\.statement)
    }

    /// As the protocol says; a fenced-off write of `updating` (its lease is lost, or another daemon runs the job)
    /// does not fail the group: the rest is written, and `takeLostWrites()` names it.
    public func commitGroup(
        inserting: inout [JobRecord], digests: [String?], duplicateKeys: [[String]],
        updating: [(job: JobRecord, addingCleanUp: Bool)], durable: Bool
    ) throws {
        let group = GroupStatements(self, inserting: inserting, digests: digests, duplicateKeys: duplicateKeys, updating: updating)
        guard !group.statements.isEmpty else { return }
        let written = group.outcome(of: try run(group.statements), inserting, store: self)
        inserting = written.inserted
        lostWrites.formUnion(written.lost)
    }

    /// As the protocol says: `commitGroup` without waiting, fenced the same way, given up after
    /// `requestTimeoutSeconds`. `durable` changes nothing: every commit is durable here.
    public func sendGroup(
        inserting: [JobRecord], digests: [String?], duplicateKeys: [[String]],
        updating: [(job: JobRecord, addingCleanUp: Bool)], durable: Bool,
        completion: @escaping (Result<GroupWritten, any Error>) -> Void
    ) {
        let group = GroupStatements(self, inserting: inserting, digests: digests, duplicateKeys: duplicateKeys, updating: updating)
        guard !group.statements.isEmpty else { return completion(.success(GroupWritten(inserted: inserting, lost: []))) }
        let statements = group.statements
        // Ahead of the other jobs' checkpoints and progress (a busy daemon always has some waiting): its submits
        // are answered and its ends land one round trip after they are made.
        let ahead = Set(updating.map(\.job.id) + inserting.map(\.id))
        sendWaitingAtMost(ahead: ahead, { database in try await database.queue!.connection.pipeline(statements) }) {
            [weak self] result in
            guard let self else { return }
            completion(result.map { group.outcome(of: $0, inserting, store: self) })
        }
    }

    /// Fenced as a waiting job's write is (`writeStatement`), and only while the job is `paused` (its one use:
    /// `resume`): another daemon's change since the job was read stands.
    /// - Throws: `JobStoreError.leaseLost` when fenced off; the connection's errors.
    public func updateParams(id: String, _ params: JSONValue) throws {
        let written = try rows(
            """
            UPDATE trailbook_jobs SET params = $2, updated_at = \(DatabaseClock.now)
            WHERE id = $1 AND state = 'paused' AND lease_token IS NULL RETURNING id
            """,
            [.text(id), .text(JobStore.text(params))])
        if written.isEmpty { throw JobStoreError.leaseLost(id: id) }
    }

    /// A running job's progress is its lease's renewal, sent without waiting (the loop goes on while it travels);
    /// a renewal that finds the lease gone is reported through `onLeaseLost`, and one the database could not take
    /// (unreachable) is made good by the next report or the heartbeat. Any other job's progress is written waiting.
    public func saveProgress(id: String, _ progress: JobProgress) throws {
        // A run whose lease is lost writes nothing more: the row is another run's (or the queue's) now.
        guard lostLeases[id] == nil else { return }
        guard let lease = leases[id] else {
            _ = try rows(
                """
                UPDATE trailbook_jobs SET progress = $2, updated_at = \(DatabaseClock.now)
                WHERE id = $1 AND lease_token IS NULL
                """,
                [.text(id), .text(progress.jsonText)])
            return
        }
        let renewal = PostgresJobQueue.Renewal(lease: lease, progress: progress.jsonText)
        let seconds = leaseSeconds
        send(coalescing: "progress " + id, job: id, { database in try await database.queue!.renew([renewal], leaseSeconds: seconds) }) {
            [weak self] result in
            self?.renewed([lease], result)
        }
    }

    /// Settles renewals of `sent` (`result`: the renewed leases, `nil` for one lost): a lease still held under the
    /// same token is updated or, if lost, dropped and reported (`onLeaseLost`). One released or replaced meanwhile
    /// (the run ended, or the job was claimed again) is left alone.
    /// - Returns: the ids whose lease is lost.
    @discardableResult
    func renewed(_ sent: [PostgresJobQueue.Lease], _ result: Result<[PostgresJobQueue.Lease?], any Error>) -> [String] {
        guard case .success(let renewed) = result else { return [] }
        var lost: [String] = []
        for (lease, new) in zip(sent, renewed) where leases[lease.jobID]?.token == lease.token {
            guard let new else {
                markLost(lease.jobID)
                lost.append(lease.jobID)
                continue
            }
            leases[lease.jobID] = new
        }
        for id in lost { wake.leaseLost?(id) }
        return lost
    }

    public func saveCheckpoint(id: String, _ checkpoint: JSONValue, progress: JobProgress) throws {
        guard let lease = leases[id] else { throw JobStoreError.leaseLost(id: id) }
        let checkpointText = JobStore.text(checkpoint)
        let progressText = progress.jsonText
        let saved = try wait { database in
            try await database.queue!.saveCheckpoint(lease, checkpoint: checkpointText, progress: progressText)
        }
        guard saved else {
            markLost(id)
            throw JobStoreError.leaseLost(id: id)
        }
    }

    public func sendCheckpoint(
        id: String, _ checkpoint: JSONValue, progress: JobProgress, completion: @escaping ((any Error)?) -> Void
    ) {
        guard let lease = leases[id] else { return completion(JobStoreError.leaseLost(id: id)) }
        let checkpointText = JobStore.text(checkpoint)
        let progressText = progress.jsonText
        // A newer checkpoint of the job, made before this one is sent, makes it moot.
        send(coalescing: "checkpoint " + id, job: id, { database in
            try await database.queue!.saveCheckpoint(lease, checkpoint: checkpointText, progress: progressText)
        }) { [weak self] result in
            guard let self else { return }
            let saved: Bool
            do { saved = try self.unwrapped(result) } catch { return completion(error) }
            if saved { return completion(nil) }
            if leases[id]?.token == lease.token {
                markLost(id)
            } else if lostLeases[id]?.token != lease.token {
                return  // that run is over and another holds the job now: nothing to report, nothing written
            }
            completion(JobStoreError.leaseLost(id: id))
        }
    }
}
