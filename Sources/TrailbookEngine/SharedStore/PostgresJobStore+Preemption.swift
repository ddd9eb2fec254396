import Foundation
import TrailbookPostgres

// Preemption on the shared store: the claim of a job that takes a running job's slot.
extension PostgresJobStore {
    public func sendClaim(
        outranking priority: Int, kinds: [String], completion: @escaping (Result<[ClaimedRun], any Error>) -> Void
    ) {
        guard !kinds.isEmpty else { return completion(.success([])) }
        let owner = self.owner
        let seconds = leaseSeconds
        let queues = self.queues
        let running = Array(leases.keys) + Array(lostLeases.keys)
        let claim: @Sendable (isolated PostgresStoreActor) async throws -> [PostgresJobQueue.ClaimedJob] = { database in
            try await database.queue!.claim(
                owner: owner, queues: queues, kinds: kinds, limit: 1, leaseSeconds: seconds, excluding: running,
                outranking: priority, alsoReturning: Self.columnList)
        }
        sendWaitingAtMost(claim) { [weak self] result in
            guard let self else { return }
            completion(result.map { self.took($0) })
        }
    }
}
