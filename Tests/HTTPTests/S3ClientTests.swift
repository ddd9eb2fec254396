import Foundation
import Testing
import TrailbookHTTP
import S3Client

/// The S3 client's pure parts: SigV4 against AWS's published examples, the XML it reads, the settings it resolves,
/// and the codes it gives S3's errors.
struct S3ClientTests {
    /// AWS's example key pair (https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html).
    static let signer = S3Signer(
        credentials: S3Credentials(
            accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        region: "us-east-1")
    /// 2013-05-24T00:00:00Z.
    static let exampleTime: Int64 = 1_369_353_600
    static let emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    @Test func signsAWSsGetObjectExample() {
        var headers: HTTPHeaders = ["Host": "examplebucket.s3.amazonaws.com", "Range": "bytes=0-9"]
        Self.signer.sign(
            method: "GET", path: "/test.txt", query: [], headers: &headers, payloadHash: Self.emptyHash,
            time: Self.exampleTime)
        #expect(headers["x-amz-date"] == "20130524T000000Z")
        #expect(
            headers["Authorization"]
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    @Test func signsAWSsListObjectsExampleWithASortedQuery() {
        var headers: HTTPHeaders = ["Host": "examplebucket.s3.amazonaws.com"]
        Self.signer.sign(
            method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")], headers: &headers,
            payloadHash: Self.emptyHash, time: Self.exampleTime)
        #expect(headers["Authorization"]?.hasSuffix(
            "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7") == true)
        #expect(S3Signer.canonicalQuery([("prefix", "J"), ("max-keys", "2")]) == "max-keys=2&prefix=J")
    }

    @Test func aSessionTokenIsSentAndSigned() {
        var signer = Self.signer
        signer.credentials.sessionToken = "tok/en+="
        var headers: HTTPHeaders = ["Host": "h"]
        signer.sign(method: "GET", path: "/", query: [], headers: &headers, payloadHash: Self.emptyHash, time: 0)
        #expect(headers["x-amz-security-token"] == "tok/en+=")
        #expect(headers["Authorization"]?.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token") == true)
        #expect(!"\(signer.credentials)".contains("wJalr"), "the secret is never printed")
    }

    @Test func uriEncodingKeepsUnreservedAndSlashesInKeys() {
        #expect(S3Signer.uriEncode("trip/IMG 1+é.jpg", keepSlash: true) == "trip/IMG%201%2B%C3%A9.jpg")
        #expect(S3Signer.uriEncode("a/b~c", keepSlash: false) == "a%2Fb~c")
    }

    @Test func readsListPartsPagesAndErrors() {
        let xml = """
            <ListPartsResult><IsTruncated>true</IsTruncated><NextPartNumberMarker>2</NextPartNumberMarker>
            <Part><PartNumber>1</PartNumber><ETag>&quot;abc&quot;</ETag><Size>5242880</Size></Part>
            <Part><PartNumber>2</PartNumber><ETag>"def"</ETag><Size>10</Size></Part></ListPartsResult>
            """
        let parts = S3XML.blocks("Part", in: xml)
        #expect(parts.count == 2)
        #expect(S3XML.all("ETag", in: parts[0]) == ["\"abc\""])
        #expect(S3XML.first("NextPartNumberMarker", in: xml) == "2")
        #expect(S3XML.escape("a&b<c>") == "a&amp;b&lt;c&gt;")
    }

    @Test func s3ErrorsGetStableCodesAndSayWhatToDo() {
        func error(_ status: Int, _ code: String, _ extra: String = "", headers: HTTPHeaders = [:]) -> S3Error {
            let body = "<Error><Code>\(code)</Code><Message>m</Message>\(extra)</Error>"
            return S3Error.from(
                response: HTTPResponse(status: status, headers: headers, body: Array(body.utf8)), what: "PUT k",
                bucket: "b", now: 1_000)
        }
        #expect(error(404, "NoSuchBucket").code == .noSuchBucket)
        #expect(error(403, "AccessDenied").code == .accessDenied)
        #expect(error(403, "InvalidAccessKeyId").code == .invalidAccessKeyID)
        #expect(error(403, "SignatureDoesNotMatch").code == .signatureDoesNotMatch)
        let skew = error(403, "RequestTimeTooSkewed", "<ServerTime>1970-01-01T00:26:40Z</ServerTime>")
        #expect(skew.code == .requestTimeTooSkewed)
        #expect(skew.message.contains("600 s"), "names the skew: \(skew.message)")
        #expect(error(400, "ExpiredToken").code == .expiredToken)
        let slow = error(503, "SlowDown", headers: ["Retry-After": "3"])
        #expect(slow.code == .slowDown && slow.isTransient && slow.retryAfterSeconds == 3)
        #expect(error(429, "").code == .unavailable)
        #expect(error(400, "EntityTooSmall").code == .entityTooSmall)
        #expect(error(400, "EntityTooLarge").code == .entityTooLarge)
        #expect(error(404, "NoSuchUpload").code == .noSuchUpload)
        #expect(!error(403, "AccessDenied").isTransient)
    }

    /// A bucket in another region: S3 answers `301 PermanentRedirect` (with `x-amz-bucket-region`; a `HEAD` has only
    /// the header), or `400 AuthorizationHeaderMalformed` with `<Region>`. The error names that region and the
    /// option to set, instead of "see the S3 error code's documentation".
    @Test func aBucketInAnotherRegionNamesTheRegionAndTheOption() {
        func error(_ status: Int, _ body: String, headers: HTTPHeaders = [:]) -> S3Error {
            S3Error.from(
                response: HTTPResponse(status: status, headers: headers, body: Array(body.utf8)), what: "PUT k",
                bucket: "photos", now: 1_000)
        }
        let redirect = error(
            301,
            "<Error><Code>PermanentRedirect</Code><Message>The bucket you are attempting to access must be addressed "
                + "using the specified endpoint.</Message><Endpoint>photos.s3.eu-west-1.amazonaws.com</Endpoint>"
                + "<Bucket>photos</Bucket></Error>",
            headers: ["x-amz-bucket-region": "eu-west-1"])
        #expect(redirect.code == .wrongRegion)
        #expect(redirect.message.contains("region eu-west-1"), "\(redirect.message)")
        #expect(redirect.message.contains("--region eu-west-1"), "\(redirect.message)")
        #expect(!redirect.message.contains("documentation"))
        #expect(!redirect.isTransient)
        // Without the header, from the endpoint the body names.
        let fromEndpoint = error(
            301, "<Error><Code>PermanentRedirect</Code><Endpoint>photos.s3-ap-southeast-2.amazonaws.com</Endpoint></Error>")
        #expect(fromEndpoint.message.contains("--region ap-southeast-2"), "\(fromEndpoint.message)")
        // A HEAD: no body, only the header.
        let head = error(301, "", headers: ["X-Amz-Bucket-Region": "us-west-2"])
        #expect(head.code == .wrongRegion && head.message.contains("--region us-west-2"), "\(head.message)")
        let malformed = error(
            400, "<Error><Code>AuthorizationHeaderMalformed</Code><Region>eu-central-1</Region></Error>")
        #expect(malformed.code == .wrongRegion && malformed.message.contains("--region eu-central-1"))
        // A region that is not region-shaped is not quoted back as an option value.
        let odd = error(301, "<Error><Code>PermanentRedirect</Code><Region>x; rm -rf</Region></Error>")
        #expect(odd.code == .wrongRegion && !odd.message.contains("rm -rf") && odd.message.contains("--region"))
    }

    @Test func settingsComeFromTheEnvironmentThenTheProfileFiles() throws {
        let directory = "/tmp/tbj-s3settings-\(getpid())"
        mkdir(directory, 0o700)
        defer {
            unlink(directory + "/credentials")
            unlink(directory + "/config")
            rmdir(directory)
        }
        func write(_ name: String, _ text: String) {
            let file = fopen(directory + "/" + name, "w")!
            fputs(text, file)
            fclose(file)
        }
        write("credentials", "[default]\naws_access_key_id = AKDEF\naws_secret_access_key = s1\n[work]\naws_access_key_id=AKWORK\naws_secret_access_key=s2\naws_session_token = t2\n")
        write("config", "[default]\nregion = eu-west-1\n[profile work]\nregion = ap-south-1\nendpoint_url = http://minio:9000/\n")
        let files = ["AWS_SHARED_CREDENTIALS_FILE": directory + "/credentials", "AWS_CONFIG_FILE": directory + "/config"]

        let fromFiles = try S3Settings.resolve(overrides: .init(), environment: files)
        #expect(fromFiles.credentials.accessKeyID == "AKDEF")
        #expect(fromFiles.region == "eu-west-1" && fromFiles.endpoint == "https://s3.eu-west-1.amazonaws.com")
        #expect(!fromFiles.pathStyle)
        #expect(fromFiles.objectURL(bucket: "b", key: "k 1").url == "https://b.s3.eu-west-1.amazonaws.com/k%201")

        let work = try S3Settings.resolve(overrides: .init(), environment: files.merging(["AWS_PROFILE": "work"]) { $1 })
        #expect(work.credentials == S3Credentials(accessKeyID: "AKWORK", secretAccessKey: "s2", sessionToken: "t2"))
        #expect(work.region == "ap-south-1" && work.endpoint == "http://minio:9000" && work.pathStyle)
        #expect(work.objectURL(bucket: "b", key: "p/k").url == "http://minio:9000/b/p/k")

        let env = files.merging([
            "AWS_ACCESS_KEY_ID": "AKENV", "AWS_SECRET_ACCESS_KEY": "s3", "AWS_SESSION_TOKEN": "t3",
            "AWS_DEFAULT_REGION": "us-west-2", "AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "http://s3:2",
        ]) { $1 }
        let fromEnv = try S3Settings.resolve(overrides: .init(), environment: env)
        #expect(fromEnv.credentials.accessKeyID == "AKENV" && fromEnv.credentials.sessionToken == "t3")
        #expect(fromEnv.region == "us-west-2" && fromEnv.endpoint == "http://s3:2")

        let overridden = try S3Settings.resolve(
            overrides: .init(endpoint: "https://r2.example", region: "auto", pathStyle: false, profile: "work"),
            environment: env)
        #expect(overridden.credentials.accessKeyID == "AKWORK", "an explicit profile wins over the variables")
        #expect(overridden.region == "auto" && !overridden.pathStyle)
        #expect(overridden.objectURL(bucket: "b", key: "k").url == "https://b.r2.example/k")

        #expect(throws: S3Error.self) { try S3Settings.resolve(overrides: .init(), environment: ["HOME": "/nonexistent"]) }
        #expect(throws: S3Error.self) { try S3Settings.checkEndpoint("ftp://x") }
        #expect(throws: S3Error.self) { try S3Settings.checkEndpoint("http://u@x") }
    }
}
