import TrailbookHTTP
import TrailbookLoop

extension S3Client {
    /// One page of `ListObjectsV2` under `prefix` (at most 1 000 objects, S3's page size).
    /// - Parameters:
    ///   - continuation: the `NextContinuationToken` of the page before, or `nil` for the first page.
    /// - Returns: the page's objects and the token of the next page (`nil` after the last).
    /// - Throws: `S3Error` for a failed request (`access_denied` when the credentials may not list the bucket),
    ///   `s3_protocol_error` for a truncated page without a next token.
    public func listObjects(prefix: String, continuation: String? = nil) async throws(S3Error) -> (
        objects: [S3ListedObject], next: String?
    ) {
        var query = [("list-type", "2"), ("prefix", prefix)]
        if let continuation { query.append(("continuation-token", continuation)) }
        let response = try await send("GET", key: "", query: query, what: "ListObjectsV2 \(prefix)")
        let xml = String(decoding: response.body, as: UTF8.self)
        var objects: [S3ListedObject] = []
        for block in S3XML.blocks("Contents", in: xml) {
            guard let key = S3XML.all("Key", in: block).first,
                let size = S3XML.all("Size", in: block).first.flatMap({ Int64($0) })
            else { continue }
            objects.append(S3ListedObject(key: key, size: size, etag: Self.unquoted(S3XML.all("ETag", in: block).first ?? "")))
        }
        guard S3XML.first("IsTruncated", in: xml) == "true" else { return (objects, nil) }
        guard let next = S3XML.first("NextContinuationToken", in: xml), !next.isEmpty, next != continuation else {
            throw S3Error(
                code: .protocolError,
                message: "ListObjectsV2 \(prefix): a truncated page without a new NextContinuationToken")
        }
        return (objects, next)
    }
}
