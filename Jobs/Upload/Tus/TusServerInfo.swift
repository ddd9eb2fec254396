import TrailbookHTTP

/// What a tus server says of itself in answer to `OPTIONS` (tus 1.0 §"OPTIONS").
public struct TusServerInfo: Sendable, Equatable {
    /// `Tus-Version`: the protocol versions the server supports, preferred first.
    public var versions: [String]
    /// `Tus-Extension`: for example `creation`, `termination`, `checksum`, `expiration`.
    public var extensions: [String]
    /// `Tus-Max-Size`: the largest upload the server accepts, in bytes; `nil` if it did not say.
    public var maxSize: Int64?
    /// `Tus-Checksum-Algorithm`: the algorithms the checksum extension accepts; empty without it.
    public var checksumAlgorithms: [String]

    public init(versions: [String], extensions: [String], maxSize: Int64?, checksumAlgorithms: [String]) {
        self.versions = versions
        self.extensions = extensions
        self.maxSize = maxSize
        self.checksumAlgorithms = checksumAlgorithms
    }

    init(headers: HTTPHeaders) {
        self.init(
            versions: Self.list(headers["Tus-Version"]), extensions: Self.list(headers["Tus-Extension"]),
            maxSize: headers["Tus-Max-Size"].flatMap { Int64($0) },
            checksumAlgorithms: Self.list(headers["Tus-Checksum-Algorithm"]))
    }

    /// Whether the server offers `name` (for example `"termination"`).
    public func supports(_ name: String) -> Bool { extensions.contains(name) }

    /// The checksum algorithm to send with each chunk: the best one offered, or `nil` without the checksum
    /// extension.
    public var checksumAlgorithm: TusChecksumAlgorithm? {
        supports("checksum") ? TusChecksumAlgorithm.best(of: checksumAlgorithms) : nil
    }

    private static func list(_ value: String?) -> [String] {
        (value ?? "").split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }
    }
}

/// An upload as the server knows it: what `HEAD` and `PATCH` report.
public struct TusUploadStatus: Sendable, Equatable {
    /// `Upload-Offset`: the bytes the server has stored, from the start of the file.
    public var offset: Int64
    /// `Upload-Length`: the upload's total length in bytes, if known to the server.
    public var length: Int64?
    /// `Upload-Expires` as sent (an RFC 9110 HTTP-date), if the server expires unfinished uploads.
    public var expires: String?

    public init(offset: Int64, length: Int64? = nil, expires: String? = nil) {
        self.offset = offset
        self.length = length
        self.expires = expires
    }

    /// `expires` in seconds since the Unix epoch; `nil` if absent or not an IMF-fixdate.
    public var expiresAtSeconds: Int64? { expires.flatMap(HTTPDate.parse) }
}

/// A new upload on the server, as `POST` created it.
public struct TusCreatedUpload: Sendable, Equatable {
    /// The upload URL (the `Location` header, made absolute).
    public var url: String
    /// `Upload-Expires`, if sent.
    public var expires: String?
}

extension Substring {
    func trimmingSpaces() -> String {
        guard let first = firstIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
        let last = lastIndex(where: { $0 != " " && $0 != "\t" })!
        return String(self[first...last])
    }
}
