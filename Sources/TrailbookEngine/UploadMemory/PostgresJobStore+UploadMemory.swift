import TrailbookPostgres

/// The upload memory in the shared store (`PostgresJobQueue` migration 8: `trailbook_upload_memory`), so that a
/// daemon sharing the store knows what the others uploaded. Each call is one round trip.
extension PostgresJobStore: UploadMemoryStoring {
    public func rememberUploads(_ uploads: [RememberedFile]) throws {
        guard !uploads.isEmpty else { return }
        _ = try run(
            uploads.map { upload in
                PostgresStatement(
                    """
                    INSERT INTO trailbook_upload_memory (destination, name, size, sha256, location, job_id, uploaded_at)
                    VALUES ($1, $2, $3::bigint, $4, $5, $6, $7::double precision)
                    ON CONFLICT (destination, name) DO UPDATE SET size = excluded.size, sha256 = excluded.sha256,
                        location = excluded.location, job_id = excluded.job_id, uploaded_at = excluded.uploaded_at
                    """,
                    [
                        .text(upload.destination), .text(RememberedFile.key(upload.name)), .integer(upload.size),
                        upload.state.sha256.map { .text($0) } ?? .null, .text(upload.location),
                        .text(upload.jobID), .double(upload.uploadedAt),
                    ])
            })
    }

    public func rememberedUploads(destination: String, names: [[UInt8]]) throws -> [RememberedFile] {
        guard !names.isEmpty else { return [] }
        return try run([
            PostgresStatement(
                """
                SELECT destination, name, size, sha256, location, job_id, uploaded_at FROM trailbook_upload_memory
                WHERE destination = $1 AND name = ANY($2::text[])
                """,
                [.text(destination), .textArray(names.map(RememberedFile.key))])
        ])[0].rows.compactMap(JobStore.rememberedUpload)
    }

    public func forgetUpload(destination: String, name: [UInt8]) throws {
        _ = try run([
            PostgresStatement(
                "DELETE FROM trailbook_upload_memory WHERE destination = $1 AND name = $2",
                [.text(destination), .text(RememberedFile.key(name))])
        ])
    }
}
