import TrailbookEngine
import TrailbookLoop
import TusClient

/// The tus upload's use of the upload memory (`JobContext.uploadMemory`): every upload it creates is remembered
/// (`.created`, before its first `PATCH`) and every one it completes (`.complete` with its SHA-256, before the
/// checkpoint that records it, which a folder of small files saves only now and then: `LandedFilesCadence`).
/// A run that resumes after a `kill -9` therefore finds, for the files its checkpoint does not show as landed,
/// what this job already did: a complete upload is taken as landed without sending the file again, a created one
/// is resumed from the server's offset instead of being left on the server and made anew. A `cancel` or a failed
/// end deletes the created uploads it finds there too. What the memory cannot cover: an upload the server made
/// in the moment between a `POST` and the store write that follows its answer (the tus protocol has no way to
/// ask the server for it); the server's expiration, if it has one, removes it.
extension TusUploadRun {
    /// This job's own remembered uploads of the files from `start` on, by index (a failed read is logged: the
    /// files are then sent as if nothing were remembered). A name that two of the job's files share (single files
    /// given from two folders: tus names are only metadata) is left out: its row cannot tell which file it was.
    ///
    /// The names are read a page at a time (`UploadFileList.forEachNamePage`) and looked up a page at a time.
    func ownRemembered(from start: Int, in job: JobContext) -> [Int: RememberedFile] {
        let memory = job.uploadMemory
        guard memory.isKept, start < files.count else { return [:] }
        var own: [Int: RememberedFile] = [:]
        var ownNames: [[UInt8]: Int] = [:]
        do throws(JobError) {
            var first = 0
            try files.forEachNamePage { names throws(JobError) in
                defer { first += names.count }
                guard first + names.count > start else { return }
                let wanted = names[max(0, start - first)...].map(\.bytes)
                let found = try memory.remembered(destination: endpoint, names: wanted)
                for (offset, name) in names.enumerated() where first + offset >= start {
                    if let upload = found[name.bytes], upload.jobID == job.id {
                        own[first + offset] = upload
                        ownNames[name.bytes] = 0
                    }
                }
            }
            guard !own.isEmpty else { return own }
            // A name two of the job's files share: its row cannot tell which file it was.
            try files.forEachNamePage { names in
                for name in names where ownNames[name.bytes] != nil { ownNames[name.bytes]! += 1 }
            }
        } catch {
            job.log(.warning, "the upload memory could not be read (\(error.message)); files are sent again")
            return [:]
        }
        return own.filter { ownNames[(try? files.name($0.key))?.bytes ?? []] == 1 }
    }

    /// Remembers this job's upload of file `index` at `url` in `state` (a refused write is logged: a crash then
    /// sends the file again, as without a memory).
    func remember(_ index: Int, url: String, size: Int64, state: RememberedFile.State, in job: JobContext) {
        let memory = job.uploadMemory
        guard memory.isKept else { return }
        do throws(JobError) {
            try memory.remember(
                destination: endpoint, name: try files.name(index).bytes, size: size, state: state, location: url)
        } catch {
            job.log(.warning, "\(files.label(index)): the upload memory could not record \(url): \(error.message)")
        }
    }

    /// File `index` (at or past `checkpoint.fileIndex`) landed in an earlier attempt of this job, whose checkpoint
    /// was not saved after it (`upload`, complete in the memory): records it as landed (`land`), as `upload` would
    /// have, without sending it. The source is checked first: one that changed since fails the file
    /// (`source_changed`) as a changed file does.
    /// - Throws: `source_changed`, `source_missing`; `store_write_failed` (the checkpoint).
    func adopt(
        _ remembered: RememberedFile, index: Int, sha256: String, checkpoint: inout UploadCheckpoint,
        cadence: inout LandedFilesCadence, progress: TusProgress, in job: JobContext
    ) async throws {
        let listed = try files.file(index)
        let path = listed.path
        let identity = listed.identity
        _ = try await job.runOnPool { try TusSource.open(path, expected: identity) }
        var file = UploadedFile(
            name: listed.name, path: BytePath(remembered.location), bytes: remembered.size, sha256: sha256,
            bytesResent: index == checkpoint.fileIndex ? checkpoint.fileBytesResent : 0, url: remembered.location)
        // Whether the server verified it was not remembered: not claimed.
        file.checksumVerified = false
        job.log(.info, "\(listed.name): landed before the last stop as \(remembered.location); not sent again")
        try await land(index, file, checkpoint: &checkpoint, cadence: &cadence, progress: progress, in: job)
    }

    /// The uploads this job created and the memory still shows as only created, for the files from `start` on:
    /// what a clean-up deletes beside the checkpoint's `uploadURL`.
    func ownCreated(from start: Int, in job: JobContext) -> [(index: Int, url: String)] {
        ownRemembered(from: start, in: job).compactMap { index, upload in
            upload.state == .created ? (index, upload.location) : nil
        }.sorted { $0.index < $1.index }
    }

    /// Forgets file `index`'s remembered upload (deleted on the server); a refused write is logged.
    func forget(_ index: Int, in job: JobContext) {
        let memory = job.uploadMemory
        guard memory.isKept, index < files.count else { return }
        do throws(JobError) {
            try memory.forget(destination: endpoint, name: try files.name(index).bytes)
        } catch {
            job.log(.warning, "\(files.label(index)): the upload memory could not forget it: \(error.message)")
        }
    }
}
