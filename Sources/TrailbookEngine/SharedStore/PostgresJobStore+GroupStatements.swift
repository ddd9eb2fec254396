import Foundation
import TrailbookPostgres

extension PostgresJobStore {
    /// The statements of one group commit (one transaction), and where their results are.
    struct GroupStatements {
        var statements: [PostgresStatement] = []
        /// The index of the new jobs' `INSERT … RETURNING id, sequence, created_at`, if there are new jobs.
        var insertIndex: Int?
        /// The index of the first lifecycle write; they follow in `updating`'s order, or are one set-based
        /// statement (`setBased`).
        var firstUpdate = 0
        /// Whether the lifecycle writes are one statement (`PostgresJobStore.writesStatement`).
        var setBased = false
        /// The jobs of the lifecycle writes, and the lease token each write was fenced by (`nil`: unleased).
        var updated: [(job: JobRecord, token: Int64?)] = []

        init(
            _ store: PostgresJobStore, inserting: [JobRecord], digests: [String?], duplicateKeys: [[String]],
            updating: [(job: JobRecord, addingCleanUp: Bool)]
        ) {
            // Set-based: one statement for every new job, one for all their duplicate keys.
            if !inserting.isEmpty {
                insertIndex = statements.count
                statements.append(PostgresJobStore.insertStatement(inserting, digests: digests))
                if let keys = PostgresJobStore.duplicateKeysStatement(inserting, duplicateKeys) { statements.append(keys) }
            }
            firstUpdate = statements.count
            updated = updating.map { ($0.job, store.fenceToken(of: $0.job.id)) }
            // Set-based when there are several, each of another job (two writes of one job keep their order as
            // two statements).
            if updating.count > 1, Set(updating.map(\.job.id)).count == updating.count {
                setBased = true
                statements.append(store.writesStatement(updating))
            } else {
                statements += updating.map { store.writeStatement($0.job, addingCleanUp: $0.addingCleanUp) }
            }
            // Wakes the other daemons that may claim the jobs (delivered at commit).
            statements += PostgresJobStore.workNotices(for: inserting + updating.map(\.job))
        }

        /// The new jobs as stored (their sequence numbers and timestamps), and the writes fenced off (their leases
        /// settled).
        func outcome(of results: [PostgresResult], _ inserting: [JobRecord], store: PostgresJobStore) -> GroupWritten {
            var inserted = inserting
            if let insertIndex {
                var rows: [String: PostgresRow] = [:]
                for row in results[insertIndex].rows { if let id = row.text(0) { rows[id] = row } }
                for index in inserted.indices {
                    guard let row = rows[inserted[index].id] else { continue }
                    inserted[index].sequence = row.int(1) ?? 0
                    if let created = row.double(2) {
                        inserted[index].createdAt = Timestamp.iso8601(unixSeconds: created)
                        inserted[index].updatedAt = inserted[index].createdAt
                    }
                }
            }
            let written: [Bool]
            if setBased {
                let ids = Set(results[firstUpdate].rows.compactMap { $0.text(0) })
                written = updated.map { ids.contains($0.job.id) }
            } else {
                written = results[firstUpdate..<firstUpdate + updated.count].map { !$0.rows.isEmpty }
            }
            let lost = store.settle(updated, written: written)
            return GroupWritten(inserted: inserted, lost: lost)
        }
    }
}
