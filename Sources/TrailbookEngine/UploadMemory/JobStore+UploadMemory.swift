import TrailbookSQLite

/// The upload memory in the SQLite store (schema migration 12: `upload_memory`; 13: its stat cache columns).
extension JobStore: UploadMemoryStoring {
    public func rememberUploads(_ uploads: [RememberedFile]) throws {
        try database.transaction {
            for upload in uploads {
                try database.query(
                    """
                    INSERT INTO upload_memory (destination, name, size, sha256, location, job_id, uploaded_at,
                        source_path, source_device, source_inode, source_mtime_ns, source_ctime_ns)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (destination, name) DO UPDATE SET size = excluded.size, sha256 = excluded.sha256,
                        location = excluded.location, job_id = excluded.job_id, uploaded_at = excluded.uploaded_at,
                        source_path = excluded.source_path, source_device = excluded.source_device,
                        source_inode = excluded.source_inode, source_mtime_ns = excluded.source_mtime_ns,
                        source_ctime_ns = excluded.source_ctime_ns
                    """,
                    [
                        .text(upload.destination), .text(RememberedFile.key(upload.name)), .integer(upload.size),
                        upload.state.sha256.map { .text($0) } ?? .null, .text(upload.location),
                        .text(upload.jobID), .real(upload.uploadedAt),
                    ] + RememberedFile.sourceColumns(upload.source).map(Self.value))
            }
        }
    }

    public func rememberedUploads(destination: String, names: [[UInt8]]) throws -> [RememberedFile] {
        guard !names.isEmpty else { return [] }
        let marks = Array(repeating: "?", count: names.count).joined(separator: ", ")
        let rows = try database.query(
            """
            SELECT \(RememberedFile.columns) FROM upload_memory WHERE destination = ? AND name IN (\(marks))
            """,
            [.text(destination)] + names.map { .text(RememberedFile.key($0)) })
        return rows.compactMap(Self.rememberedUpload)
    }

    public func forgetUpload(destination: String, name: [UInt8]) throws {
        try database.query(
            "DELETE FROM upload_memory WHERE destination = ? AND name = ?",
            [.text(destination), .text(RememberedFile.key(name))])
    }

    public func forgetUploads(rememberedBefore cutoff: Double) throws -> Int {
        try database.query("DELETE FROM upload_memory WHERE uploaded_at < ? RETURNING 1", [.real(cutoff)]).count
    }

    /// A row of `RememberedFile.columns` (`sha256` NULL while only created; the source columns NULL when not
    /// known); `nil` if unreadable.
    static func rememberedUpload(_ row: some StoredRow) -> RememberedFile? {
        guard let destination = row.text(0), let name = row.text(1).flatMap(RememberedFile.name(ofKey:)),
            let size = row.int(2), let location = row.text(4), let jobID = row.text(5), let at = row.double(6)
        else { return nil }
        let state: RememberedFile.State = row.text(3).map { .complete(sha256: $0) } ?? .created
        var source: RememberedSource?
        if let path = row.text(7).flatMap(RememberedFile.name(ofKey:)), let device = row.int(8),
            let inode = row.int(9), let modified = row.int(10), let changed = row.int(11)
        {
            source = RememberedSource(
                path: path, device: UInt64(bitPattern: device), inode: UInt64(bitPattern: inode), size: size,
                modifiedNanoseconds: modified, changedNanoseconds: changed)
        }
        return RememberedFile(
            destination: destination, name: name, size: size, state: state, location: location, jobID: jobID,
            uploadedAt: at, source: source)
    }

    private static func value(_ column: RememberedFile.SourceColumn) -> SQLiteValue {
        switch column {
        case .none: return .null
        case .text(let text): return .text(text)
        case .integer(let number): return .integer(number)
        }
    }
}
