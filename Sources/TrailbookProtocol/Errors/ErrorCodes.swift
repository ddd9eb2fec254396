/// One stable error code: what a reply's or a job's `error.code` may be, with the CLI's exit status for it.
public struct StableErrorCode: Sendable, Equatable {
    /// The code as JSON carries it, e.g. `source_missing`.
    public var code: String
    /// The exit status of a command whose request the daemon refuses with this code. A job that ends `failed` with
    /// any code makes `--wait` and `--watch` exit 1 (`ExitStatus.jobFailed`).
    public var exitStatus: ExitStatus
    /// One line: what went wrong.
    public var meaning: String
    /// One line: what to do about it.
    public var remedy: String

    /// An entry of the table; `remedy` is what the user should do.
    public init(_ code: String, _ exitStatus: ExitStatus, _ meaning: String, do remedy: String) {
        self.code = code
        self.exitStatus = exitStatus
        self.meaning = meaning
        self.remedy = remedy
    }
}

/// Every stable error code the daemon, its workers and the CLI emit, in one table: the CLI's exit statuses
/// (`exitStatus(of:)`), the generated reference (docs/reference/errors.md, `trailbook-jobs help --errors`) and the
/// tests that scan the sources for code literals (`ErrorCodeTableTests`) read it.
///
/// Adding a code is adding one entry below, in alphabetical order.
public enum ErrorCodes {
    /// The table, sorted by code.
    public static let all: [StableErrorCode] = [
        .init("access_denied", .jobFailed, "S3 refused the request: the credentials may not write to the bucket", do: "grant s3:PutObject and the multipart actions on the bucket, or use another --profile"),
        .init("already_running", .jobFailed, "another daemon already uses this state directory or socket", do: "stop that daemon, or start this one with its own TRAILBOOK_JOBS_HOME"),
        .init("ambiguous", .notFound, "a photo ID prefix matches several photos", do: "give more characters of the stable ID"),
        .init("ambiguous_id", .notFound, "the job ID prefix matches several jobs", do: "give more characters of the ID (`trailbook-jobs list` shows them)"),
        .init("bad_activation_socket", .jobFailed, "the service manager passed more than one socket", do: "give the socket unit a single ListenStream= line"),
        .init("bad_answer", .jobFailed, "a photo worker's answer could not be read", do: "submit the job again; report it if it repeats"),
        .init("bad_checkpoint", .jobFailed, "the job's checkpoint could not be read", do: "submit the job again (it starts from the beginning)"),
        .init("bad_destination", .usage, "--to cannot work: not file:///DIR, an http(s):// tus endpoint or s3://BUCKET/PREFIX/, or a bad host, port or %-escape, a bucket name S3 reserves, a prefix with . or .. segments", do: "fix --to (or --endpoint) as the message says"),
        .init("bad_digest", .jobFailed, "S3 received a part whose checksum does not match what was sent", do: "nothing: the part is sent again; if it repeats, try --checksum md5"),
        .init("bad_endpoint", .usage, "the S3 endpoint is not a valid http(s) URL", do: "fix --endpoint or AWS_ENDPOINT_URL_S3"),
        .init("bad_home", .jobFailed, "the daemon cannot create its state directory", do: "fix TRAILBOOK_JOBS_HOME or the directory's permissions"),
        .init("bad_key", .usage, "the idempotency key is not 1 to 200 printable ASCII characters without spaces", do: "give another --key (a UUID will do)"),
        .init("bad_name", .usage, "a file's name cannot be used at the destination", do: "rename the file, or upload files by their paths (not directories)"),
        .init("bad_place_file", .usage, "a line of the --places CSV is not name,lat,lon with valid coordinates", do: "fix the line the message names"),
        .init("bad_reply", .jobFailed, "the daemon's reply could not be read", do: "use a client and daemon of the same version"),
        .init("bad_request", .usage, "the request is not a valid control-protocol request (or worker task)", do: "fix the request as the message says"),
        .init("cancelled", .jobFailed, "the transfer was cancelled", do: "nothing: the job was stopped"),
        .init("checksum_mismatch", .jobFailed, "the tus server received corrupted data several times in a row", do: "check the network path to the server; resubmit the upload"),
        .init("control_timeout", .jobFailed, "the daemon running the job did not act on cancel or pause in time", do: "check that daemon is alive (its host, its log) and ask again"),
        .init("corrupt", .jobFailed, "the photo's data is corrupt", do: "replace the file; the other photos are not affected"),
        .init("daemon_unreachable", .daemonUnreachable, "`web` could not reach the daemon's control socket", do: "start the daemon (trailbook-jobs daemon), or give `web` the --socket it listens on; the page reconnects by itself"),
        .init("destination_missing", .usage, "the destination directory does not exist", do: "create it (mkdir -p) and submit again"),
        .init("destination_not_directory", .usage, "the destination is not a directory", do: "give the directory to upload into"),
        .init("destination_not_writable", .usage, "the destination directory cannot be written", do: "fix its permissions for the daemon's user"),
        .init("duplicate_autotag", .usage, "an unfinished autotag job already works on these photos", do: "wait for it or cancel it, or submit again with --allow-duplicate"),
        .init("duplicate_import", .usage, "an unfinished import job already imports this directory", do: "wait for it or cancel it, or submit again with --allow-duplicate"),
        .init("duplicate_key", .usage, "the request's JSON names a member twice", do: "send each member once"),
        .init("duplicate_name", .usage, "two files would be written under the same name at the destination", do: "rename one, or upload them to different destinations; nothing was queued"),
        .init("duplicate_tag", .usage, "an unfinished tag job already changes this tag on these photos", do: "wait for it or cancel it, or submit again with --allow-duplicate"),
        .init("duplicate_upload", .usage, "an unfinished upload already sends this file to this destination", do: "wait for it or cancel it, or submit again with --allow-duplicate"),
        .init("empty", .jobFailed, "the photo file has zero bytes", do: "replace the file"),
        .init("entity_too_large", .jobFailed, "a part is larger than the S3 provider allows", do: "lower --chunk-size, or raise --max-parts"),
        .init("entity_too_small", .jobFailed, "a part is smaller than the S3 provider accepts", do: "set --min-part-size to the provider's minimum"),
        .init("execution_target_not_allowed", .jobFailed, "a job kind asked to run work where it may not (a bug)", do: "report it with the job's show --json"),
        .init("expired_token", .jobFailed, "the S3 session token expired", do: "renew the daemon's credentials; the job retries and continues"),
        .init("forbidden", .usage, "another user connected to the daemon's socket", do: "run the command as the daemon's user"),
        .init("gone", .jobFailed, "the tus server lost the upload (expired or terminated) again after it was made anew", do: "check the server's upload expiry; resubmit"),
        .init("internal", .jobFailed, "the daemon hit an unexpected error", do: "report it with the daemon's log"),
        .init("invalid_access_key_id", .jobFailed, "S3 does not know the access key", do: "fix the daemon's AWS credentials or --profile"),
        .init("invalid_id", .usage, "not a photo stable ID (a UUID) or a hex prefix of one", do: "take IDs from `trailbook-jobs photos list`"),
        .init("invalid_options", .usage, "a job option is out of range or of the wrong type", do: "fix the option the message names"),
        .init("invalid_params", .usage, "the job's params are wrong for its kind (e.g. a header value with a control character, headers on a file:// or s3:// upload)", do: "fix the parameter the message names"),
        .init("invalid_part", .jobFailed, "S3 could not find a part the upload named", do: "resubmit the upload"),
        .init("invalid_state", .jobFailed, "the job's state does not allow it (cancel an ended job, resume a running one)", do: "check the job's state with `trailbook-jobs show ID`"),
        .init("invalid_tag", .usage, "the tag is empty or holds control characters", do: "give a tag of printable text"),
        .init("io", .jobFailed, "a file system call failed on the photo", do: "check the file and its disk (the message has the system's error)"),
        .init("key_reused", .usage, "the key was already used for a different request, or for two jobs of one batch", do: "use a new key for a new job"),
        .init("no_credentials", .jobFailed, "the daemon found no S3 credentials", do: "give the daemon's user AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials"),
        .init("no_such_bucket", .jobFailed, "the S3 bucket does not exist", do: "create the bucket or fix --to"),
        .init("no_such_job", .notFound, "no job has this ID", do: "check the ID with `trailbook-jobs list` (ended jobs are deleted after their retention)"),
        .init("no_such_photo", .notFound, "no photo of the library has this ID or prefix", do: "take IDs from `trailbook-jobs photos list`"),
        .init("no_such_upload", .jobFailed, "S3 no longer has the multipart upload (aborted or expired)", do: "resubmit the upload; check the bucket's lifecycle rules"),
        .init("not_found", .notFound, "no photo has this stable ID or prefix", do: "take IDs from `trailbook-jobs photos list`"),
        .init("not_jpeg", .jobFailed, "a JPEG reader was given bytes that are not a JPEG", do: "replace the file"),
        .init("offset_mismatch", .jobFailed, "the tus server's offset kept disagreeing with the upload's", do: "resubmit the upload; check nothing else writes to it"),
        .init("out_of_memory", .jobFailed, "decoding a photo ran out of memory", do: "lower --max-megapixels or give the workers more memory"),
        .init("photo_store_error", .jobFailed, "the photo library's store failed (the message has SQLite's error)", do: "check the disk of $TRAILBOOK_JOBS_HOME; the job retries"),
        .init("protocol_error", .jobFailed, "the tus server's answer does not follow the tus protocol", do: "check --to is a tus endpoint (a URL that answers POST with a Location)"),
        .init("read_only", .usage, "the page was started with --read-only, so it refuses cancel, pause and resume", do: "use the CLI, or start `trailbook-jobs web` without --read-only"),
        .init("request_cut_off", .jobFailed, "even the smallest tus chunk (256 KiB, or --chunk-size if smaller) was cut off with nothing reaching the server: a proxy or gateway in between limits the size of a request", do: "raise that proxy's limit (nginx: client_max_body_size), or upload without it"),
        .init("request_time_too_skewed", .jobFailed, "the machine's clock is too far from S3's", do: "fix the clock (NTP); the job retries"),
        .init("request_too_large", .usage, "the request line is over the protocol's size limit", do: "send fewer jobs per batch, or shorter params"),
        .init("retryable", .jobFailed, "the server kept failing (5xx, 429, no connection)", do: "check the server; resubmit, or raise --give-up-after"),
        .init("s3_error", .jobFailed, "S3 answered with an error code of its own (named in the message)", do: "look the code up in the provider's documentation"),
        .init("s3_protocol_error", .jobFailed, "the S3 server's answer does not follow the S3 API", do: "check --endpoint and the provider's S3 compatibility"),
        .init("s3_unavailable", .jobFailed, "S3 kept failing (5xx, 429, no connection) past --give-up-after", do: "check the endpoint; resubmit, or raise --give-up-after"),
        .init("shutting_down", .jobFailed, "the daemon is stopping and takes no new work", do: "start the daemon again and repeat the command"),
        .init("signature_does_not_match", .jobFailed, "S3 refused the request's signature", do: "fix the secret key, --region, or --path-style/--virtual-hosted"),
        .init("size_mismatch", .jobFailed, "the uploaded object's size differs from the source file's", do: "resubmit the upload; check nothing else writes to the key"),
        .init("slow_down", .jobFailed, "S3 asked to slow down", do: "nothing: the job waits and retries; lower --parts-in-flight if it repeats"),
        .init("some_files_failed", .jobFailed, "a folder upload could not upload some of its files (the message counts them by code and names the first); the others were uploaded", do: "fix, rename or restore those files and upload the folder again: files already there with the same bytes are not sent again"),
        .init("source_changed", .jobFailed, "the source file changed while it was uploaded", do: "submit it again once the file no longer changes"),
        .init("source_missing", .usage, "a source file does not exist", do: "check the path"),
        .init("source_not_regular", .usage, "a source is not a regular file (a directory, device or pipe)", do: "give regular files (a folder's files, not the folder)"),
        .init("source_unreadable", .usage, "a source file cannot be read (permissions)", do: "fix its permissions for the daemon's user"),
        .init("store_busy", .jobFailed, "another process holds the job store's write lock", do: "stop the other process using the store, then repeat the command"),
        .init("store_error", .jobFailed, "the job store refused a read or write", do: "check the disk or the database; repeat the command"),
        .init("store_unavailable", .daemonUnreachable, "the shared job store (PostgreSQL) is not reachable; nothing was changed", do: "check the database is up and reachable, then repeat the command"),
        .init("store_write_failed", .jobFailed, "the job store refused a write (a full disk, a read-only file system)", do: "free space or fix the store, then repeat the command"),
        .init("timeout", .jobFailed, "the job ran past --timeout or --stall-timeout on its last attempt", do: "raise --timeout, --stall-timeout or --max-attempts and resubmit"),
        .init("too_large", .jobFailed, "the file is over a limit (the tus server's size, the decoder's pixel count)", do: "upload elsewhere, or raise the daemon's --max-megapixels"),
        .init("too_many_connections", .usage, "the daemon serves no more connections now", do: "close other watchers and repeat the command"),
        .init("truncated", .jobFailed, "the photo file ends before its image does", do: "copy the file again from its source"),
        .init("unauthorized", .jobFailed, "the tus server refused the credentials; the job is paused with its upload kept", do: "run `trailbook-jobs resume ID --header \"Authorization: Bearer $NEW_TOKEN\"`; it continues where it stopped"),
        .init("unavailable", .jobFailed, "the tus server kept failing past --give-up-after", do: "check the server; resubmit, or raise --give-up-after"),
        .init("unknown_kind", .usage, "the daemon has no job kind of that name", do: "use a kind the message lists"),
        .init("unknown_op", .usage, "the control protocol has no such op", do: "use an op the message lists"),
        .init("unknown_task", .jobFailed, "a photo worker has no such task (a bug)", do: "report it"),
        .init("unsupported", .jobFailed, "the photo's colour space or layout cannot be converted to RGB", do: "convert the photo, or leave it out"),
        .init("unsupported_coding", .jobFailed, "a valid JPEG the decoder cannot read (12-bit samples, lossless or hierarchical coding); its size and EXIF are kept", do: "convert it to an 8-bit baseline or progressive JPEG"),
        .init("unsupported_format", .jobFailed, "the file is none of JPEG, HEIF/HEIC, AVIF, or uses a feature libheif cannot read", do: "convert the file, or leave it out"),
        .init("web_forbidden", .usage, "the page refused a request: no session cookie, another Host, or an action not from the page itself", do: "open the URL that `trailbook-jobs web` printed (with its ?token=) and act from that page"),
        .init("worker_crashed", .jobFailed, "a photo worker process died on a photo", do: "nothing: the photo is skipped; check the daemon's log if it repeats"),
        .init("worker_error", .jobFailed, "a photo worker failed a task", do: "check the daemon's log"),
        .init("worker_timeout", .jobFailed, "a photo worker ran past --worker-timeout and was killed", do: "raise the daemon's --worker-timeout"),
        .init("worker_unavailable", .jobFailed, "the photo worker pool is shutting down", do: "start the daemon again; the job resumes"),
        .init("write_failed", .jobFailed, "writing the destination file failed", do: "check the destination's disk; the job retries"),
        .init("wrong_region", .jobFailed, "the S3 bucket is in another region than the one the request was signed for; the message names the region the server sent", do: "submit again with --region REGION, or set AWS_REGION for the daemon"),
        .init("xmp_shared_sidecar", .jobFailed, "two photos map to one Lightroom-named sidecar (IMG_1.JPG and IMG_1.HEIC share IMG_1.xmp), so it is neither written nor read", do: "use --xmp-naming darktable (IMG_1.JPG.xmp), or rename one photo"),
        .init("xmp_unreadable", .jobFailed, "an existing XMP sidecar is not valid XMP and was left as it is", do: "fix or remove the sidecar the message names"),
        .init("xmp_write_failed", .jobFailed, "an XMP sidecar could not be written", do: "check the photo folder's permissions and disk"),
    ]

    /// The entry of `code`, or `nil` for a code the table does not have.
    public static func entry(for code: String) -> StableErrorCode? { byCode[code] }

    /// The exit status of a command whose request the daemon refused with `code`; `usage` (2) for a code the table
    /// does not have.
    public static func exitStatus(of code: String) -> ExitStatus { byCode[code]?.exitStatus ?? .usage }

    private static let byCode: [String: StableErrorCode] = Dictionary(all.map { ($0.code, $0) }, uniquingKeysWith: { a, _ in a })
}
