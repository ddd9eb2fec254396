import TrailbookLoop
import TrailbookPaths

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A photo's device-local ID: its SQLite rowid. Never leaves the machine (docs/explanation/design.md, "Stable identity").
public typealias PhotoLocalID = Int64

/// One photo as stored: both IDs, the file's stamp, its metadata and its tags.
public struct PhotoRecord: Hashable, Sendable {
    /// The rowid; device-local.
    public var localID: PhotoLocalID
    /// The content-derived ID every device agrees on.
    public var stableID: StableID
    /// Absolute path of the file when it was imported, its exact bytes (a name need not be UTF-8).
    public var path: BytePath
    /// Size, mtime and inode at import.
    public var stamp: FileStamp
    /// Stored pixel width (before orientation).
    public var width: Int?
    /// Stored pixel height.
    public var height: Int?
    /// EXIF orientation 1…8.
    public var orientation: Int?
    /// Capture time, ISO 8601 (see `PhotoMetadata.takenAt`).
    public var takenAt: String?
    /// Camera make.
    public var cameraMake: String?
    /// Camera model.
    public var cameraModel: String?
    /// Where it was taken.
    public var gps: GPSCoordinate?
    /// The perceptual hash, once an analysis stored it.
    public var perceptualHash: PerceptualHash?
    /// What the last read of the file noticed (import, then each autotag): `PhotoMetadata.warnings` and the
    /// pixel analysis's (corrupt data decoded anyway, too little detail for duplicates, why it is unreadable).
    public var warnings: [String] = []
    /// Tags, sorted, each once.
    public var tags: [String]

    /// The docs/reference/json.md "Photo" value of this record.
    public var json: PhotoJSON {
        PhotoJSON(
            id: stableID.text, localID: localID, path: path, bytes: stamp.bytes, width: width, height: height,
            orientation: orientation, takenAt: takenAt,
            camera: cameraMake == nil && cameraModel == nil
                ? nil : PhotoJSON.Camera(make: cameraMake, model: cameraModel),
            gps: gps.map { PhotoJSON.GPS(lat: $0.latitude, lon: $0.longitude) }, tags: tags, warnings: warnings)
    }
}

/// A photo in the exact JSON shape of docs/reference/json.md "Photo" (`photos show --json`, one element of
/// `photos list --json`). Absent values encode as `null`, never as missing keys; `tags` is sorted, no repeats.
/// `camera` is `null` when both make and model are unknown, otherwise an object whose unknown half is `null`.
/// `warnings` (after `tags`) lists what reading the photo noticed, in words; `[]` when nothing. `clock_not_set`
/// (after `taken_at`) is `true` when `taken_at` is a camera clock's factory default (`CameraClock`).
public struct PhotoJSON: Codable, Hashable, Sendable {
    /// `{"make": …, "model": …}`.
    public struct Camera: Codable, Hashable, Sendable {
        public var make: String?
        public var model: String?

        public init(make: String?, model: String?) {
            self.make = make
            self.model = model
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(make, forKey: .make)
            try c.encode(model, forKey: .model)
        }
    }

    /// `{"lat": …, "lon": …}` in decimal degrees.
    public struct GPS: Codable, Hashable, Sendable {
        public var lat: Double
        public var lon: Double
    }

    /// One upload the library remembers of the photo (`photos show` only): `{"destination", "job",
    /// "uploaded_at" (ISO 8601 UTC), "location" (a path as `path` is, an `s3://` object or a tus upload URL),
    /// "bytes", "sha256"}`.
    public struct Upload: Codable, Hashable, Sendable {
        public var destination: String
        public var job: String
        public var uploadedAt: String
        public var location: BytePath
        public var bytes: Int64
        public var sha256: String

        public init(destination: String, job: String, uploadedAt: String, location: BytePath, bytes: Int64, sha256: String) {
            self.destination = destination
            self.job = job
            self.uploadedAt = uploadedAt
            self.location = location
            self.bytes = bytes
            self.sha256 = sha256
        }

        enum CodingKeys: String, CodingKey {
            case destination, job, uploadedAt = "uploaded_at", location, bytes, sha256
        }
    }

    public var id: String
    public var localID: Int64
    /// A string when the path is UTF-8, else `{"base64": …, "text": …}` (see `BytePath`).
    public var path: BytePath
    public var bytes: Int64
    public var width: Int?
    public var height: Int?
    public var orientation: Int?
    public var takenAt: String?
    /// Whether `takenAt` is a camera clock's factory default (`CameraClock`): the clock was never set, the photo
    /// was not taken then, and it has no `year:`/`month:` tags. `false` when `takenAt` is `null`.
    public var clockNotSet: Bool {
        takenAt.map(CameraClock.isFactoryDefault) ?? false
    }
    public var camera: Camera?
    public var gps: GPS?
    public var tags: [String]
    public var warnings: [String]
    /// Where the photo was uploaded, oldest first (`photos show`); `nil` (no member) in `photos list`, which does
    /// not look them up.
    public var uploads: [Upload]? = nil

    enum CodingKeys: String, CodingKey {
        case id, localID = "local_id", path, bytes, width, height, orientation, takenAt = "taken_at", camera, gps, tags
        case warnings, uploads
    }

    /// Members computed from the others: encoded, never decoded.
    enum DerivedKeys: String, CodingKey {
        case clockNotSet = "clock_not_set"
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(localID, forKey: .localID)
        try c.encode(path, forKey: .path)
        try c.encode(bytes, forKey: .bytes)
        try c.encode(width, forKey: .width)
        try c.encode(height, forKey: .height)
        try c.encode(orientation, forKey: .orientation)
        try c.encode(takenAt, forKey: .takenAt)
        var derived = encoder.container(keyedBy: DerivedKeys.self)
        try derived.encode(clockNotSet, forKey: .clockNotSet)
        try c.encode(camera, forKey: .camera)
        try c.encode(gps, forKey: .gps)
        try c.encode(tags, forKey: .tags)
        try c.encode(warnings, forKey: .warnings)
        try c.encodeIfPresent(uploads, forKey: .uploads)
    }

    /// One line of compact JSON (no trailing newline), keys in docs/reference/json.md's order.
    ///
    /// `JSONEncoder` does not keep key order, so each value is encoded by it (escaping, number format) and the
    /// object is assembled here in the documented order.
    public func encodedLine() throws -> String {
        let encoder = JSONEncoder()
        // Sorted keys: a path that is not UTF-8 is `{"base64", "text"}` in that order, every time.
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        func value<T: Encodable>(_ v: T) throws -> String { String(decoding: try encoder.encode(v), as: UTF8.self) }
        func object(_ pairs: [(String, String)]) -> String {
            "{" + pairs.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
        }
        let camera = try self.camera.map { object([("make", try value($0.make)), ("model", try value($0.model))]) }
        let gps = try self.gps.map { object([("lat", try value($0.lat)), ("lon", try value($0.lon))]) }
        return object([
            ("id", try value(id)), ("local_id", try value(localID)), ("path", try value(path)),
            ("bytes", try value(bytes)), ("width", try value(width)), ("height", try value(height)),
            ("orientation", try value(orientation)), ("taken_at", try value(takenAt)),
            ("clock_not_set", try value(clockNotSet)), ("camera", camera ?? "null"),
            ("gps", gps ?? "null"), ("tags", try value(tags)), ("warnings", try value(warnings)),
        ] + (try uploads.map { uploads in
            [("uploads", "[" + (try uploads.map { upload in
                object([
                    ("destination", try value(upload.destination)), ("job", try value(upload.job)),
                    ("uploaded_at", try value(upload.uploadedAt)), ("location", try value(upload.location)),
                    ("bytes", try value(upload.bytes)), ("sha256", try value(upload.sha256)),
                ])
            }).joined(separator: ",") + "]")]
        } ?? []))
    }
}
