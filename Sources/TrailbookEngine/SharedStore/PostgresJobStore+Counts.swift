import TrailbookPostgres

extension PostgresJobStore {
    /// Every daemon's unfinished jobs by state (`countsStatement`), one round trip without holding the loop; the
    /// store's request timeout applies (then `JobStoreError.unavailable`).
    public func countUnfinished(completion: @escaping (Result<[JobState: Int], any Error>) -> Void) {
        sendWaitingAtMost({ database in try await database.queue!.connection.pipeline([Self.countsStatement])[0].rows }) {
            completion($0.map(Self.counts))
        }
    }
}
