import TrailbookEngine

/// The `s3` member of an upload's params: explicit settings for an `s3://` destination. Everything is optional;
/// what is not given is resolved by the daemon when the job runs (`S3Settings.resolve`). Secrets are never here.
///
/// JSON: `{"endpoint", "region", "path_style", "profile", "max_parts", "min_part_size", "parts_in_flight",
/// "checksum"}`.
public struct S3Options: Codable, Sendable, Equatable {
    /// The endpoint URL (`http(s)://host[:port]`), for S3-compatible servers; `nil`: from the environment.
    public var endpoint: String?
    /// The region; `nil`: from the environment or the profile, else `us-east-1`.
    public var region: String?
    /// Path-style addressing (`ENDPOINT/BUCKET/KEY`) on or off; `nil`: on for custom endpoints.
    public var pathStyle: Bool?
    /// The profile in `~/.aws/credentials` and `~/.aws/config`; `nil`: `AWS_PROFILE`, else `default`.
    public var profile: String?
    /// Most parts per upload the provider allows (S3: 10 000; some providers 1 000). 1…10 000.
    public var maxParts: Int?
    /// Smallest part the provider accepts, in bytes (S3: 5 MiB). Parts are at least this large (the last may
    /// be smaller). At least 1 KiB; lower it only for a server configured so (tests).
    public var minPartSize: Int64?
    /// Requests with a body sent at once per job, 1…32 (default 4): parts of a multipart file, or files that fit in
    /// one `PUT` (several such files go at once). Memory: at most this many parts or files are held, so about
    /// `parts_in_flight × part size` bytes per job.
    public var partsInFlight: Int?
    /// The checksums each body carries; `nil`: `.sha256`.
    public var checksum: S3Checksum?
    /// Whether bodies carry SHA-256 checksums (`checksum`, `.sha256` when not given).
    public var sendsSHA256Checksums: Bool { (checksum ?? .sha256) == .sha256 }

    /// S3's part count limit.
    public static let defaultMaxParts = 10_000
    /// S3's smallest part: 5 MiB.
    public static let defaultMinPartSize: Int64 = 5 << 20
    /// S3's largest part: 5 GiB.
    public static let maxPartSize: Int64 = 5 << 30
    /// S3's largest object: 5 TiB.
    public static let maxObjectSize: Int64 = 5 << 40
    /// Default parts in flight.
    public static let defaultPartsInFlight = 4

    /// The server an `s3://` destination names, for its identity (the duplicate check at submit, the photo
    /// library's memory of uploads): `endpoint` when the job gives one, else the daemon's `AWS_ENDPOINT_URL_S3`,
    /// else its `AWS_ENDPOINT_URL` (as `S3Settings.resolve` reads them; empty is unset), else `nil` (AWS). The same
    /// bucket name on another server is another place. A profile's `endpoint_url` is not read here (a file read
    /// at submit); two jobs that differ only there count as one place.
    public static func identityEndpoint(_ options: S3Options?, environment: [String: String]) -> String? {
        func env(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        return options?.endpoint ?? env("AWS_ENDPOINT_URL_S3") ?? env("AWS_ENDPOINT_URL")
    }

    public init(
        endpoint: String? = nil, region: String? = nil, pathStyle: Bool? = nil, profile: String? = nil,
        maxParts: Int? = nil, minPartSize: Int64? = nil, partsInFlight: Int? = nil, checksum: S3Checksum? = nil
    ) {
        self.endpoint = endpoint
        self.region = region
        self.pathStyle = pathStyle
        self.profile = profile
        self.maxParts = maxParts
        self.minPartSize = minPartSize
        self.partsInFlight = partsInFlight
        self.checksum = checksum
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case endpoint, region, profile, checksum
        case pathStyle = "path_style"
        case maxParts = "max_parts"
        case minPartSize = "min_part_size"
        case partsInFlight = "parts_in_flight"
    }

    /// Checks the values' ranges.
    /// - Throws: `JobError` `invalid_params`.
    public func check() throws(JobError) {
        func bad(_ message: String) -> JobError { JobError(code: "invalid_params", message: message) }
        if let maxParts, !(1...Self.defaultMaxParts).contains(maxParts) {
            throw bad("s3 max_parts \(maxParts) is out of range; give 1 to 10000")
        }
        if let minPartSize, !((1 << 10)...Self.maxPartSize).contains(minPartSize) {
            throw bad("s3 min_part_size \(minPartSize) is out of range; give 1KiB to 5GiB (S3: 5MiB)")
        }
        if let partsInFlight, !(1...32).contains(partsInFlight) {
            throw bad("s3 parts_in_flight \(partsInFlight) is out of range; give 1 to 32 (default 4)")
        }
        if let region, region.isEmpty || !region.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: "/") }) {
            throw bad("s3 region '\(region)' is not a region name such as eu-west-1")
        }
    }
}

/// The checksums an upload's bodies carry, which the server verifies before it stores them.
///
/// How a file goes up to S3, planned once before the first request and kept in the checkpoint, so a resume
/// never changes it.
public struct S3PartPlan: Codable, Sendable, Equatable {
    /// The file's size in bytes.
    public var size: Int64
    /// Bytes per part (the last part may be smaller).
    public var partSize: Int64
    /// Whether the upload carries SHA-256 checksums (`S3Checksum.sha256`): part of the plan, since a multipart
    /// upload created with them must be finished with them. A plan saved without this member (by an earlier
    /// version) has none.
    public var checksumSHA256: Bool

    /// Parts in the upload: at least 1.
    public var count: Int { size == 0 ? 1 : Int((size + partSize - 1) / partSize) }

    /// Whether the file goes up in one `PUT` rather than as a multipart upload (it fits in one part).
    public var isSinglePut: Bool { size <= partSize }

    /// The byte range of part `number` (1-based).
    public func range(ofPart number: Int) -> (offset: Int64, length: Int64) {
        let offset = Int64(number - 1) * partSize
        return (offset, min(partSize, size - offset))
    }

    enum CodingKeys: String, CodingKey {
        case size
        case partSize = "part_size"
        case checksumSHA256 = "checksum_sha256"
    }

    /// A plan of `partSize`-byte parts (the last may be smaller) for a file of `size` bytes.
    public init(size: Int64, partSize: Int64, checksumSHA256: Bool = false) {
        self.size = size
        self.partSize = partSize
        self.checksumSHA256 = checksumSHA256
    }

    /// Decodes a saved plan; one without `checksum_sha256` (saved by an earlier version) has no checksums.
    /// - Throws: `DecodingError` when `size` or `part_size` is missing or not an integer.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        size = try container.decode(Int64.self, forKey: .size)
        partSize = try container.decode(Int64.self, forKey: .partSize)
        checksumSHA256 = try container.decodeIfPresent(Bool.self, forKey: .checksumSHA256) ?? false
    }

    /// The plan for a file of `size` bytes: parts of `preferred` bytes, raised to `minPartSize` and to the least
    /// size that fits `maxParts` parts (a 100 GiB file in 10 000 parts gets 10 737 419-byte parts).
    /// - Throws: `JobError` `too_large` when the file needs parts above 5 GiB or is above 5 TiB.
    public static func plan(
        size: Int64, preferred: Int64, minPartSize: Int64, maxParts: Int, name: String, checksumSHA256: Bool = false
    ) throws(JobError) -> S3PartPlan {
        let fit = (size + Int64(maxParts) - 1) / Int64(maxParts)
        let partSize = max(preferred, minPartSize, fit, 1)
        guard size <= S3Options.maxObjectSize, partSize <= S3Options.maxPartSize else {
            throw JobError(
                code: "too_large",
                message: "\(name) (\(size) bytes) does not fit S3's limits: at most \(maxParts) parts of at most 5GiB "
                    + "and 5TiB per object; nothing was sent")
        }
        return S3PartPlan(size: size, partSize: partSize, checksumSHA256: checksumSHA256)
    }
}
