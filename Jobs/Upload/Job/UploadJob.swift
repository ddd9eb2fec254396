import TrailbookEngine

/// Placeholder until the upload job lands.
public struct UploadJob: JobKind {
    public struct Params: Codable, Sendable {}
    public static let name = "upload"
    public static let traits = JobKindTraits(unit: .bytes, isLongRunning: true, executionTargets: [.threadPool])
    public init() {}
    public func run(_ params: Params, in job: JobContext) async throws -> JSONValue { .null }
}
