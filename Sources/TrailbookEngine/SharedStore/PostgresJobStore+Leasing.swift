import Foundation
import TrailbookPostgres

extension PostgresJobStore {
    // MARK: LeasingJobStoring

    public func sendClaim(limit: Int, kinds: [String], completion: @escaping (Result<[ClaimedRun], any Error>) -> Void) {
        guard limit > 0, !kinds.isEmpty else { return completion(.success([])) }
        sendWaitingAtMost(claimRequest(limit: limit, kinds: kinds)) { [weak self] result in
            guard let self else { return }
            completion(result.map { self.took($0) })
        }
    }

    /// The request of a claim: the claimed jobs (passing over those under a lease this daemon holds or lost) with
    /// their rows, in one statement (the claim's `RETURNING`): one round trip.
    func claimRequest(
        limit: Int, kinds: [String]
    ) -> @Sendable (isolated PostgresStoreActor) async throws -> [PostgresJobQueue.ClaimedJob] {
        let owner = self.owner
        let seconds = leaseSeconds
        let queues = self.queues
        let running = Array(leases.keys) + Array(lostLeases.keys)
        return { database in
            try await database.queue!.claim(
                owner: owner, queues: queues, kinds: kinds, limit: limit, leaseSeconds: seconds, excluding: running,
                alsoReturning: Self.columnList)
        }
    }

    /// The claimed jobs as records with their checkpoints, in run order, their leases now held by this daemon.
    func took(_ claimed: [PostgresJobQueue.ClaimedJob]) -> [ClaimedRun] {
        claimed.compactMap { claimed in
            leases[claimed.id] = claimed.lease
            lostLeases[claimed.id] = nil
            guard let job = Self.record(claimed.returned) else { return nil }
            let checkpoint = claimed.checkpoint.flatMap { try? JSONCoding.decode(JSONValue.self, from: Array($0.utf8)) }
            return ClaimedRun(job: job, checkpoint: checkpoint)
        }
    }

    /// Four statements in the order `LeaseMaintenance` lists them, then the rows of the jobs it moved, on the
    /// store's thread; `completion` runs on the loop thread. A lease found lost is also reported through
    /// `onLeaseLost`.
    public func maintainLeases(completion: @escaping (LeaseMaintenance) -> Void) {
        let sent = Array(leases.values)
        let renewals = sent.map { PostgresJobQueue.Renewal(lease: $0) }
        let seconds = leaseSeconds
        let daemon = owner.daemonID
        let columns = Self.columns
        send({ database -> Tended in
            let queue = database.queue!
            let renewed = try await queue.renew(renewals, leaseSeconds: seconds)
            let controls = try await queue.connection.query(
                "SELECT id, control FROM trailbook_jobs WHERE lease_daemon = $1 AND state = 'running' AND control IS NOT NULL",
                [.text(daemon)]
            ).rows.compactMap { row -> Tended.Control? in
                guard let id = row.text(0), let control = row.text(1).flatMap(JobControl.init(rawValue:)) else { return nil }
                return Tended.Control(id: id, control: control)
            }
            let rescued = try await queue.rescueExpiredLeases()
            let queuedAgain = try await queue.queueDueRetries()
            let moved = rescued + queuedAgain
            let rows = moved.isEmpty ? [] : try await queue.connection.query(
                "SELECT \(columns) FROM trailbook_jobs WHERE id = ANY($1::text[])", [.textArray(moved)]
            ).rows
            return Tended(renewed: renewed, controls: controls, rescued: rescued, queuedAgain: queuedAgain, rows: rows)
        }) { [weak self] result in
            guard let self else { return }
            let lost = self.renewed(sent, result.map(\.renewed))
            guard case .success(let tended) = result else {
                return completion(LeaseMaintenance(lost: [], controls: [], rescued: [], queuedAgain: []))
            }
            var byID: [String: JobRecord] = [:]
            for row in tended.rows { if let job = Self.record(row) { byID[job.id] = job } }
            completion(
                LeaseMaintenance(
                    lost: lost, controls: tended.controls.map { ($0.id, $0.control) },
                    rescued: tended.rescued.compactMap { byID[$0] }, queuedAgain: tended.queuedAgain.compactMap { byID[$0] }))
        }
    }

    /// What `maintainLeases` brings back from the store's thread.
    struct Tended: Sendable {
        struct Control: Sendable {
            var id: String
            var control: JobControl
        }
        var renewed: [PostgresJobQueue.Lease?]
        var controls: [Control]
        var rescued: [String]
        var queuedAgain: [String]
        var rows: [PostgresRow]
    }

    public func requestControl(_ control: JobControl, of id: String, completion: @escaping (Result<Bool, any Error>) -> Void) {
        let statement = PostgresStatement(
            """
            WITH asked AS (
                UPDATE trailbook_jobs SET control = $2 WHERE id = $1 AND state = 'running' RETURNING id, lease_daemon
            )
            SELECT pg_notify($3, lease_daemon || ' ' || $2 || ' ' || id) FROM asked
            """, [.text(id), .text(control.rawValue), .text(PostgresJobQueue.controlChannel)])
        sendWaitingAtMost({ database in try await database.queue!.connection.pipeline([statement])[0].rows }) { result in
            completion(result.map { !$0.isEmpty })
        }
    }

    /// One pipeline of `SELECT pg_notify('trailbook_feed', …)`, one per payload, each headed `<daemon id> <n>`;
    /// sent from the store's thread while the loop goes on.
    public func publishFeed(_ payloads: [String], completion: @escaping @Sendable (Bool) -> Void) {
        var statements: [PostgresStatement] = []
        for payload in payloads {
            feedPayloads += 1
            statements.append(
                PostgresStatement(
                    "SELECT pg_notify($1, $2)",
                    [.text(PostgresJobQueue.feedChannel), .text("\(owner.daemonID) \(feedPayloads)\n\(payload)")]))
        }
        let sent = statements
        send({ database in try await database.queue!.connection.pipeline(sent) }) { result in
            if case .success = result { completion(true) } else { completion(false) }
        }
    }

    /// `LISTEN` (then reads `trailbook_feed_relays`) or `UNLISTEN` on `trailbook_feed`, sent from the store's
    /// thread after the requests made before it.
    public func followFeed(_ follow: Bool, completion: @escaping @Sendable ([String: String]?) -> Void) {
        send({ database -> [String: String] in
            let connection = database.queue!.connection
            guard follow else {
                try await connection.unlisten(PostgresJobQueue.feedChannel)
                return [:]
            }
            try await connection.listen(PostgresJobQueue.feedChannel)
            // After the LISTEN: a relay registered later is heard from its first payload on.
            let rows = try await connection.query("SELECT instance, origin FROM trailbook_feed_relays").rows
            var relays: [String: String] = [:]
            for row in rows {
                if let instance = row.text(0), let origin = row.text(1) { relays[instance] = origin }
            }
            return relays
        }) { result in
            completion(try? result.get())
        }
    }

    /// An upsert into `trailbook_feed_relays`, sent from the store's thread before any later request (the relay's
    /// first payload).
    public func registerRelay(instance: String, origin: String) {
        let statement = PostgresStatement(
            """
            INSERT INTO trailbook_feed_relays (instance, origin, started_at) VALUES ($1, $2, now())
            ON CONFLICT (instance) DO UPDATE SET origin = EXCLUDED.origin, started_at = EXCLUDED.started_at
            """, [.text(instance), .text(origin)])
        send({ database in _ = try await database.queue!.connection.pipeline([statement]) }) { _ in }
    }

    /// Moves a lease found lost to `lostLeases`.
    func markLost(_ id: String) {
        if let lease = leases.removeValue(forKey: id) { lostLeases[id] = lease }
    }

    public func forgetLostLease(of id: String) { lostLeases[id] = nil }

    public func takeLostWrites() -> Set<String> {
        defer { lostWrites.removeAll() }
        return lostWrites
    }
}
