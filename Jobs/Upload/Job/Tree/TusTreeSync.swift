import TrailbookEngine
import TrailbookLoop
import TusClient

#if canImport(Glibc)
    import Glibc
#endif

/// "Send only what changed" for a folder upload to a tus endpoint. A tus server cannot be listed, so what is
/// there is what this daemon's jobs (or those of daemons sharing its store) remember uploading there
/// (`JobContext.uploadMemory`: endpoint + name → size, SHA-256, upload URL). Before the first attempt sends
/// anything, each file whose name is remembered as a complete upload of the same size is compared by SHA-256 —
/// the remembered source's when its `stat` is unchanged (`TreeSyncMemory`, the stat cache), else read and hashed
/// here; when it is the same, one `HEAD` of the remembered upload URL checks the server still holds it whole
/// (`Upload-Offset` = `Upload-Length` = the size), and then the file is left out of the job (`already_there`).
/// An upload the server no longer has (404, 410) is forgotten and the file sent; any other doubt (the server
/// does not answer, the hash cannot be read) sends it. Uploads made by other clients are not known, and nothing
/// on the server is ever deleted.
@LoopActor
enum TusTreeSync {
    /// The indices of `plan`'s files that `endpoint` is known to hold with the same bytes.
    /// - Parameters:
    ///   - identities: the identities of `plan.files`, aligned with them.
    ///   - phase: told of each file checked with the server (the stall timeout's heartbeat).
    /// - Throws: `JobError` `store_error` when the upload memory cannot be read, `JobStopped` when stopped.
    static func unchanged(
        _ plan: UploadTreePlan, identities: [SourceIdentity], params: UploadJob.Params, endpoint: String,
        attemptStart: Double, phase: UploadListingPhase, in job: JobContext
    ) async throws -> [Int] {
        let memory = job.uploadMemory
        guard memory.isKept else { return [] }
        var remembered = try TreeSyncMemory.load(
            plan, destination: .tus(endpoint: endpoint), params: params, attemptStart: attemptStart, in: job)
        defer { remembered.write(in: job) }
        guard !remembered.rows.isEmpty else { return [] }
        let client = try TusUploadRun.client(for: params, endpoint: endpoint, quiet: NetworkQuietLimit(for: job))
        var same: [Int] = []
        for index in plan.files.indices {
            guard let upload = remembered.remembered(index), let sha256 = upload.state.sha256,
                upload.size == identities[index].size
            else { continue }
            try job.checkCancellation()
            phase.reached(index, in: job)
            let source = plan.files[index]
            let known = remembered.knownSHA256(index, path: source, identity: identities[index])
            if known == nil {
                guard try await SteppedSHA256.hexDigest(of: source, flags: 0, in: job) == sha256 else { continue }
            }
            do {
                let status = try await client.status(of: upload.location)
                if status.offset == upload.size, status.length == nil || status.length == upload.size {
                    same.append(index)
                    if known != nil { remembered.vouched += 1 }
                    if known == nil {
                        remembered.prove(
                            index, path: source, identity: identities[index], sha256: sha256,
                            location: upload.location)
                    }
                }
            } catch where error.code == .gone {
                job.log(.info, "\(plan.names[index]): the server no longer has \(upload.location); it is sent")
                try memory.forget(destination: endpoint, name: plan.names[index].bytes)
            } catch {
                try job.checkCancellation()
                job.log(.info, "\(plan.names[index]): could not check \(upload.location) (\(error)); it is sent")
            }
        }
        return same
    }
}
