import TrailbookEngine
import TrailbookLoop

/// The files an upload sends, by index in upload order: each one's source path, its name at the destination and
/// the identity it had when the job first ran (`SourceIdentity`). The transfers read their files through it.
///
/// Where the files are (`Source`):
/// - in memory, for files given one by one, library photos and folder uploads that began with a version-1
///   checkpoint: the paths and names given, the identities once the job's checkpoint has them (`capture`);
/// - in the job's file list in the store (`UploadTreeEntries`), for a folder upload with a version-2 checkpoint:
///   read a page of `pageSize` entries at a time when a file on it is asked for, keeping the last `keptPages`
///   pages, so an upload of 100 000 files holds a few thousand entries, not 100 000 (the transfers ask for the
///   file in progress and the few in flight beside it).
///
/// Errors: `store_error` (retryable) when the store cannot be read; `bad_checkpoint` (not retryable: cancel the job
/// and submit it again) when the list does not hold the file asked for as the checkpoint expects it.
@LoopActor
final class UploadFileList {
    /// One file of the list.
    struct File: Sendable, Equatable {
        /// The source's absolute path.
        var path: BytePath
        /// Its name at the destination (relative, `/`-separated).
        var name: BytePath
        /// Its identity when the job first ran.
        var identity: SourceIdentity
    }

    /// Where the files are; see the type's documentation.
    enum Source {
        /// Paths and names given in memory (aligned); identities come from the checkpoint (`capture`).
        case memory(paths: [BytePath], names: [BytePath])
        /// The job's file list in the store (`entries`), its first `count` entries being the files to upload.
        case store(JobEntries, count: Int)
    }

    /// A run of consecutive files read from the store.
    private struct Page {
        /// The index of its first file.
        var start: Int
        /// Its files, from `start` on.
        var files: [File]
        /// The indices among them whose entry is `failed` in the store (a file that failed alone).
        var failed: Set<Int>
    }

    /// Entries read per store call by the lists made from now on: 1 000. (Tests lower it to cross page boundaries
    /// with a few files.)
    static var pageSize = 1_000

    /// Pages kept in memory: the file in progress and those sent alongside it (S3 single `PUT`s run ahead of it)
    /// may straddle a page boundary.
    static let keptPages = 3

    private let source: Source
    private var identities: [SourceIdentity] = []
    /// The pages kept, the one used last at the end.
    private var pages: [Page] = []
    private let pageSize: Int

    /// The number of files.
    let count: Int

    /// Pages held now (at most `keptPages`).
    var pagesHeld: Int { pages.count }

    /// Files given in memory: `paths` and their destination `names` (aligned).
    init(paths: [BytePath], names: [BytePath]) {
        precondition(paths.count == names.count, "a name for every path")
        source = .memory(paths: paths, names: names)
        count = paths.count
        pageSize = Self.pageSize
    }

    /// The first `count` entries of the job's file list `entries`, read `pageSize` at a time.
    init(entries: JobEntries, count: Int) {
        source = .store(entries, count: count)
        self.count = count
        pageSize = max(1, min(Self.pageSize, JobEntries.maximumPage))
    }

    /// Whether the files are read from the job's file list in the store (a version-2 checkpoint's).
    var isPaged: Bool {
        if case .store = source { return true }
        return false
    }

    /// The indices of the files, `0..<count`.
    var indices: Range<Int> { 0..<count }

    /// Takes the identities of files given in memory from the job's checkpoint (`checkpoint.sources`, version 1);
    /// a list in the store has its own.
    func capture(_ checkpoint: UploadCheckpoint) {
        if case .memory = source { identities = checkpoint.sources }
    }

    /// File `index`.
    /// - Throws: `JobError` `store_error`, `bad_checkpoint` (see the type's documentation).
    func file(_ index: Int) throws(JobError) -> File {
        guard index >= 0, index < count else { throw Self.mismatch("file \(index) of \(count) asked for") }
        switch source {
        case .memory(let paths, let names):
            guard index < identities.count else {
                throw Self.mismatch("no identity saved for file \(index) of \(count)")
            }
            return File(path: paths[index], name: names[index], identity: identities[index])
        case .store(let entries, _):
            let page = try self.page(holding: index, from: entries)
            return page.files[index - page.start]
        }
    }

    /// File `index`'s source path. Throws as `file`.
    func path(_ index: Int) throws(JobError) -> BytePath {
        if case .memory(let paths, _) = source, index >= 0, index < count { return paths[index] }
        return try file(index).path
    }

    /// File `index`'s name at the destination. Throws as `file`.
    func name(_ index: Int) throws(JobError) -> BytePath {
        if case .memory(_, let names) = source, index >= 0, index < count { return names[index] }
        return try file(index).name
    }

    /// File `index`'s identity when the job first ran. Throws as `file`.
    func identity(_ index: Int) throws(JobError) -> SourceIdentity { try file(index).identity }

    /// The paths and names of the files at `range`, aligned (for a pool call that stats them).
    /// - Throws: as `file`.
    func slice(_ range: Range<Int>) throws(JobError) -> (paths: [BytePath], names: [BytePath]) {
        if case .memory(let paths, let names) = source, range.lowerBound >= 0, range.upperBound <= count {
            return (Array(paths[range]), Array(names[range]))
        }
        var paths: [BytePath] = []
        var names: [BytePath] = []
        for index in range {
            let file = try file(index)
            paths.append(file.path)
            names.append(file.name)
        }
        return (paths, names)
    }

    /// File `index`'s name as text, for messages and progress rows: `file N` when it cannot be read now.
    func label(_ index: Int) -> String {
        (try? name(index))?.description ?? "file \(index + 1)"
    }

    /// Every file's size in bytes (8 bytes a file), read a page at a time: for progress.
    /// - Throws: as `file`.
    func sizes() throws(JobError) -> [Int64] {
        switch source {
        case .memory:
            guard identities.count == count else { throw Self.mismatch("no identities saved for the files") }
            return identities.map(\.size)
        case .store(let entries, _):
            var sizes: [Int64] = []
            sizes.reserveCapacity(count)
            try scan(entries) { page in sizes += page.files.map(\.identity.size) }
            return sizes
        }
    }

    /// Calls `body` with the destination names of the files, a page at a time (all at once for files given in
    /// memory), in order; the pages are not kept.
    /// - Throws: as `file`.
    func forEachNamePage(_ body: ([BytePath]) throws(JobError) -> Void) throws(JobError) {
        switch source {
        case .memory(_, let names):
            try body(names)
        case .store(let entries, _):
            try scan(entries) { page throws(JobError) in try body(page.files.map(\.name)) }
        }
    }

    /// The files before `end` that failed alone (their entry in the store is `failed`), for a resumed transfer's
    /// progress; none for files given in memory (a version-1 checkpoint lists its landed files itself).
    /// - Throws: as `file`.
    func failed(before end: Int) throws(JobError) -> Set<Int> {
        guard case .store(let entries, _) = source, end > 0 else { return [] }
        var failed: Set<Int> = []
        try scan(entries, through: min(end, count)) { page in failed.formUnion(page.failed.filter { $0 < end }) }
        return failed
    }

    /// Reads the list from the start a page at a time (not kept), through index `end` (exclusive).
    private func scan(
        _ entries: JobEntries, through end: Int? = nil, _ body: (Page) throws(JobError) -> Void
    ) throws(JobError) {
        let end = end ?? count
        var start = 0
        while start < end {
            let page = try read(from: start, entries)
            try body(page)
            start += page.files.count
        }
    }

    /// The page holding `index`: a kept one, or read now (and kept, the oldest dropped).
    private func page(holding index: Int, from entries: JobEntries) throws(JobError) -> Page {
        if let kept = pages.lastIndex(where: { index >= $0.start && index < $0.start + $0.files.count }) {
            let page = pages.remove(at: kept)
            pages.append(page)
            return page
        }
        let page = try read(from: index - index % pageSize, entries)
        pages.append(page)
        if pages.count > Self.keptPages { pages.removeFirst() }
        return page
    }

    /// Reads the files from index `start` on, at most `pageSize` (fewer at the end of the list).
    private func read(from start: Int, _ entries: JobEntries) throws(JobError) -> Page {
        let wanted = min(pageSize, count - start)
        let read = try entries.page(after: start - 1, limit: wanted)
        var files: [File] = []
        var failed: Set<Int> = []
        files.reserveCapacity(read.count)
        for entry in read {
            let index = start + files.count
            guard entry.position == index,
                let item = try? JSONCoding.convert(entry.item, to: UploadTreeEntries.Item.self),
                let name = item.name, let identity = item.identity
            else { throw Self.mismatch("entry \(entry.position) is not the file \(index) the checkpoint expects") }
            files.append(File(path: item.path, name: name, identity: identity))
            if entry.outcome.state == .failed { failed.insert(index) }
        }
        guard files.count == wanted else {
            throw Self.mismatch("the file list ends at \(start + files.count) files, the checkpoint counts \(count)")
        }
        return Page(start: start, files: files, failed: failed)
    }

    /// `bad_checkpoint`: the saved state and the file list disagree about `what`.
    private static func mismatch(_ what: String) -> JobError {
        JobError(
            code: "bad_checkpoint",
            message: "the saved upload state does not match this job's file list (\(what)); cancel it and submit again")
    }
}
