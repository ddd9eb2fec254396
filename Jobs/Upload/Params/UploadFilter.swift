import TrailbookProtocol

/// The `--include` / `--exclude` rules of a folder upload (`UploadGlob` patterns), applied as rclone applies the
/// two flags: every exclude rule is tried first, then the include rules; a file that matches an exclude rule is
/// left out; when any include rule is given, a file that matches none of them is left out too. Hidden files
/// (`.name`) are files like any other. Rules apply to the files found inside folders, by their path relative to
/// the folder given; a file given by itself is always uploaded.
public struct UploadFilter: Sendable, Equatable {
    /// Patterns of files to leave out.
    public let excludes: [UploadGlob]
    /// Patterns of files to take; empty for every file.
    public let includes: [UploadGlob]

    /// Compiles the rules.
    /// - Throws: `JobError` `invalid_params` for a malformed pattern (see `UploadGlob.init`).
    public init(include: [String], exclude: [String]) throws(JobError) {
        var includes: [UploadGlob] = []
        var excludes: [UploadGlob] = []
        for pattern in include { includes.append(try UploadGlob(pattern)) }
        for pattern in exclude { excludes.append(try UploadGlob(pattern)) }
        self.includes = includes
        self.excludes = excludes
    }

    /// Whether the file at `relativePath` is uploaded, or the pattern that leaves it out.
    public func verdict(_ relativePath: BytePath) -> Verdict {
        if let rule = excludes.first(where: { $0.matches(relativePath) }) {
            return .excluded(by: "--exclude '\(rule.pattern)'")
        }
        if includes.isEmpty || includes.contains(where: { $0.matches(relativePath) }) { return .included }
        return .excluded(by: "no --include pattern")
    }

    /// What the rules say of one file.
    public enum Verdict: Sendable, Equatable {
        /// Uploaded.
        case included
        /// Left out; the rule that says so, in words.
        case excluded(by: String)
    }
}
