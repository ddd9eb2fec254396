import TrailbookEngine
import TrailbookLoop

/// "Send only what changed" for a folder upload, on every destination: before the first attempt sends anything,
/// the files the destination already holds with the same bytes are left out of the job (`already_there`). How a
/// destination tells is its own: `DirectoryTreeSync` (`file://`: size, then SHA-256 of both sides), `S3TreeSync`
/// (the prefix's listing and the objects' ETags or SHA-256 checksums), `TusTreeSync` (tus cannot list: the upload
/// memory of what this daemon's jobs uploaded there, checked with a `HEAD`). All three read a file only when the
/// upload memory's stat cache cannot vouch for it (`TreeSyncMemory`, `LandedFilesMemory`). `--again`
/// (`Params.again`) skips it and sends every file. Nothing at the destination is ever deleted.
///
/// The comparison runs on each page of the first run's listing (`UploadTreeListing`) as it is listed. What it
/// keeps between pages is where it is in S3's listing of the prefix (`S3ListingMarch`: a page of it; with several
/// sources, the whole listing, `S3PrefixListing`).
@LoopActor
struct UploadTreeSync {
    let destination: UploadDestination
    let params: UploadJob.Params
    /// When the attempt started (Unix seconds): the stat cache's bound (`TreeSyncMemory`).
    let attemptStart: Double
    /// What the listing reports as it goes (files compared within a page).
    let phase: UploadListingPhase
    /// S3: the prefix's objects, listed from the first page on.
    private var s3Listing: S3TreeSync.Objects?

    /// A comparison with `destination` for an upload of `params` in an attempt started at `attemptStart`,
    /// reporting how far it got to `phase`.
    init(destination: UploadDestination, params: UploadJob.Params, attemptStart: Double, phase: UploadListingPhase) {
        self.destination = destination
        self.params = params
        self.attemptStart = attemptStart
        self.phase = phase
    }

    /// Takes out of `plan` (a page of the listing; `identities` aligned with its files) each file the destination
    /// already holds with the same bytes, counting them in `plan.unchangedCount` / `unchangedBytes` and listing
    /// them in its `notUploaded`.
    /// - Throws: `JobStopped` when stopped; for S3, `JobError` when the listing fails for good; for tus,
    ///   `store_error` when the upload memory cannot be read.
    mutating func leaveOutUnchanged(
        _ plan: inout UploadTreePlan, identities: inout [SourceIdentity], in job: JobContext
    ) async throws {
        guard !plan.files.isEmpty else { return }
        switch destination {
        case .directory(let path):
            try await DirectoryTreeSync.leaveOutUnchanged(
                &plan, identities: &identities, directory: path, params: params, attemptStart: attemptStart,
                phase: phase, in: job)
        case .s3(let bucket, let prefix):
            let same = try await S3TreeSync.unchanged(
                plan, identities: identities, params: params, bucket: bucket, prefix: prefix,
                attemptStart: attemptStart, listing: &s3Listing, phase: phase, in: job)
            plan.leaveOut(same, identities: &identities)
        case .tus(let endpoint):
            let same = try await TusTreeSync.unchanged(
                plan, identities: identities, params: params, endpoint: endpoint, attemptStart: attemptStart,
                phase: phase, in: job)
            plan.leaveOut(same, identities: &identities)
        }
    }
}

extension UploadTreePlan {
    /// Takes the files at `indices` (already at the destination) out of the plan and of `identities` (aligned
    /// with `files`), counting them and their bytes as `already_there` and listing each in `notUploaded` (so the
    /// job's file list records it).
    mutating func leaveOut(_ indices: [Int], identities: inout [SourceIdentity]) {
        guard !indices.isEmpty else { return }
        let out = Set(indices)
        for index in out.sorted() {
            let size = identities[index].size
            unchangedCount += 1
            unchangedBytes += size
            notUploaded.append(
                NotUploaded(
                    entry: Entry(
                        path: files[index], name: names[index], reason: "already_there",
                        message: "the destination holds the same bytes"),
                    size: size, outcome: .alreadyThere))
        }
        let kept = files.indices.filter { !out.contains($0) }
        files = kept.map { files[$0] }
        names = kept.map { names[$0] }
        identities = kept.map { identities[$0] }
    }
}
