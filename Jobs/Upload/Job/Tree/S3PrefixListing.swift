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

    /// Lists every object under `prefix` (every page, each retried as `run.retrying` does), reporting the objects
    /// listed after each page as the job's phase ("listing the destination: 41 000 objects", the stall timeout's
    /// heartbeat: 100 000 objects are 100 requests, longer than a stall timeout at a slow server).
    /// - Throws: `S3Error` when listing fails for good (not `access_denied`: that gives `notListable`).
    @LoopActor
    static func list(prefix: String, client: S3Client, run: S3UploadRun, in job: JobContext) async throws -> Self {
        let prefixLength = prefix.utf8.count
        var objects: [[UInt8]: Object] = [:]
        var token: String?
        var listed = 0
        repeat {
            let continuation = token
            let page: (objects: [S3ListedObject], next: String?)
            do {
                page = try await run.retrying("ListObjectsV2 \(prefix)", in: job) { () throws(S3Error) in
                    try await client.listObjects(prefix: prefix, continuation: continuation)
                }
            } catch let error as S3Error where error.code == .accessDenied {
                job.log(
                    .info,
                    "may not list s3://\(client.bucket)/\(prefix) (\(error.message)); asking HeadObject of each file instead")
                return .notListable
            }
            for object in page.objects {
                let key = Array(object.key.utf8)
                guard key.count > prefixLength, key.starts(with: prefix.utf8) else { continue }
                objects[Array(key[prefixLength...])] = Object(size: object.size, etag: object.etag)
            }
            token = page.next
            listed += page.objects.count
            UploadListingPhase.listed(objects: listed, in: job)
        } while token != nil
        return .objects(objects)
    }
}
