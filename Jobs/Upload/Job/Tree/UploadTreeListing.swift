import TrailbookEngine
import TrailbookLoop

/// A folder upload's first run takes its file list a page at a time: it lists `pageSize` files
/// (`UploadTreeLister`, on the thread pool), leaves out of them those the destination already holds
/// (`UploadTreeSync`, unless `--again`), writes the page to the job's file list (`JobEntries`) and drops it before
/// listing the next. Memory holds one page, not the tree, whatever its number of files.
///
/// Positions are given as entries are written: the files to upload from 0 on, in upload order (the transfers read
/// file `i` at position `i`, `UploadFileList`); the entries not uploaded (passed over, failed at listing, already
/// there) from `notUploadedBase` on, in the order met. Once the walk is done, one store statement moves those to
/// follow the files, and the list is sealed. A crash before the seal leaves a list that is not sealed: the next
/// attempt has no checkpoint, lists again, and `JobEntries.restart` drops what was written.
///
/// Listing moves no byte: it reports what it does as the job's phase (`UploadListingPhase`), the stall timeout's
/// heartbeat, each page and each file compared.
@LoopActor
enum UploadTreeListing {
    /// Where the entries not uploaded are written while the list is taken: past any number of files a job can
    /// list (2^40).
    nonisolated static let notUploadedBase = 1 << 40

    /// Files (or entries not uploaded) per page when a submit looks for two files of one name.
    nonisolated static let pageSizeAtSubmit = 1_000

    /// Tests only: seconds to wait after each page is written (`UploadJob.setListingPauseForTests`), so that an
    /// end-to-end test can stop the daemon while the list is being taken. 0 otherwise.
    static var pauseForTests: Double = 0

    /// Lists `params.files` for an upload to `destination` into the job's file list and seals it (see the type).
    /// - Parameter attemptStart: when this attempt started (Unix seconds), the stat cache's bound.
    /// - Returns: the counts of the listing (its `files` and `names` empty; `notUploaded` empty) and the number of
    ///   files to upload.
    /// - Throws: `JobError` from listing (`source_missing`, `source_unreadable`, `source_not_regular`, `bad_name`),
    ///   from the sync comparison (`UploadTreeSync`), `store_error`; `JobStopped` when stopped.
    static func take(
        _ params: UploadJob.Params, destination: UploadDestination, attemptStart: Double, in job: JobContext
    ) async throws -> (plan: UploadTreePlan, fileCount: Int) {
        let lister = UploadTreeLister(
            params.files, destination: destination, filter: try params.filter(), followLinks: params.followLinks)
        let entries = job.entries
        try entries.restart()
        var total = UploadTreePlan()
        let phase = UploadListingPhase(again: params.again)
        var sync = UploadTreeSync(destination: destination, params: params, attemptStart: attemptStart, phase: phase)
        var files = 0
        var others = 0
        let limit = UploadFileList.pageSize
        if !params.again { try TreeSyncMemory.forgetStale(in: job) }
        while let listed = try await job.runOnPool({ try lister.next(limit: limit) }) {
            try job.checkCancellation()
            var (page, identities) = listed
            if !params.again { try await sync.leaveOutUnchanged(&page, identities: &identities, in: job) }
            try write(page, identities: identities, files: &files, others: &others, in: entries)
            for entry in page.failed.prefix(max(0, UploadTreePlan.listed - total.failed.count)) {
                job.log(.warning, "\(entry.path): \(entry.reason): \(entry.message)")
            }
            total.count(page)
            phase.checked(page.files.count + page.notUploaded.count, in: job)
            if pauseForTests > 0 { try await job.sleep(seconds: pauseForTests) }
        }
        try entries.move(from: notUploadedBase, to: files)
        try entries.seal(count: files + others)
        job.endPhase()
        return (total, files)
    }

    /// Appends `page` to the list: its files at `files`… (with their `identities`, pending), its entries not
    /// uploaded at `notUploadedBase + others`… (with their outcome); moves both counts on.
    /// - Throws: `JobError` `store_error`.
    private static func write(
        _ page: UploadTreePlan, identities: [SourceIdentity], files: inout Int, others: inout Int,
        in entries: JobEntries
    ) throws(JobError) {
        var batch: [JobEntry] = []
        batch.reserveCapacity(page.files.count)
        for index in page.files.indices {
            batch.append(
                JobEntry(
                    position: files + index, size: identities[index].size,
                    item: UploadTreeEntries.item(
                        path: page.files[index], name: page.names[index], identity: identities[index])))
        }
        try entries.append(batch)
        files += batch.count
        batch.removeAll(keepingCapacity: true)
        for (offset, other) in page.notUploaded.enumerated() {
            batch.append(
                JobEntry(
                    position: notUploadedBase + others + offset, size: other.size,
                    item: UploadTreeEntries.item(path: other.entry.path, name: other.entry.name),
                    outcome: other.outcome))
        }
        try entries.append(batch)
        others += batch.count
    }
}
