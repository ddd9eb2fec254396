import TrailbookPostgres

/// The upload memory in the shared store (`PostgresJobQueue` migration 8: `trailbook_upload_memory`; 9: its stat
/// cache columns), so that a daemon sharing the store knows what the others uploaded. Each call is one round trip.
extension PostgresJobStore: UploadMemoryStoring {
    public func rememberUploads(_ uploads: [RememberedFile]) throws {
        guard !uploads.isEmpty else { return }
        _ = try run(
            uploads.map { upload in
                PostgresStatement(
                    """
                    INSERT INTO trailbook_upload_memory (destination, name, size, sha256, location, job_id, uploaded_at,
                        source_path, source_device, source_inode, source_mtime_ns, source_ctime_ns)
                    VALUES ($1, $2, $3::bigint, $4, $5, $6, $7::double precision, $8, $9::bigint, $10::bigint,
                        $11::bigint, $12::bigint)
                    ON CONFLICT (destination, name) DO UPDATE SET size = excluded.size, sha256 = excluded.sha256,
                        location = excluded.location, job_id = excluded.job_id, uploaded_at = excluded.uploaded_at,
                        source_path = excluded.source_path, source_device = excluded.source_device,
                        source_inode = excluded.source_inode, source_mtime_ns = excluded.source_mtime_ns,
                        source_ctime_ns = excluded.source_ctime_ns
                    """,
                    [
                        .text(upload.destination), .text(RememberedFile.key(upload.name)), .integer(upload.size),
                        upload.state.sha256.map { .text($0) } ?? .null, .text(upload.location),
                        .text(upload.jobID), .double(upload.uploadedAt),
                    ] + RememberedFile.sourceColumns(upload.source).map(Self.value))
            })
    }

    public func rememberedUploads(destination: String, names: [[UInt8]]) throws -> [RememberedFile] {
        guard !names.isEmpty else { return [] }
        return try run([
            PostgresStatement(
                """
                SELECT \(RememberedFile.columns) FROM trailbook_upload_memory
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

    public func forgetUploads(rememberedBefore cutoff: Double) throws -> Int {
        try run([
            PostgresStatement(
                "DELETE FROM trailbook_upload_memory WHERE uploaded_at < $1::double precision RETURNING 1",
                [.double(cutoff)])
        ])[0].rows.count
    }

    private static func value(_ column: RememberedFile.SourceColumn) -> PostgresValue {
        switch column {
        case .none: return .null
        case .text(let text): return .text(text)
        case .integer(let number): return .integer(number)
        }
    }
}
