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

// Lookup: `job`, `list` and their shared-store forms, id prefixes, and what this daemon knows that the store does not yet.
extension Scheduler {
    /// The job whose id is `idOrPrefix` or starts with it, with live progress if it is running.
    /// - Throws: `JobError` `no_such_job`, or `ambiguous_id` when the prefix names several jobs.
    public func job(_ idOrPrefix: String) throws(JobError) -> JobRecord {
        let id = try resolve(idOrPrefix)
        if let active = running[id] { return live(active) }
        guard let job = current(id) else { throw JobError(code: "no_such_job", message: "no job \(id)") }
        return job
    }

    /// Jobs, optionally filtered by state and kind and submitted before the job whose `sequence` is `before` (a
    /// page's cursor), the newest `limit` of them, oldest first; running ones with live progress.
    /// Jobs whose new state the store has not taken yet are listed in that state.
    /// - Throws: `JobError` `store_busy` (another process locks even readers out), `store_error`.
    public func list(
        states: [JobState]?, kind: String?, before: Int64? = nil, limit: Int
    ) throws(JobError) -> [JobRecord] {
        let stored: [JobRecord]
        do {
            stored = try store.jobs(states: states, kind: kind, before: before, limit: listRoom(limit))
        } catch {
            throw Self.readError(error)
        }
        return overlaid(stored, states: states, kind: kind, before: before, limit: limit)
    }

    /// `list`, answered without holding the loop while a shared store reads (one round trip, up to its request
    /// timeout in an outage): the other clients, the feed and the running jobs go on meanwhile. The SQLite store
    /// answers at once.
    /// - Throws: what `list` throws; `store_unavailable` when the shared store does not answer.
    /// - Returns: the jobs, and `summaryCounts()` as of the same reading (a shared store counts in the same round
    ///   trip).
    public func fetchList(
        states: [JobState]?, kind: String?, before: Int64? = nil, limit: Int
    ) async throws(JobError) -> (jobs: [JobRecord], counts: [JobState: Int]) {
        let reading = try await read(
            .filtered(states: states, kind: kind, before: before, limit: listRoom(limit)), counting: counts.fromStore)
        if let stored = reading.unfinishedCounts { counts.heard(stored.filter { !$0.key.isTerminal }) }
        // What changed here while the store answered is overlaid as it is now.
        return (overlaid(reading.jobs, states: states, kind: kind, before: before, limit: limit), summaryCounts())
    }

    /// How many rows a list of `limit` reads: room for those the overlay moves out of the asked states (starts
    /// not written yet).
    private func listRoom(_ limit: Int) -> Int {
        let room = pendingWrites.recordIDs.count + groupCommit.starts.count
        return limit > Int.max - room ? Int.max : limit + room
    }

    /// The stored jobs with this daemon's newer states over them (unwritten records and starts), filtered by
    /// `states`, `kind` and `before`, the newest `limit` in submission order, running ones with live progress.
    private func overlaid(
        _ stored: [JobRecord], states: [JobState]?, kind: String?, before: Int64?, limit: Int
    ) -> [JobRecord] {
        var jobs = stored
        let unwritten = pendingWrites.records.merging(groupCommit.starts) { unsaved, _ in unsaved }
        if !unwritten.isEmpty {
            jobs = jobs.map { unwritten[$0.id] ?? $0 }
            let listed = Set(jobs.map(\.id))
            jobs += unwritten.values.filter { job in
                !listed.contains(job.id) && (kind == nil || job.kind == kind)
                    && before.map { job.sequence < $0 } ?? true
            }
            jobs = Array(jobs.filter { states?.contains($0.state) ?? true }.sorted { $0.sequence < $1.sequence }.suffix(limit))
        }
        return jobs.map { running[$0.id].map(live) ?? $0 }
    }

    /// `job(_:)`, answered without holding the loop while a shared store reads, as `fetchList` is; a job this
    /// daemon runs or holds unwritten is answered at once, as by `job(_:)`.
    /// - Throws: what `job(_:)` throws; `store_unavailable` when the shared store does not answer.
    public func fetchJob(_ idOrPrefix: String) async throws(JobError) -> JobRecord {
        let key = try Self.idKey(idOrPrefix)
        guard running[key] == nil, pendingWrites.record(key) == nil else { return try job(idOrPrefix) }
        // The prefix's rows are the jobs themselves: one round trip.
        let matches = try await read(.idPrefix(key, limit: 2), counting: false).jobs
        let id = try Self.chosen(matches, for: idOrPrefix)
        if let active = running[id] { return live(active) }
        return current(id, stored: matches.first { $0.id == id })!
    }

    /// What `query` selects, read without holding the loop (`JobStoring.read`; the SQLite store answers at once),
    /// made into an answer by `answer`.
    func answer<Answer>(_ query: JobQuery, _ answer: (JobReading) -> Answer) async -> Result<Answer, any Error> {
        await reading(query, counting: false).map(answer)
    }

    /// `store.read(query, counting:)`, awaited.
    func reading(_ query: JobQuery, counting: Bool) async -> Result<JobReading, any Error> {
        await withCheckedContinuation { continuation in
            store.read(query, counting: counting) { continuation.resume(returning: $0) }
        }
    }

    /// `reading(_:counting:)`, its failure thrown as `readError`.
    func read(_ query: JobQuery, counting: Bool) async throws(JobError) -> JobReading {
        switch await reading(query, counting: counting) {
        case .success(let reading): return reading
        case .failure(let error): throw Self.readError(error)
        }
    }

    /// The error of a read the store refused.
    private static func readError(_ error: any Error) -> JobError {
        let refusal = StoreRefusal(error)
        return JobError(code: refusal.readErrorCode, message: "cannot read the job store: \(refusal.cause) (\(refusal)); try again")
    }

    func resolve(_ idOrPrefix: String) throws(JobError) -> String {
        let key = try Self.idKey(idOrPrefix)
        // A job this daemon runs or holds unwritten is known without the store (which may be unreachable).
        if running[key] != nil || pendingWrites.record(key) != nil { return key }
        let matches: [JobRecord]
        do {
            matches = try store.jobs(idPrefix: key, limit: 2)
        } catch {
            throw Self.readError(error)
        }
        return try Self.chosen(matches, for: idOrPrefix)
    }

    /// `idOrPrefix` in lower case.
    /// - Throws: `JobError` `no_such_job` when it cannot be a job id or its prefix.
    private static func idKey(_ idOrPrefix: String) throws(JobError) -> String {
        let key = idOrPrefix.lowercased()
        guard !key.isEmpty, key.count <= 36, key.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
            throw JobError(code: "no_such_job", message: "'\(idOrPrefix)' is not a job id (a UUID or its prefix)")
        }
        return key
    }

    /// The id of the job `idOrPrefix` names among `matches` (at most two of the jobs whose id starts with it).
    /// - Throws: `JobError` `no_such_job` for none, `ambiguous_id` for several without an exact match.
    private static func chosen(_ matches: [JobRecord], for idOrPrefix: String) throws(JobError) -> String {
        if let exact = matches.first(where: { $0.id == idOrPrefix.lowercased() }) { return exact.id }
        switch matches.count {
        case 0: throw JobError(code: "no_such_job", message: "no job with id \(idOrPrefix); see `trailbook-jobs list`")
        case 1: return matches[0].id
        default:
            throw JobError(code: "ambiguous_id", message: "'\(idOrPrefix)' matches several jobs; give more of the id")
        }
    }

    /// A job as the daemon knows it: its unwritten record if the store refused it, else the stored one.
    func current(_ id: String) -> JobRecord? {
        // The store is read only when needed: on a shared store a read is a round trip on the loop.
        if let unwritten = current(id, stored: nil) { return unwritten }
        return (try? store.job(id: id)) ?? nil
    }

    /// `current(_:)` with the stored row already read (`stored`, `nil` if the store has none or could not say).
    func current(_ id: String, stored: JobRecord?) -> JobRecord? {
        pendingWrites.record(id) ?? groupCommit.starts[id] ?? stored
    }

    func live(_ active: RunningJob) -> JobRecord {
        var job = active.record
        job.progress = active.context.progress
        return job
    }
}
