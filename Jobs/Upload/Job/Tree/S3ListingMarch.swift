import S3Client
import TrailbookEngine
import TrailbookLoop

/// An S3 prefix's listing read in step with a folder's walk, as rclone's "march" does, for a folder upload's
/// "send only what changed" (`S3TreeSync`): instead of holding every object of the prefix (`S3PrefixListing`,
/// 100 000 keys for a tree of 100 000 files), it holds one page of the listing and the few objects listed ahead
/// of the walk.
///
/// The walk meets a folder's files depth first, in byte order of the names in each directory (`UploadTreeWalk`):
/// the order of relative paths compared component by component, which is byte order with `/` taken as the lowest
/// byte (`walkPrecedes`). `ListObjectsV2` lists keys in plain byte order. The two differ only where a name holds a
/// byte below `/` (a space, `-`, `.`, `+`…) beside a directory of the same start (`a-b.jpg` lists before `a/x`;
/// the walk meets `a/x` first). So for each file asked, in walk order, the listing is read on until its keys pass
/// the file's in byte order; every object read is held until asked, and dropped once the walk is past it
/// (`walkPrecedes`): the walk never comes back. What is held is the objects listed ahead in byte order but behind
/// in walk order: in practice a handful.
///
/// Files must be asked in walk order: one asked out of order is answered "not there" (so it is sent: any doubt
/// sends a file). An upload of several sources, whose names do not come in one order, holds the whole listing
/// instead (`S3PrefixListing`).
@LoopActor
final class S3ListingMarch {
    private let prefix: String
    private let client: S3Client
    private let run: S3UploadRun
    /// The page being read and the index of its next object.
    private var page: [S3ListedObject] = []
    private var nextInPage = 0
    /// The continuation of the next page; `nil` with `started` once the last page was read.
    private var token: String?
    private var started = false
    /// Objects read from the listing and not asked yet, by their key's bytes after the prefix.
    private var held: [[UInt8]: S3PrefixListing.Object] = [:]
    /// `held`'s size at which the objects the walk is past are dropped (doubles with what stays, so dropping is
    /// amortized).
    private var dropAt = 64
    /// The last name asked.
    private var last: [UInt8]?
    /// Objects listed so far.
    private(set) var listed = 0
    /// Whether the credentials may not list the bucket (`access_denied` for a page): each file not found in what
    /// was listed before is then asked with `HeadObject`.
    private(set) var notListable = false

    /// A march through the listing of `prefix` with `client`, each page retried as `run.retrying` does.
    init(prefix: String, client: S3Client, run: S3UploadRun) {
        self.prefix = prefix
        self.client = client
        self.run = run
    }

    /// The object listed under the prefix with the name `name` (its key's bytes after the prefix), `nil` if there
    /// is none, the names are not asked in walk order, or the bucket may not be listed (`notListable`). Reads the
    /// listing on as far as `name`, reporting the objects listed to the job's phase.
    /// - Throws: `S3Error` when a page cannot be listed (after retries; not `access_denied`), `JobStopped`.
    func object(named name: [UInt8], in job: JobContext) async throws -> S3PrefixListing.Object? {
        if let last, Self.walkPrecedes(name, last) { return nil }
        last = name
        while let head = try await peek(in: job), !name.lexicographicallyPrecedes(self.name(of: head)) {
            guard let (key, object) = try await next(in: job) else { break }
            held[key] = object
        }
        let found = held.removeValue(forKey: name)
        if held.count >= dropAt {
            held = held.filter { Self.walkPrecedes(name, $0.key) }
            dropAt = max(64, 2 * held.count)
        }
        return found
    }

    /// The next object of the listing under the prefix with its name (its key's bytes after the prefix), read
    /// past; `nil` once the listing ended or the bucket may not be listed (`notListable`). Reading every object
    /// this way is `S3PrefixListing.list`.
    /// - Throws: `S3Error` when a page cannot be listed (after retries; not `access_denied`), `JobStopped`.
    func next(in job: JobContext) async throws -> (name: [UInt8], object: S3PrefixListing.Object)? {
        guard let head = try await peek(in: job) else { return nil }
        nextInPage += 1
        return (name(of: head), S3PrefixListing.Object(size: head.size, etag: head.etag))
    }

    /// A listed object's name: its key's bytes after the prefix.
    private func name(of object: S3ListedObject) -> [UInt8] { Array(object.key.utf8.dropFirst(prefix.utf8.count)) }

    /// The next object of the listing under the prefix (reading the next page when this one is done), or `nil`
    /// once the listing ended or the bucket may not be listed.
    private func peek(in job: JobContext) async throws -> S3ListedObject? {
        while true {
            while nextInPage < page.count {
                let object = page[nextInPage]
                let key = object.key.utf8
                if key.count > prefix.utf8.count, key.starts(with: prefix.utf8) { return object }
                nextInPage += 1
            }
            guard !notListable, !started || token != nil else { return nil }
            let continuation = token
            let prefix = prefix
            let client = client
            do {
                let next = try await run.retrying("ListObjectsV2 \(prefix)", in: job) { () throws(S3Error) in
                    try await client.listObjects(prefix: prefix, continuation: continuation)
                }
                started = true
                page = next.objects
                nextInPage = 0
                token = next.next
                listed += page.count
                UploadListingPhase.listed(objects: listed, in: job)
            } catch let error as S3Error where error.code == .accessDenied {
                job.log(
                    .info,
                    "may not list s3://\(client.bucket)/\(prefix) (\(error.message)); asking HeadObject of each file instead")
                notListable = true
                return nil
            }
        }
    }

    /// Whether relative path `a` comes before `b` in the walk's order: byte order with `/` as the lowest byte
    /// (component by component, each in byte order).
    nonisolated static func walkPrecedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        for (x, y) in zip(a, b) where x != y {
            if x == UInt8(ascii: "/") { return true }
            if y == UInt8(ascii: "/") { return false }
            return x < y
        }
        return a.count < b.count
    }
}
