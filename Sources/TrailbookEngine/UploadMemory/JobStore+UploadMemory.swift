import TrailbookSQLite

/// The upload memory in the SQLite store (schema migration 12: `upload_memory`).
extension JobStore: UploadMemoryStoring {
    public func rememberUploads(_ uploads: [RememberedFile]) throws {
        try database.transaction {
            for upload in uploads {
                try database.query(
                    """
                    INSERT INTO upload_memory (destination, name, size, sha256, location, job_id, uploaded_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (destination, name) DO UPDATE SET size = excluded.size, sha256 = excluded.sha256,
                        location = excluded.location, job_id = excluded.job_id, uploaded_at = excluded.uploaded_at
                    """,
                    [
                        .text(upload.destination), .text(RememberedFile.key(upload.name)), .integer(upload.size),
                        upload.state.sha256.map { .text($0) } ?? .null, .text(upload.location),
                        .text(upload.jobID), .real(upload.uploadedAt),
                    ])
            }
        }
    }

    public func rememberedUploads(destination: String, names: [[UInt8]]) throws -> [RememberedFile] {
        guard !names.isEmpty else { return [] }
        let marks = Array(repeating: "?", count: names.count).joined(separator: ", ")
        let rows = try database.query(
            """
            SELECT destination, name, size, sha256, location, job_id, uploaded_at FROM upload_memory
            WHERE destination = ? AND name IN (\(marks))
            """,
            [.text(destination)] + names.map { .text(RememberedFile.key($0)) })
        return rows.compactMap(Self.rememberedUpload)
    }

    public func forgetUpload(destination: String, name: [UInt8]) throws {
        try database.query(
            "DELETE FROM upload_memory WHERE destination = ? AND name = ?",
            [.text(destination), .text(RememberedFile.key(name))])
    }

    /// A row of `destination, name, size, sha256, location, job_id, uploaded_at` (`sha256` NULL while only
    /// created); `nil` if unreadable.
    static func rememberedUpload(_ row: some StoredRow) -> RememberedFile? {
        guard let destination = row.text(0), let name = row.text(1).flatMap(RememberedFile.name(ofKey:)),
            let size = row.int(2), let location = row.text(4), let jobID = row.text(5), let at = row.double(6)
        else { return nil }
        let state: RememberedFile.State = row.text(3).map { .complete(sha256: $0) } ?? .created
        return RememberedFile(
            destination: destination, name: name, size: size, state: state, location: location, jobID: jobID,
            uploadedAt: at)
    }
}
