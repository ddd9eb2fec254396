import TrailbookEngine

#if canImport(Glibc)
    import Glibc
#endif

/// Lists the sources of a folder upload a page at a time (`next`), in order: a folder's files by their relative
/// paths (`UploadTreeWalk`), a file given by itself by its name; each file a destination cannot take, or that would
/// land on another's name, is that file's failure (`UploadTreePlan.nameProblem`, `duplicate_name`). What a page
/// holds is all that is held: the first run writes each page to the job's file list and drops it, so a tree of
/// 100 000 files is never in memory at once. (Only an upload of several sources keeps every name it listed, to
/// catch two that land on one name.)
///
/// Blocking (`stat`, the walk): call `next` on the thread pool, one call at a time (it is `Sendable` so a pool
/// call can take it; it is not safe to call from two threads at once).
final class UploadTreeLister: @unchecked Sendable {
    private let sources: [BytePath]
    private let destination: UploadDestination
    private let filter: UploadFilter
    private let followLinks: Bool
    /// Whether two files of one name clash at the destination (several sources, not tus).
    private let clashes: Bool
    /// With `clashes`: the source of each name listed so far.
    private var taken: [BytePath: BytePath] = [:]
    /// The index in `sources` of the next source to start.
    private var nextSource = 0
    /// The walk of the folder being listed, if any.
    private var walk: UploadTreeWalk?

    /// A listing of `sources` for an upload to `destination`, leaving out what `filter` excludes, following
    /// symbolic links when `followLinks`.
    init(_ sources: [BytePath], destination: UploadDestination, filter: UploadFilter, followLinks: Bool) {
        self.sources = sources
        self.destination = destination
        self.filter = filter
        self.followLinks = followLinks
        clashes = sources.count > 1 && UploadTreePlan.namesCollide(at: destination)
    }

    /// Lists on until `limit` files to upload or `limit` entries not uploaded were met, or the sources end.
    /// - Returns: the page (its `files` and `names`; the entries passed over or failed in its counts and its
    ///   `notUploaded`, in the order met) and the identities of its files; `nil` once every source was listed.
    /// - Throws: `JobError` `source_missing`, `source_unreadable`, `source_not_regular` (a source given that is
    ///   neither a file nor a folder), `bad_name` (a file given by itself that has no name).
    func next(limit: Int) throws(JobError) -> (plan: UploadTreePlan, identities: [SourceIdentity])? {
        var plan = UploadTreePlan()
        var identities: [SourceIdentity] = []
        var met = false
        while plan.files.count < limit, plan.notUploaded.count < limit {
            if let item = walk?.next() {
                switch item {
                case .file(let file):
                    add(file.path, name: file.relative, identity: file.identity, to: &plan, &identities)
                case .skip(let skip):
                    plan.skip(UploadTreePlan.Entry(path: skip.path, reason: skip.reason, message: skip.message))
                }
                continue
            }
            walk = nil
            guard nextSource < sources.count else { break }
            let source = sources[nextSource]
            nextSource += 1
            met = true
            var info = stat()
            guard source.withCString({ stat($0, &info) }) == 0 else { throw DirectoryIO.sourceError(source, errno) }
            let mode = UInt32(info.st_mode)
            if DirectoryIO.isDirectory(mode) {
                walk = try UploadTreeWalk(
                    root: source, node: FileNode(inode: UInt64(info.st_ino), device: UInt64(info.st_dev)),
                    filter: filter, followLinks: followLinks)
            } else if DirectoryIO.isRegular(mode) {
                let name = try UploadNames.name(ofSource: source)
                add(source, name: name, identity: DirectoryIO.identity(info), to: &plan, &identities)
            } else {
                throw JobError(
                    code: "source_not_regular",
                    message: "source \(source) is a \(UploadTreeWalk.kind(mode)), neither a file nor a folder; "
                        + "upload files or folders")
            }
        }
        return met || !plan.files.isEmpty || !plan.notUploaded.isEmpty ? (plan, identities) : nil
    }

    /// Takes the file into `plan`, or lists it there as failed when the destination cannot take its name or
    /// another file already has it.
    private func add(
        _ path: BytePath, name: BytePath, identity: SourceIdentity, to plan: inout UploadTreePlan,
        _ identities: inout [SourceIdentity]
    ) {
        if let problem = UploadTreePlan.nameProblem(name, destination: destination) {
            plan.fail(UploadTreePlan.Entry(path: path, name: name, reason: "bad_name", message: problem))
            return
        }
        if clashes {
            if let other = taken[name] {
                plan.fail(
                    UploadTreePlan.Entry(
                        path: path, name: name, reason: "duplicate_name",
                        message: "'\(path)' and '\(other)' would both be written as '\(name)'; rename one, or upload "
                            + "them in two jobs to different destinations"))
                return
            }
            taken[name] = path
        }
        plan.files.append(path)
        plan.names.append(name)
        identities.append(identity)
    }
}
