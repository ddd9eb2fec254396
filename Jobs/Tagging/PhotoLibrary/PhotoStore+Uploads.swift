import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

/// Where one photo was uploaded: a row of `photo_uploads`, written when an upload job finished the photo's file.
///
/// The destination is the upload job's normalised identity of where it uploads (`file:///srv/photos`,
/// `s3://bucket/prefix`, a tus endpoint without credentials or query), so the same place spelled two ways is one
/// destination. Nothing secret is kept: no header, key or token.
public struct PhotoUpload: Sendable, Equatable {
    /// The photo's stable ID (text, lower-case UUID).
    public var stableID: String
    /// The normalised destination identity.
    public var destination: String
    /// The id of the job that uploaded it.
    public var job: String
    /// When that job finished the file, in milliseconds since the Unix epoch.
    public var uploadedAtMilliseconds: Int64
    /// Where the file went: a path (`DIR/NAME`, its exact bytes), an object (`s3://BUCKET/KEY`) or a tus upload URL.
    public var location: BytePath
    /// The file's size in bytes.
    public var bytes: Int64
    /// The SHA-256 of the bytes uploaded, 64 lower-case hex digits.
    public var sha256: String

    public init(
        stableID: String, destination: String, job: String, uploadedAtMilliseconds: Int64, location: BytePath,
        bytes: Int64, sha256: String
    ) {
        self.stableID = stableID
        self.destination = destination
        self.job = job
        self.uploadedAtMilliseconds = uploadedAtMilliseconds
        self.location = location
        self.bytes = bytes
        self.sha256 = sha256
    }
}

/// A photo found for an upload: its IDs and the path of its file as the library knows it.
public struct PhotoUploadSource: Sendable, Equatable {
    /// The local ID (SQLite rowid).
    public var localID: PhotoLocalID
    /// The stable ID, as text.
    public var stableID: String
    /// The file's path, its exact bytes.
    public var path: BytePath

    public init(localID: PhotoLocalID, stableID: String, path: BytePath) {
        self.localID = localID
        self.stableID = stableID
        self.path = path
    }
}

extension PhotoStore {
    /// IDs looked up per statement (bound as one JSON array).
    public static let uploadLookupBatch = 5_000

    /// The local IDs of the photos that have every tag in `tags` (spelled as `TagName.validated` spells them), in
    /// local-ID order. Reads the tags' bitmap words only (`tag_words`): one indexed range per tag.
    ///
    /// - Throws: `PhotoLibraryError.invalidTag` for a tag that is empty or has control characters, `.store` on a
    ///   SQLite error.
    public func localIDs(withEveryTag tags: [String]) throws(PhotoLibraryError) -> [PhotoLocalID] {
        let names = try tags.map { tag throws(PhotoLibraryError) in try TagName.validated(tag) }
        guard !names.isEmpty else { return [] }
        var words: [Int64: Int64]?
        for name in names {
            let rows = try store {
                try database.query(
                    "SELECT w.word, w.bits FROM tag_words AS w JOIN tag_names AS n ON n.id = w.tag_id WHERE n.name = ?",
                    [.text(name)])
            }
            var these: [Int64: Int64] = [:]
            for row in rows {
                guard let word = row.int(0), let bits = row.int(1) else { continue }
                these[word] = bits
            }
            // Photos with every tag: AND the words of each tag, word by word.
            words = words.map { sofar in
                var both: [Int64: Int64] = [:]
                for (word, bits) in sofar {
                    if let other = these[word], bits & other != 0 { both[word] = bits & other }
                }
                return both
            } ?? these
        }
        var ids: [PhotoLocalID] = []
        for (word, bits) in (words ?? [:]).sorted(by: { $0.key < $1.key }) {
            for bit in 0..<64 where (UInt64(bitPattern: bits) >> UInt64(bit)) & 1 == 1 {
                ids.append(word << 6 | Int64(bit))
            }
        }
        return ids
    }

    /// The stable ID and path of each photo in `localIDs`, in that order; IDs with no photo are left out.
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func uploadSources(of localIDs: [PhotoLocalID]) throws(PhotoLibraryError) -> [PhotoUploadSource] {
        var sources: [PhotoUploadSource] = []
        sources.reserveCapacity(localIDs.count)
        for start in stride(from: 0, to: localIDs.count, by: Self.uploadLookupBatch) {
            let batch = Array(localIDs[start..<min(localIDs.count, start + Self.uploadLookupBatch)])
            let rows = try store {
                try database.query(
                    """
                    SELECT p.id, p.stable_id, p.path FROM json_each(?) AS j JOIN photos AS p ON p.id = j.value
                    ORDER BY j.key
                    """, [.text(PhotoStoreTransaction.jsonText(batch))])
            }
            for row in rows {
                guard let id = row.int(0), let stable = row.text(1) else { continue }
                sources.append(PhotoUploadSource(localID: id, stableID: stable, path: PhotoStore.path(row, 2)))
            }
        }
        return sources
    }

    /// The uploads remembered for the photos `stableIDs` to `destination`, by stable ID.
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func uploads(of stableIDs: [String], to destination: String) throws(PhotoLibraryError) -> [String: PhotoUpload] {
        var found: [String: PhotoUpload] = [:]
        for start in stride(from: 0, to: stableIDs.count, by: Self.uploadLookupBatch) {
            let batch = stableIDs[start..<min(stableIDs.count, start + Self.uploadLookupBatch)]
            let json = "[" + batch.map { "\"" + Self.jsonEscaped($0) + "\"" }.joined(separator: ",") + "]"
            let rows = try store {
                try database.query(
                    """
                    SELECT u.stable_id, u.job, u.uploaded_at_ms, u.location, u.bytes, u.sha256
                    FROM json_each(?1) AS j JOIN photo_uploads AS u ON u.stable_id = j.value AND u.destination = ?2
                    """, [.text(json), .text(destination)])
            }
            for row in rows {
                guard let stable = row.text(0), let job = row.text(1), let at = row.int(2), let bytes = row.int(4),
                    let sha = row.text(5)
                else { continue }
                found[stable] = PhotoUpload(
                    stableID: stable, destination: destination, job: job, uploadedAtMilliseconds: at,
                    location: PhotoStore.path(row, 3),
                    bytes: bytes, sha256: sha)
            }
        }
        return found
    }

    /// Every upload remembered for the photo `stableID`, oldest first (for `photos show`).
    /// - Throws: `PhotoLibraryError.store` on a SQLite error.
    public func uploads(of stableID: String) throws(PhotoLibraryError) -> [PhotoUpload] {
        let rows = try store {
            try database.query(
                """
                SELECT destination, job, uploaded_at_ms, location, bytes, sha256 FROM photo_uploads
                WHERE stable_id = ? ORDER BY uploaded_at_ms, destination
                """, [.text(stableID)])
        }
        return rows.compactMap { row in
            guard let destination = row.text(0), let job = row.text(1), let at = row.int(2), let bytes = row.int(4),
                let sha = row.text(5)
            else { return nil }
            return PhotoUpload(
                stableID: stableID, destination: destination, job: job, uploadedAtMilliseconds: at,
                location: PhotoStore.path(row, 3), bytes: bytes, sha256: sha)
        }
    }

    /// Records `uploads` in one transaction; a photo already remembered for a destination is overwritten (the
    /// latest upload wins).
    /// - Throws: `PhotoLibraryError.store` on a SQLite error (nothing is written then).
    public func remember(_ uploads: [PhotoUpload]) throws(PhotoLibraryError) {
        guard !uploads.isEmpty else { return }
        try store {
            try database.transaction {
                let insert = try database.prepare(
                    """
                    INSERT OR REPLACE INTO photo_uploads
                        (stable_id, destination, job, uploaded_at_ms, location, bytes, sha256)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """)
                for upload in uploads {
                    try insert.run([
                        .text(upload.stableID), .text(upload.destination), .text(upload.job),
                        .integer(upload.uploadedAtMilliseconds), .blob(upload.location.bytes), .integer(upload.bytes),
                        .text(upload.sha256),
                    ])
                }
            }
        }
    }

    /// `text` escaped for a JSON string literal (quote, backslash, control characters).
    static func jsonEscaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count) + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
