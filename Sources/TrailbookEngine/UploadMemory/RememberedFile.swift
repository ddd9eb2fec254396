/// One file a job of this daemon (or of a daemon sharing its store) uploaded to a destination: what `UploadMemory`
/// keeps per destination and name, so that a later upload of the same folder can tell what is already there
/// without reading the file again (`source`), and a resumed tus job what it already sent.
public struct RememberedFile: Sendable, Equatable {
    /// The destination as the job named it (a tus endpoint URL, `http(s)://…/files/`).
    public var destination: String
    /// The name at the destination (tus: the `filename` metadata, a folder upload's relative path), byte for byte:
    /// a name in NFC and its NFD twin are two names.
    public var name: [UInt8]
    /// The upload's size in bytes.
    public var size: Int64
    /// How far it got.
    public var state: State
    /// Where it is at the destination, or the proof of what it is there: tus, the upload URL; S3, the object's
    /// ETag as the server answered the upload; `file://`, the written file's `stat` (`device:inode:size:mtime_ns:
    /// ctime_ns`) just after it landed. Empty when not known.
    public var location: String
    /// The job that uploaded it.
    public var jobID: String
    /// When it was remembered (created or completed), Unix seconds.
    public var uploadedAt: Double
    /// The local file it was made from with its `stat` when its SHA-256 was known to be its bytes (the stat
    /// cache); `nil` when not known (rows written before it was kept, or a file that changed while it was sent).
    public var source: RememberedSource?

    /// How far a remembered upload got.
    public enum State: Sendable, Equatable {
        /// Created at the destination (its location known), not known to be complete: a job that stops before
        /// completing it finds it here to resume or delete it.
        case created
        /// Complete at the destination, holding bytes with this SHA-256 (64 lower-case hex digits).
        case complete(sha256: String)

        /// The SHA-256 of a complete upload; `nil` while only created.
        public var sha256: String? {
            if case .complete(let sha256) = self { return sha256 }
            return nil
        }
    }

    /// A remembered upload; see the properties.
    public init(
        destination: String, name: [UInt8], size: Int64, state: State, location: String, jobID: String,
        uploadedAt: Double, source: RememberedSource? = nil
    ) {
        self.destination = destination
        self.name = name
        self.size = size
        self.state = state
        self.location = location
        self.jobID = jobID
        self.uploadedAt = uploadedAt
        self.source = source
    }

    /// `name` as the store keeps it: lower-case hex of its bytes (exact for any bytes, and the same text in both
    /// stores).
    static func key(_ name: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(name.count * 2)
        for byte in name {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of a stored key (`key`); `nil` if it is not even-length lower-case hex.
    static func name(ofKey key: String) -> [UInt8]? {
        let text = Array(key.utf8)
        guard text.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count / 2)
        var index = 0
        while index < text.count {
            guard let high = nibble(text[index]), let low = nibble(text[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}
