/// The shared job queue's SQL on PostgreSQL: schema migrations, submission, claiming with leases, lease renewal,
/// rescue of expired leases, and fenced writes of a run's end. The model is the one of Oban, River, Solid Queue
/// and GoodJob; docs/explanation/shared-store.md explains the design.
///
/// Columns mirror the SQLite `JobStore` (JSON kept as text, exactly as the engine encodes it) plus what sharing
/// needs: `queue` (a label only daemons started with it claim), `pinned_host` (a job whose files live on one
/// host), and the lease (`lease_host`, `lease_daemon`, `lease_token`, `lease_expires_at`). Lease times are the
/// database's clock (`clock_timestamp()`), so the hosts' clocks need not agree.
///
/// Two transitions of `JobLifecycle` are written here in SQL because they must be atomic with the row lock:
/// a claim is `.start` (queued → running; the attempt goes up unless `resumes_attempt`), a rescue is
/// `.recoverAfterCrash` (running → queued, same attempt, `resumes_attempt`). Every other transition is decided by
/// the scheduler and written with `endRun`, fenced by the lease token.
///
/// Loop-confined like its connection.
public final class PostgresJobQueue {
    /// Who holds a lease: the host and the daemon on it (a restarted daemon on the same host is a new daemon).
    public struct Owner: Sendable, Equatable {
        /// The host's name, as used for `pinned_host`.
        public var host: String
        /// This daemon process's id, unique per start.
        public var daemonID: String

        public init(host: String, daemonID: String) {
            self.host = host
            self.daemonID = daemonID
        }
    }

    /// A job to submit.
    public struct NewJob: Sendable, Equatable {
        /// The job's id (a UUID, lower case).
        public var id: String
        /// The job kind's name (`upload`, `tag`, …).
        public var kind: String
        /// Higher is claimed first; equal priorities in submission order.
        public var priority: Int
        /// Only daemons claiming this queue take the job.
        public var queue: String
        /// Only a daemon on this host takes the job; `nil`: any host.
        public var pinnedHost: String?
        /// Deadline of one attempt, in seconds.
        public var timeoutSeconds: Double
        /// Seconds without progress after which a run stops with reason `timeout`.
        public var stallTimeoutSeconds: Double
        /// Attempts before the job fails.
        public var maxAttempts: Int
        /// Seconds a job waits out a service's outage before it fails (`unavailable`).
        public var giveUpAfterSeconds: Double
        /// The kind's parameters, JSON text.
        public var params: String
        /// The initial progress, JSON text.
        public var progress: String

        /// A job to submit; the defaults are those of a test's minimal job, the engine passes every value.
        public init(
            id: String, kind: String, priority: Int = 0, queue: String = PostgresJobQueue.defaultQueue,
            pinnedHost: String? = nil, timeoutSeconds: Double = 0, stallTimeoutSeconds: Double = 0, maxAttempts: Int = 1,
            giveUpAfterSeconds: Double = 86_400, params: String = "{}", progress: String = "{}"
        ) {
            self.id = id
            self.kind = kind
            self.priority = priority
            self.queue = queue
            self.pinnedHost = pinnedHost
            self.timeoutSeconds = timeoutSeconds
            self.stallTimeoutSeconds = stallTimeoutSeconds
            self.maxAttempts = maxAttempts
            self.giveUpAfterSeconds = giveUpAfterSeconds
            self.params = params
            self.progress = progress
        }
    }

    /// A lease on a running job: whoever holds its `token` may write the job's progress and end.
    public struct Lease: Sendable, Equatable {
        /// The leased job's id.
        public var jobID: String
        /// Unique over the database's life (a sequence): a rescued and re-claimed job gets a new one.
        public var token: Int64
        /// When it expires unless renewed, in Unix seconds of the database's clock.
        public var expiresAt: Double
    }

    /// A job this daemon claimed: it is `running` under `lease`.
    public struct ClaimedJob: Sendable, Equatable {
        /// The job's id.
        public var id: String
        /// The job kind's name.
        public var kind: String
        /// Its priority (higher first).
        public var priority: Int
        /// Submission order.
        public var sequence: Int64
        /// The attempt this run belongs to (1-based).
        public var attempt: Int
        /// The kind's parameters, JSON text.
        public var params: String
        /// The last checkpoint (JSON text), to resume from; `nil` if none.
        public var checkpoint: String?
        /// The lease this daemon now holds on it.
        public var lease: Lease
        /// The values of the claim's `alsoReturning` columns, as the claim left the row (empty when none asked).
        public var returned = PostgresRow(values: [])
    }

    /// How a run ended (or was cut short), as the scheduler's `JobLifecycle` decided; written by `endRun`.
    public struct RunEnd: Sendable, Equatable {
        /// The new state (`JobState.rawValue`): `succeeded`, `failed`, `cancelled`, `needs_retry`, `paused` or
        /// `queued`.
        public var state: String
        /// The attempt the job is on after this end (1-based).
        public var attempt: Int
        /// Whether its next run continues this attempt (a stop for `timeout` or `resource_reclaim`, a rescue).
        public var resumesAttempt: Bool
        /// JSON text of the engine's values, `nil` for none.
        public var error: String?
        public var result: String?
        public var cancellation: String?
        public var progress: String?
        /// When a `needs_retry` job is due, Unix seconds of the database's clock (`queueDueRetries` compares it
        /// with `clock_timestamp()`), not the caller's.
        public var retryAt: Double?

        public init(
            state: String, attempt: Int, resumesAttempt: Bool = false, error: String? = nil, result: String? = nil,
            cancellation: String? = nil, progress: String? = nil, retryAt: Double? = nil
        ) {
            self.state = state
            self.attempt = attempt
            self.resumesAttempt = resumesAttempt
            self.error = error
            self.result = result
            self.cancellation = cancellation
            self.progress = progress
            self.retryAt = retryAt
        }
    }

    /// The queue of jobs submitted without one.
    public static let defaultQueue = "default"
    /// The channel a submit notifies (payload: a `WorkNotice`), so idle daemons claim at once instead of polling.
    public static let jobsChannel = "trailbook_jobs"
    /// The channel a `cancel`/`pause` of a job running on another daemon notifies; payload
    /// `<lease daemon id> <control> <job id>` (the request itself is in the job's `control` column).
    public static let controlChannel = "trailbook_control"
    /// The channel daemons send their feed events on (`FeedRelay`); payload: a header line
    /// `<daemon id> <number>`, then the events' JSON lines.
    public static let feedChannel = "trailbook_feed"
    /// The advisory lock key migrations hold (`pg_advisory_xact_lock`): "trailbk" in ASCII.
    static let migrationLockKey: Int64 = 0x7472_6169_6C62_6B

    /// Schema migrations; index i moves the schema from version i to i + 1, each one transaction of single
    /// statements (the extended protocol takes one per message). Append, never edit.
    /// The schema version this build migrates to.
    public static var migrationCount: Int { migrations.count }

    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE trailbook_jobs (
                sequence bigint GENERATED ALWAYS AS IDENTITY,
                id text PRIMARY KEY,
                kind text NOT NULL,
                state text NOT NULL,
                priority integer NOT NULL,
                queue text NOT NULL DEFAULT 'default',
                pinned_host text,
                timeout_s double precision NOT NULL,
                stall_timeout_s double precision NOT NULL,
                max_attempts integer NOT NULL,
                give_up_after_s double precision NOT NULL DEFAULT 86400,
                attempt integer NOT NULL DEFAULT 0,
                resumes_attempt boolean NOT NULL DEFAULT false,
                params text NOT NULL,
                progress text,
                checkpoint text,
                cancellation text,
                error text,
                result text,
                retry_at double precision,
                created_at double precision NOT NULL,
                updated_at double precision NOT NULL,
                lease_host text,
                lease_daemon text,
                lease_token bigint,
                lease_expires_at timestamptz
            )
            """,
            // The claim's scan: queued jobs of a queue in run order.
            """
            CREATE INDEX trailbook_jobs_claim ON trailbook_jobs (queue, priority DESC, sequence)
                WHERE state = 'queued'
            """,
            "CREATE INDEX trailbook_jobs_leases ON trailbook_jobs (lease_expires_at) WHERE state = 'running'",
            "CREATE INDEX trailbook_jobs_sequence ON trailbook_jobs (sequence)",
            "CREATE SEQUENCE trailbook_lease_tokens",
            // The feed's `seq` blocks, shared by every daemon.
            "CREATE SEQUENCE trailbook_feed_seq",
            """
            CREATE TABLE trailbook_cleanups (
                job_id text PRIMARY KEY,
                tries integer NOT NULL DEFAULT 0,
                next_at double precision NOT NULL,
                created_at double precision NOT NULL,
                last_error text
            )
            """,
        ],
        // 2: what the engine's store keeps too (JobStore migrations 6 and 7): idempotency keys with their request
        // digest, and what unfinished jobs work on (duplicate submits).
        [
            "ALTER TABLE trailbook_jobs ADD COLUMN idempotency_key text",
            "ALTER TABLE trailbook_jobs ADD COLUMN submit_digest text",
            """
            CREATE UNIQUE INDEX trailbook_jobs_by_idempotency_key ON trailbook_jobs (idempotency_key)
                WHERE idempotency_key IS NOT NULL
            """,
            """
            CREATE TABLE trailbook_duplicate_keys (
                key text NOT NULL,
                job_id text NOT NULL,
                PRIMARY KEY (key, job_id)
            )
            """,
            "CREATE INDEX trailbook_duplicate_keys_by_job ON trailbook_duplicate_keys (job_id)",
        ],
        // 3: a request to the daemon running a job (`cancel` or `pause`), made through another daemon; cleared
        // when the run's end is written.
        ["ALTER TABLE trailbook_jobs ADD COLUMN control text"],
        // 4: retention's scan (`PostgresJobStore.pruneEnded`): ended jobs by state and age.
        [
            """
            CREATE INDEX trailbook_jobs_ended ON trailbook_jobs (state, updated_at)
                WHERE state IN ('succeeded', 'failed', 'cancelled')
            """
        ],
        // 5: the lease token of the run whose write took the job out of `running` (its end, or its pause or
        // retry): a daemon that lost the answer to that write, and tries it again, learns that it landed
        // (`PostgresJobStore`'s fenced write) instead of taking it for another daemon's.
        ["ALTER TABLE trailbook_jobs ADD COLUMN end_token bigint"],
        // 6: jobs' entry lists (a folder upload's files, issue 35; the engine's PostgresJobStore+Entries.swift), as
        // the SQLite store's migration 11: one row per entry with its outcome, and the list's seal. They go with
        // their job (the foreign keys cascade), so another daemon resuming the job finds them.
        [
            """
            CREATE TABLE trailbook_job_entries (
                job_id text NOT NULL REFERENCES trailbook_jobs (id) ON DELETE CASCADE,
                position bigint NOT NULL,
                size bigint NOT NULL,
                item text NOT NULL,
                state text NOT NULL,
                code text,
                message text,
                PRIMARY KEY (job_id, position)
            )
            """,
            "CREATE INDEX trailbook_job_entries_by_state ON trailbook_job_entries (job_id, state, position)",
            """
            CREATE TABLE trailbook_job_entry_lists (
                job_id text PRIMARY KEY REFERENCES trailbook_jobs (id) ON DELETE CASCADE,
                count bigint NOT NULL
            )
            """,
        ],
        // 7: `list --state S` (the engine's PostgresJobStore+StateList.swift): each state read newest first from its
        // cursor, as the SQLite store's `jobs_by_state_sequence`; without it a rare state among many rows is found
        // by walking the whole sequence index.
        ["CREATE INDEX trailbook_jobs_by_state_sequence ON trailbook_jobs (state, sequence)"],
        // 8: the upload memory (issue 35; the engine's UploadMemory/PostgresJobStore+UploadMemory.swift), as the
        // SQLite store's migration 12: what jobs uploaded to destinations that cannot be listed (tus). No foreign
        // key: it outlives the jobs that wrote it.
        [
            """
            CREATE TABLE trailbook_upload_memory (
                destination text NOT NULL,
                name text NOT NULL,
                size bigint NOT NULL,
                sha256 text,
                location text NOT NULL,
                job_id text NOT NULL,
                uploaded_at double precision NOT NULL,
                PRIMARY KEY (destination, name)
            )
            """
        ],
        // 9: the upload memory's stat cache (issue 35; the engine's UploadMemory/RememberedSource.swift), as the
        // SQLite store's migration 13: each row's source file with its `stat` when its SHA-256 was known, and the
        // index of the memory's prune by age.
        [
            """
            ALTER TABLE trailbook_upload_memory ADD COLUMN source_path text, ADD COLUMN source_device bigint,
                ADD COLUMN source_inode bigint, ADD COLUMN source_mtime_ns bigint, ADD COLUMN source_ctime_ns bigint
            """,
            "CREATE INDEX trailbook_upload_memory_by_age ON trailbook_upload_memory (uploaded_at)",
        ],
        // Each daemon's current feed relay (`origin`, random per run), by instance (host and socket path): read by a
        // daemon when it starts following the feed, so that it knows the runs it never heard.
        [
            """
            CREATE TABLE trailbook_feed_relays (
                instance text PRIMARY KEY, origin text NOT NULL, started_at timestamptz NOT NULL
            )
            """
        ],
    ]

    /// The connection it runs on.
    public let connection: PostgresConnection

    /// Uses `connection` (which must be connected before the first call).
    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    // MARK: schema

    /// Brings the schema to the newest version, in one transaction under an advisory lock, so daemons starting
    /// together migrate once between them (the others wait for the lock, then find nothing to do).
    /// - Returns: the number of migrations applied by this call.
    /// - Throws: `PostgresError`; `.server` with SQLSTATE `TB001` if the database's schema is newer than this build.
    @discardableResult
    public func migrate(isolation: isolated (any Actor)? = #isolation) async throws(PostgresError) -> Int {
        do throws(PostgresError) {
            let opened = try await connection.pipeline(
                [
                    PostgresStatement("BEGIN"),
                    PostgresStatement("SELECT pg_advisory_xact_lock($1::bigint)", [.integer(Self.migrationLockKey)]),
                    PostgresStatement(
                        "CREATE TABLE IF NOT EXISTS trailbook_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL)"),
                    PostgresStatement("SELECT coalesce(max(version), 0) FROM trailbook_schema"),
                ], isolation: isolation)
            let current = Int(opened[3].rows.first?.int(0) ?? 0)
            guard current <= Self.migrations.count else {
                throw PostgresError(
                    kind: .server, sqlState: "TB001",
                    message: "the database's job schema is version \(current), newer than this build's \(Self.migrations.count): upgrade trailbook-jobs")
            }
            var statements: [PostgresStatement] = []
            for version in current..<Self.migrations.count {
                statements += Self.migrations[version].map { PostgresStatement($0) }
                statements.append(
                    PostgresStatement(
                        "INSERT INTO trailbook_schema (version, applied_at) VALUES ($1::integer, now())",
                        [.integer(Int64(version + 1))]))
            }
            _ = try await connection.pipeline(statements + [PostgresStatement("COMMIT")], isolation: isolation)
            return Self.migrations.count - current
        } catch {
            // An explicit transaction stays open (aborted after an error) until ROLLBACK; a lost connection ends
            // it by itself.
            if error.kind == .server { _ = try? await connection.query("ROLLBACK", isolation: isolation) }
            throw error
        }
    }

    // MARK: submitting

    /// Adds `jobs` as `queued` in one round trip and one transaction (all or none), and notifies `jobsChannel`
    /// once per queue and pinned host involved (`WorkNotice`, delivered at commit).
    /// - Returns: each job's `sequence`, in order.
    /// - Throws: `PostgresError` (`.server` `23505` for a duplicate id: then none was added).
    public func submit(_ jobs: [NewJob], isolation: isolated (any Actor)? = #isolation) async throws(PostgresError)
        -> [Int64]
    {
        guard !jobs.isEmpty else { return [] }
        var statements = jobs.map { job in
            PostgresStatement(
                """
                INSERT INTO trailbook_jobs (id, kind, state, priority, queue, pinned_host, timeout_s, stall_timeout_s,
                    max_attempts, give_up_after_s, params, progress, created_at, updated_at)
                VALUES ($1, $2, 'queued', $3::integer, $4, $5, $6::float8, $7::float8, $8::integer, $9::float8, $10, $11,
                    extract(epoch FROM clock_timestamp()), extract(epoch FROM clock_timestamp()))
                RETURNING sequence
                """,
                [
                    .text(job.id), .text(job.kind), .integer(Int64(job.priority)), .text(job.queue),
                    job.pinnedHost.map { .text($0) } ?? .null, .double(job.timeoutSeconds),
                    .double(job.stallTimeoutSeconds), .integer(Int64(job.maxAttempts)), .double(job.giveUpAfterSeconds),
                    .text(job.params), .text(job.progress),
                ])
        }
        statements += WorkNotice.notices(for: jobs.map { ($0.queue, $0.pinnedHost) }).map(\.statement)
        let results = try await connection.pipeline(statements, isolation: isolation)
        return results.prefix(jobs.count).map { $0.rows.first?.int(0) ?? 0 }
    }

    // MARK: claiming and leases

    /// Claims up to `limit` queued jobs for `owner`: of `queues`, pinned to `owner.host` or to no host, in
    /// priority then submission order (only of `kinds` when given: a daemon claims only what it can run),
    /// skipping rows other daemons are claiming (`FOR UPDATE SKIP LOCKED`), so
    /// concurrent claims never take the same job and never wait for each other.
    ///
    /// Its cost does not grow with the queue: each queue of `queues` is read on its own (a `LATERAL` subquery per
    /// queue), in the claim index's order (`trailbook_jobs_claim`: queue, priority, sequence), up to `limit` rows,
    /// and only those few are merged; `queue = ANY(…)` over the whole list would keep PostgreSQL off the index's
    /// order and make it read and sort every queued job. With several queues a claim may hold up to `limit` rows
    /// of each until it commits, of which it takes `limit`: concurrent claims skip the others for that moment.
    /// The picked rows are updated through the primary key (`id = ANY(ARRAY(…))`): a join with them would be
    /// planned, generically (a prepared statement after a few runs), as a hash join over the whole table. Each claimed job is `running`
    /// under a new lease of `leaseSeconds`. Jobs whose id is in `excluding` are passed over: those the daemon still
    /// runs, under a lease it holds or one it lost (a job rescued from it and queued again must not be claimed
    /// by it while its old run is still stopping).
    /// `alsoReturning` names more columns of `trailbook_jobs` (or expressions of them, unqualified) to return
    /// in `ClaimedJob.returned`, as the claim left the row: a caller that needs the whole row saves a round trip.
    /// With `outranking`, only jobs of a priority above it are claimed (a daemon with no free slot claiming a job
    /// that preempts one of its runs; docs/explanation/design.md, "Stops"); `nil` claims any.
    /// - Returns: the claimed jobs in run order (higher priority first, then submission order).
    /// - Throws: `PostgresError`.
    public func claim(
        owner: Owner, queues: [String] = [PostgresJobQueue.defaultQueue], kinds: [String]? = nil, limit: Int,
        leaseSeconds: Double, excluding: [String] = [], outranking: Int? = nil, alsoReturning: [String] = [],
        isolation: isolated (any Actor)? = #isolation
    ) async throws(PostgresError) -> [ClaimedJob] {
        guard limit > 0, !queues.isEmpty else { return [] }
        let result = try await connection.pipeline(
            [
                Self.claimStatement(
                    owner: owner, queues: queues, kinds: kinds, limit: limit, leaseSeconds: leaseSeconds,
                    excluding: excluding, outranking: outranking, alsoReturning: alsoReturning)
            ], isolation: isolation)[0]
        let claimed = result.rows.compactMap { row -> ClaimedJob? in
            guard let id = row.text(0), let kind = row.text(1), let token = row.int(7) else { return nil }
            return ClaimedJob(
                id: id, kind: kind, priority: Int(row.int(2) ?? 0), sequence: row.int(3) ?? 0,
                attempt: Int(row.int(4) ?? 0), params: row.text(5) ?? "{}", checkpoint: row.text(6),
                lease: Lease(jobID: id, token: token, expiresAt: row.double(8) ?? 0),
                returned: PostgresRow(values: Array(row.values.dropFirst(9))))
        }
        // RETURNING follows no order: restore the run order.
        return claimed.sorted { ($0.priority, -$0.sequence) > ($1.priority, -$1.sequence) }
    }

    /// The statement of `claim` (its arguments as there), for `claim` and for tests of its plan.
    static func claimStatement(
        owner: Owner, queues: [String], kinds: [String]?, limit: Int, leaseSeconds: Double, excluding: [String],
        outranking: Int? = nil, alsoReturning: [String]
    ) -> PostgresStatement {
        // Qualified: the picked rows have an `id` too.
        let more = alsoReturning.map { ", j." + $0 }.joined()
        // A claim that preempts: a condition on the claim index's second column, so still read in its order.
        let above = outranking == nil ? "" : " AND priority > $8::integer"
        let floor: [PostgresValue] = outranking.map { [.integer(Int64($0))] } ?? []
        return PostgresStatement(
            """
            WITH picked AS (
                SELECT taken.id FROM unnest($1::text[]) AS served(queue) CROSS JOIN LATERAL (
                    SELECT id, priority, sequence FROM trailbook_jobs
                    WHERE state = 'queued' AND queue = served.queue\(above) AND (pinned_host IS NULL OR pinned_host = $2)
                        AND ($6::text[] IS NULL OR kind = ANY($6::text[])) AND NOT (id = ANY($7::text[]))
                    ORDER BY priority DESC, sequence
                    LIMIT $3::integer
                    FOR UPDATE SKIP LOCKED
                ) AS taken
                ORDER BY taken.priority DESC, taken.sequence
                LIMIT $3::integer
            )
            UPDATE trailbook_jobs AS j SET
                state = 'running',
                attempt = CASE WHEN j.resumes_attempt THEN j.attempt ELSE j.attempt + 1 END,
                resumes_attempt = false,
                lease_host = $2, lease_daemon = $4, lease_token = nextval('trailbook_lease_tokens'),
                lease_expires_at = clock_timestamp() + make_interval(secs => $5::float8),
                updated_at = extract(epoch FROM clock_timestamp())
            WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
            RETURNING j.id, j.kind, j.priority, j.sequence, j.attempt, j.params, j.checkpoint, j.lease_token,
                extract(epoch FROM j.lease_expires_at)\(more)
            """,
            [
                .textArray(queues), .text(owner.host), .integer(Int64(limit)), .text(owner.daemonID), .double(leaseSeconds),
                kinds.map { .textArray($0) } ?? .null, .textArray(excluding),
            ] + floor)
    }

    /// A lease renewal: extends the lease and records the progress that proves the job alive.
    public struct Renewal: Sendable, Equatable {
        public var lease: Lease
        /// The latest progress, JSON text; `nil` keeps the stored one.
        public var progress: String?

        public init(lease: Lease, progress: String? = nil) {
            self.lease = lease
            self.progress = progress
        }
    }

    /// Renews `renewals` in one statement (progress is the heartbeat: call it with each throttled progress
    /// write). A lease that was rescued or re-claimed meanwhile is not renewed: its daemon must stop that job
    /// at once and not write its end.
    /// - Returns: per renewal, the new lease, or `nil` if the lease is lost.
    /// - Throws: `PostgresError` (then none was renewed).
    public func renew(_ renewals: [Renewal], leaseSeconds: Double, isolation: isolated (any Actor)? = #isolation)
        async throws(PostgresError) -> [Lease?]
    {
        guard !renewals.isEmpty else { return [] }
        // Set-based: one statement for all of them, fenced row by row by its token.
        let result = try await connection.query(
            """
            UPDATE trailbook_jobs AS j SET lease_expires_at = clock_timestamp() + make_interval(secs => $3::float8),
                progress = coalesce(renewal.progress, j.progress), updated_at = extract(epoch FROM clock_timestamp())
            FROM unnest($1::text[], $2::bigint[], $4::text[]) AS renewal(id, token, progress)
            WHERE j.id = renewal.id AND j.lease_token = renewal.token AND j.state = 'running'
            RETURNING j.id, j.lease_token, extract(epoch FROM j.lease_expires_at)
            """,
            [
                .textArray(renewals.map(\.lease.jobID)), .array(renewals.map { .integer($0.lease.token) }),
                .double(leaseSeconds), .array(renewals.map { $0.progress.map { .text($0) } ?? .null }),
            ], isolation: isolation)
        // By job and token: a renewal under an older token of a job is not the one renewed.
        var expiries: [String: Double] = [:]
        for row in result.rows {
            if let id = row.text(0), let token = row.int(1) { expiries["\(id) \(token)"] = row.double(2) ?? 0 }
        }
        return renewals.map { renewal in
            let lease = renewal.lease
            return expiries["\(lease.jobID) \(lease.token)"].map { Lease(jobID: lease.jobID, token: lease.token, expiresAt: $0) }
        }
    }

    /// Saves a running job's checkpoint and progress, fenced by its lease like `endRun`.
    /// - Returns: `false` if the lease is lost (nothing written).
    /// - Throws: `PostgresError`.
    public func saveCheckpoint(
        _ lease: Lease, checkpoint: String, progress: String, isolation: isolated (any Actor)? = #isolation
    ) async throws(PostgresError) -> Bool {
        let result = try await connection.query(
            """
            UPDATE trailbook_jobs SET checkpoint = $3, progress = $4, updated_at = extract(epoch FROM clock_timestamp())
            WHERE id = $1 AND lease_token = $2::bigint AND state = 'running'
            """,
            [.text(lease.jobID), .integer(lease.token), .text(checkpoint), .text(progress)], isolation: isolation)
        return result.affectedRows == 1
    }

    /// Writes how a run ended and releases its lease — only if `lease` still holds (fencing: a daemon that lost
    /// the lease, because it was cut off and the job rescued, must not write an end over the new run's).
    /// - Returns: `false` if the lease is lost (nothing written).
    /// - Throws: `PostgresError`.
    public func endRun(_ lease: Lease, _ end: RunEnd, isolation: isolated (any Actor)? = #isolation)
        async throws(PostgresError) -> Bool
    {
        let result = try await connection.query(
            """
            UPDATE trailbook_jobs SET state = $3, attempt = $4::integer, resumes_attempt = $5::boolean, error = $6,
                result = $7, cancellation = $8, progress = coalesce($9, progress), retry_at = $10::float8,
                lease_host = NULL, lease_daemon = NULL, lease_token = NULL, lease_expires_at = NULL,
                updated_at = extract(epoch FROM clock_timestamp())
            WHERE id = $1 AND lease_token = $2::bigint AND state = 'running'
            """,
            [
                .text(lease.jobID), .integer(lease.token), .text(end.state), .integer(Int64(end.attempt)),
                .bool(end.resumesAttempt), end.error.map { .text($0) } ?? .null, end.result.map { .text($0) } ?? .null,
                end.cancellation.map { .text($0) } ?? .null, end.progress.map { .text($0) } ?? .null,
                end.retryAt.map { .double($0) } ?? .null,
            ], isolation: isolation)
        return result.affectedRows == 1
    }

    /// Puts every running job whose lease expired (its daemon was killed or cut off) back in the queue: same
    /// attempt, resumed from its checkpoint (`JobLifecycle`'s `.recoverAfterCrash`); its old token is void.
    /// Any daemon may call it; concurrent calls rescue each job once.
    /// - Returns: the ids of the rescued jobs.
    /// - Throws: `PostgresError`.
    public func rescueExpiredLeases(isolation: isolated (any Actor)? = #isolation) async throws(PostgresError)
        -> [String]
    {
        let result = try await connection.pipeline(
            [
                PostgresStatement(
                    """
                    UPDATE trailbook_jobs SET state = 'queued', resumes_attempt = true, lease_host = NULL,
                        lease_daemon = NULL, lease_token = NULL, lease_expires_at = NULL,
                        updated_at = extract(epoch FROM clock_timestamp())
                    WHERE state = 'running' AND lease_expires_at < clock_timestamp()
                    RETURNING id
                    """),
                // Wakes idle daemons; delivered only if the transaction commits (and coalesced when identical).
                PostgresStatement("SELECT pg_notify($1, 'rescued')", [.text(Self.jobsChannel)]),
            ], isolation: isolation)
        return result[0].rows.compactMap { $0.text(0) }.sorted()
    }

    /// Moves `needs_retry` jobs whose backoff is over (`retry_at` ≤ the database's clock) back to `queued`
    /// (`JobLifecycle`'s `.retryDue`). Any daemon may call it; concurrent calls move each job once.
    /// - Returns: the ids of the jobs moved.
    /// - Throws: `PostgresError`.
    public func queueDueRetries(isolation: isolated (any Actor)? = #isolation) async throws(PostgresError) -> [String] {
        try await connection.query(
            """
            UPDATE trailbook_jobs SET state = 'queued', retry_at = NULL, updated_at = extract(epoch FROM clock_timestamp())
            WHERE state = 'needs_retry' AND retry_at <= extract(epoch FROM clock_timestamp())
            RETURNING id
            """, isolation: isolation
        ).rows.compactMap { $0.text(0) }.sorted()
    }

    /// A job's state, attempt and lease holder, for tests and `show`: `nil` if there is no such job.
    public struct Snapshot: Sendable, Equatable {
        public var state: String
        public var attempt: Int
        public var resumesAttempt: Bool
        public var leaseDaemon: String?
        public var leaseToken: Int64?
        public var progress: String?
        public var checkpoint: String?
    }

    /// The current `Snapshot` of job `id`, or `nil`.
    /// - Throws: `PostgresError`.
    public func snapshot(id: String, isolation: isolated (any Actor)? = #isolation) async throws(PostgresError)
        -> Snapshot?
    {
        let result = try await connection.query(
            """
            SELECT state, attempt, resumes_attempt, lease_daemon, lease_token, progress, checkpoint
            FROM trailbook_jobs WHERE id = $1
            """, [.text(id)], isolation: isolation)
        return result.rows.first.map { row in
            Snapshot(
                state: row.text(0) ?? "", attempt: Int(row.int(1) ?? 0), resumesAttempt: row.bool(2) ?? false,
                leaseDaemon: row.text(3), leaseToken: row.int(4), progress: row.text(5), checkpoint: row.text(6))
        }
    }
}
