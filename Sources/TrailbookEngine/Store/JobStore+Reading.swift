/// The SQLite store's answers to the calls a shared store answers without waiting: a local read is short, so it
/// answers at once, before the call returns, and callers have one path for both stores.
extension JobStore {
    /// The jobs `query` selects, read at once; with `counting`, the unfinished states' counts (`countsByState`).
    public func read(_ query: JobQuery, counting: Bool, completion: @escaping (Result<JobReading, any Error>) -> Void) {
        completion(
            Result {
                let counts = try counting ? countsByState().filter { !$0.key.isTerminal } : nil
                switch query {
                case .idPrefix(let prefix, let limit):
                    return JobReading(jobs: try jobs(idPrefix: prefix, limit: limit), unfinishedCounts: counts)
                case .filtered(let states, let kind, let before, let limit):
                    return JobReading(
                        jobs: try jobs(states: states, kind: kind, before: before, limit: limit), unfinishedCounts: counts)
                case .idempotencyKey(let key):
                    let found = try job(key: key)
                    return JobReading(
                        jobs: found.map { [$0.job] } ?? [], unfinishedCounts: counts, submitDigest: found?.digest)
                case .unfinished(let keys, let kind):
                    return JobReading(jobs: try unfinishedJobs(sharing: keys, kind: kind), unfinishedCounts: counts)
                }
            })
    }

    /// `countsByState()` of the unfinished states, answered at once.
    public func countUnfinished(completion: @escaping (Result<[JobState: Int], any Error>) -> Void) {
        completion(Result { try countsByState().filter { !$0.key.isTerminal } })
    }
}
