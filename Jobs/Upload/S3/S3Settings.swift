import TrailbookEngine

#if canImport(Glibc)
    import Glibc
#endif

/// Where and how to reach S3, resolved the way the AWS CLI and SDKs do, when the job runs (so a refreshed
/// credentials file is read on the next attempt).
///
/// Order, first found wins:
/// - credentials: with no explicit profile, `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`);
///   else the profile's `aws_access_key_id`, `aws_secret_access_key`, `aws_session_token` in
///   `AWS_SHARED_CREDENTIALS_FILE` (default `~/.aws/credentials`);
/// - profile: the option, `AWS_PROFILE`, `default`;
/// - region: the option, `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's `region` in `AWS_CONFIG_FILE`
///   (default `~/.aws/config`, section `[profile NAME]` or `[default]`), `us-east-1`;
/// - endpoint: the option, `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the profile's `endpoint_url`, AWS's
///   `https://s3.REGION.amazonaws.com`;
/// - addressing: the option; else path-style for a custom endpoint (what MinIO, Ceph and most S3-compatible
///   servers need), virtual-hosted (`BUCKET.s3.REGION.amazonaws.com`) for AWS.
public struct S3Settings: Sendable, Equatable {
    /// The endpoint URL without a trailing `/`, for example `https://s3.eu-west-1.amazonaws.com`.
    public var endpoint: String
    /// The signing region.
    public var region: String
    /// Whether the bucket goes in the path (`ENDPOINT/BUCKET/KEY`) rather than the host name.
    public var pathStyle: Bool
    /// The credentials.
    public var credentials: S3Credentials

    public init(endpoint: String, region: String, pathStyle: Bool, credentials: S3Credentials) {
        self.endpoint = endpoint
        self.region = region
        self.pathStyle = pathStyle
        self.credentials = credentials
    }

    /// Explicit choices that override the environment (the job's `s3` params).
    public struct Overrides: Sendable, Equatable {
        public var endpoint: String?
        public var region: String?
        public var pathStyle: Bool?
        public var profile: String?

        public init(endpoint: String? = nil, region: String? = nil, pathStyle: Bool? = nil, profile: String? = nil) {
            self.endpoint = endpoint
            self.region = region
            self.pathStyle = pathStyle
            self.profile = profile
        }
    }

    /// Resolves the settings from `overrides`, `environment` and the AWS files. Blocking (reads two small files):
    /// call it on the thread pool.
    /// - Parameter environment: the variables to read (the daemon's: `ProcessEnvironment.current()`).
    /// - Throws: `S3Error` `no_credentials` when no access key is found (the message lists where it looked), or
    ///   `bad_endpoint` for an endpoint that is not an http(s) URL.
    public static func resolve(overrides: Overrides, environment: [String: String]) throws(S3Error) -> S3Settings {
        func env(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let home = env("HOME") ?? ""
        let profile = overrides.profile ?? env("AWS_PROFILE") ?? "default"
        let credentialsFile = env("AWS_SHARED_CREDENTIALS_FILE") ?? home + "/.aws/credentials"
        let configFile = env("AWS_CONFIG_FILE") ?? home + "/.aws/config"
        let credentialsSection = IniFile.read(credentialsFile)?[profile] ?? [:]
        let configSections = IniFile.read(configFile)
        let config = configSections?[profile == "default" ? "default" : "profile \(profile)"] ?? [:]

        let credentials: S3Credentials
        if overrides.profile == nil, let key = env("AWS_ACCESS_KEY_ID"), let secret = env("AWS_SECRET_ACCESS_KEY") {
            credentials = S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: env("AWS_SESSION_TOKEN"))
        } else if let key = credentialsSection["aws_access_key_id"] ?? config["aws_access_key_id"],
            let secret = credentialsSection["aws_secret_access_key"] ?? config["aws_secret_access_key"]
        {
            credentials = S3Credentials(
                accessKeyID: key, secretAccessKey: secret,
                sessionToken: credentialsSection["aws_session_token"] ?? config["aws_session_token"])
        } else {
            throw S3Error(
                code: .noCredentials,
                message: "no S3 credentials found for the daemon (profile '\(profile)'): set AWS_ACCESS_KEY_ID and "
                    + "AWS_SECRET_ACCESS_KEY in the daemon's environment, or add the profile to \(credentialsFile)")
        }
        let region = overrides.region ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION") ?? config["region"] ?? "us-east-1"
        let custom = overrides.endpoint ?? env("AWS_ENDPOINT_URL_S3") ?? env("AWS_ENDPOINT_URL") ?? config["endpoint_url"]
        var endpoint = custom ?? "https://s3.\(region).amazonaws.com"
        while endpoint.hasSuffix("/") { endpoint.removeLast() }
        try checkEndpoint(endpoint)
        return S3Settings(
            endpoint: endpoint, region: region, pathStyle: overrides.pathStyle ?? (custom != nil), credentials: credentials)
    }

    /// Checks that `endpoint` is `http(s)://host[:port]` with no path, query or credentials.
    /// - Throws: `S3Error` `bad_endpoint`.
    public static func checkEndpoint(_ endpoint: String) throws(S3Error) {
        let lower = endpoint.lowercased()
        let rest: Substring
        if lower.hasPrefix("https://") {
            rest = endpoint.dropFirst(8)
        } else if lower.hasPrefix("http://") {
            rest = endpoint.dropFirst(7)
        } else {
            throw S3Error(code: .badEndpoint, message: "S3 endpoint '\(URLRedaction.url(endpoint))' is not an http(s):// URL")
        }
        let authority = rest.prefix { $0 != "/" }
        guard !authority.isEmpty, !authority.contains("@"), rest.dropFirst(authority.count).allSatisfy({ $0 == "/" }),
            !endpoint.unicodeScalars.contains(where: { $0.value <= 32 || $0.value == 127 })
        else {
            throw S3Error(
                code: .badEndpoint,
                message: "S3 endpoint '\(URLRedaction.url(endpoint))' must be http(s)://HOST[:PORT] with no path, user or spaces")
        }
    }

    /// The URL of `key` in `bucket` (key segments URI-encoded) and the `Host` header that goes with it.
    public func objectURL(bucket: String, key: String) -> (url: String, host: String, path: String) {
        let schemeEnd = endpoint.firstRange(of: "://")!.upperBound
        let scheme = endpoint[..<schemeEnd]
        let authority = String(endpoint[schemeEnd...])
        let encodedKey = S3Signer.uriEncode(key, keepSlash: true)
        if pathStyle {
            let path = "/\(bucket)/\(encodedKey)"
            return (scheme + authority + path, authority, path)
        }
        let host = "\(bucket).\(authority)"
        let path = "/\(encodedKey)"
        return (scheme + host + path, host, path)
    }
}

/// The INI files of the AWS CLI (`~/.aws/credentials`, `~/.aws/config`): `[section]` headers and `key = value`
/// lines; `#` and `;` start comments.
enum IniFile {
    /// The sections of the file at `path`, or `nil` if it cannot be read. Blocking.
    static func read(_ path: String) -> [String: [String: String]]? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let got = fread(&buffer, 1, buffer.count, file)
            if got <= 0 { break }
            bytes += buffer[0..<got]
            if bytes.count > 1 << 20 { break }  // Credentials files are small; never read a huge one whole.
        }
        return parse(String(decoding: bytes, as: UTF8.self))
    }

    /// The sections of `text`.
    static func parse(_ text: String) -> [String: [String: String]] {
        var sections: [String: [String: String]] = [:]
        var current: String?
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            let line = raw.trimmingCharacters()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                let name = String(line.dropFirst().dropLast()).trimmingCharacters()
                current = name
                if sections[name] == nil { sections[name] = [:] }
            } else if let section = current, let equals = line.firstIndex(of: "=") {
                let key = String(line[..<equals]).trimmingCharacters().lowercased()
                let value = String(line[line.index(after: equals)...]).trimmingCharacters()
                sections[section]?[key] = value
            }
        }
        return sections
    }
}

extension StringProtocol {
    fileprivate func trimmingCharacters() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return String(self[first...last])
    }
}
