import S3Client
import TrailbookEngine
import TrailbookLoop

/// What an S3 prefix holds, for a folder upload's "send only what changed" (`S3TreeSync`): listed once, at the
/// first page of the first run's listing, with `ListObjectsV2` (a request per 1 000 keys), and kept for the
/// pages that follow. It holds one entry per object under the prefix (its key after the prefix, size and ETag),
/// not one per file listed: a first upload to an empty prefix holds nothing. Only an upload of several sources
/// holds it whole (their names come in no one order); one folder's upload reads it in step with the walk
/// (`S3ListingMarch`).
enum S3PrefixListing {
    /// An object listed.
    struct Object {
        /// Its size in bytes.
        var size: Int64
        /// Its ETag, unquoted (see `S3ListedObject.etag`).
        var etag: String
    }

    /// The objects under the prefix, by their key's bytes after the prefix.
    case objects([[UInt8]: Object])
    /// The credentials may not list the bucket (`access_denied`): each file is asked with `HeadObject`.
    case notListable

    /// Lists every object under `prefix`: the whole march through its listing (`S3ListingMarch`: every page, each
    /// retried as `run.retrying` does, the objects listed reported as the job's phase after each page — "listing
    /// the destination: 41 000 objects", the stall timeout's heartbeat: 100 000 objects are 100 requests).
    /// - Throws: `S3Error` when listing fails for good (not `access_denied`: that gives `notListable`).
    @LoopActor
    static func list(prefix: String, client: S3Client, run: S3UploadRun, in job: JobContext) async throws -> Self {
        let march = S3ListingMarch(prefix: prefix, client: client, run: run)
        var objects: [[UInt8]: Object] = [:]
        while let (name, object) = try await march.next(in: job) { objects[name] = object }
        return march.notListable ? .notListable : .objects(objects)
    }
}
