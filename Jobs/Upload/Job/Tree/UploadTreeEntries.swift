import TrailbookEngine
import TrailbookLoop

/// A folder upload's file list in the job store (`JobContext.entries`, issue 35), beside its checkpoint: every
/// file listed on the first run with what became of it (uploaded with its SHA-256, already there, failed with its
/// code, passed over with its reason), so `show ID --files` pages through all of them whatever their number,
/// while the checkpoint and `show` keep counts and the first few.
///
/// Positions: the files to upload first, in upload order (position = index in `UploadTreePlan.files`), then the
/// entries not uploaded (`UploadTreePlan.notUploaded`), in the order they were met. Each entry's item is
/// `{"path", "name"}` (`BytePath` JSON; `name` the destination name, absent for an entry passed over).
///
/// The per-file seam: `landed` and `failed` are called for each file's outcome, whichever destination sent it.
@LoopActor
enum UploadTreeEntries {
    /// Entries per store write on the first run.
    static let batchSize = 1_000

    /// Writes the list of the first run: clears what a walk cut short left, then the files to upload (pending,
    /// with `sizes`, aligned with `plan.files`) and the entries not uploaded with their outcome, in batches, then
    /// seals it. Call before the checkpoint that records the plan is saved: a crash in between lists again.
    /// - Throws: `JobError` `store_error`.
    static func write(_ plan: UploadTreePlan, sizes: [Int64], in job: JobContext) throws(JobError) {
        let entries = job.entries
        try entries.restart()
        var batch: [JobEntry] = []
        batch.reserveCapacity(batchSize)
        func add(_ entry: JobEntry) throws(JobError) {
            batch.append(entry)
            if batch.count == batchSize {
                try entries.append(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        for index in plan.files.indices {
            try add(
                JobEntry(
                    position: index, size: index < sizes.count ? sizes[index] : 0,
                    item: item(path: plan.files[index], name: plan.names[index])))
        }
        for (offset, other) in plan.notUploaded.enumerated() {
            try add(
                JobEntry(
                    position: plan.files.count + offset, size: other.size,
                    item: item(path: other.entry.path, name: other.entry.name), outcome: other.outcome))
        }
        try entries.append(batch)
        try entries.seal(count: plan.files.count + plan.notUploaded.count)
    }

    /// The hook a transfer calls as each file lands (`FileLanded`): records it done with its SHA-256. A refused
    /// write is logged; the file stays pending in the list (the checkpoint still knows it landed).
    static func landed(in job: JobContext) -> FileLanded {
        { index, file in
            do throws(JobError) {
                try job.entries.record([(index, .done(detail: file.sha256))])
            } catch {
                job.log(.warning, "\(file.name): landed, but the file list could not record it: \(error.message)")
            }
        }
    }

    /// Records that file `index` failed alone with `error` (`UploadCheckpoint.failFile`). Call before the
    /// checkpoint that moves past it is saved; a refused write is logged.
    static func failed(_ index: Int, error: JobError, in job: JobContext) {
        do throws(JobError) {
            try job.entries.record([(index, .failed(code: error.code, message: error.message))])
        } catch {
            job.log(.warning, "file \(index): failed, and the file list could not record it: \(error.message)")
        }
    }

    /// An entry's item: `{"path", "name"}`, the name left out when `nil`.
    static func item(path: BytePath, name: BytePath?) -> JSONValue {
        var members: [String: JSONValue] = ["path": path.json]
        if let name { members["name"] = name.json }
        return .object(members)
    }
}
