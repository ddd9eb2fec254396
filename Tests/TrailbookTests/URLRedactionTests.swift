import Testing
import TrailbookProtocol
import UploadJob

/// URLs lose their secrets (user info, credential-looking query values) wherever they are shown, and the
/// submit-time checks refuse what can never work.
struct URLRedactionTests {
    @Test func userInfoAndCredentialQueryValuesAreRedacted() {
        #expect(URLRedaction.url("http://user:pw@host:1080/files/") == "http://<redacted>@host:1080/files/")
        #expect(URLRedaction.url("https://TOKEN@host/files/") == "https://<redacted>@host/files/")
        #expect(
            URLRedaction.url("https://h/f/?token=abc&x=1&X-Amz-Signature=dead&sig=s&api_key=k&password=p#frag")
                == "https://h/f/?token=<redacted>&x=1&X-Amz-Signature=<redacted>&sig=<redacted>&api_key=<redacted>&password=<redacted>#frag")
        #expect(URLRedaction.url("http://host/files/") == "http://host/files/")
        #expect(URLRedaction.url("file:///tmp/a@b") == "file:///tmp/a@b", "an @ in a path is not user info")
        // Unparsable: whatever lies before the authority's last @ goes.
        #expect(URLRedaction.url("http://us er:p w@h st/") == "http://<redacted>@h st/")
        #expect(!URLRedaction.url("http://u:p@ss@host/").contains("p@ss"))
    }

    @Test func urlsInTextAreRedactedAndTheRestKept() {
        let message = "destination 'http://alice:s3cret@h/files/?token=t0k' failed: see (https://x@y/z?sig=1) now"
        let shown = URLRedaction.text(message)
        #expect(!shown.contains("s3cret") && !shown.contains("t0k") && !shown.contains("alice"), "\(shown)")
        #expect(shown.hasPrefix("destination 'http://<redacted>@h/files/?token=<redacted>' failed: see (https://<redacted>@y/z?sig=<redacted>"))
        #expect(URLRedaction.text("no url here") == "no url here")
        let json = URLRedaction.json(["url": "http://a:b@c/", "n": 1, "list": ["s3://b/p/?key=k"]])
        #expect(json["url"]?.stringValue == "http://<redacted>@c/")
        #expect(json["list"]?.arrayValue?.first?.stringValue == "s3://b/p/?key=<redacted>")
    }

    @Test func jobJSONNeverShowsAURLSecret() {
        let params: JSONValue = [
            "files": ["/a"], "to": "http://user:pw9@host/files/?token=tok9",
            "headers": ["Authorization: Bearer xyz9"],
        ]
        let shown = String(decoding: JSONCoding.encode(JobRecord.redacted(params)), as: UTF8.self)
        for secret in ["pw9", "tok9", "xyz9"] { #expect(!shown.contains(secret), "\(shown)") }
        #expect(shown.contains("Authorization: <redacted>"))
        let error = JobError(code: "x", message: "PUT http://user:pw9@host/files/abc?sig=tok9 failed").redacted
        #expect(!error.message.contains("pw9") && !error.message.contains("tok9"))
    }

    /// Destinations that can never work are refused at submit with `bad_destination`, and the message never
    /// quotes a password.
    @Test func destinationsThatCannotWorkAreRefused() {
        let bad = [
            "http://%zz/", "http://h%zz/files/", "http://[::1/files/", "http://host:0/", "http://host:99999/",
            "http://host/fi%zzles/", "http://us%zzer:pw@host/", "http://ho st/", "http://%00/",
            "s3://192.168.1.1/p/", "s3://xn--abc/p/", "s3://sthree-b/p/", "s3://bucket-s3alias/p/",
            "s3://bucket/a/../b/", "s3://bucket/e/./f/", "s3://bucket/./", "s3://bucket/../",
        ]
        for url in bad {
            do {
                _ = try UploadDestination(parsing: url)
                Issue.record("\(url) was accepted")
            } catch {
                #expect(error.code == "bad_destination", "\(url): \(error)")
            }
        }
        do {
            _ = try UploadDestination(parsing: "http://alice:s3cret@host:0/")
            Issue.record("port 0 was accepted")
        } catch {
            #expect(!error.message.contains("s3cret"), "\(error.message)")
        }
        for url in ["http://host:8080/files/", "http://[::1]:1080/files/", "http://h%C3%A9st/", "s3://bucket/a.b/", "s3://my.bucket-1/"] {
            #expect((try? UploadDestination(parsing: url)) != nil, "\(url) is fine")
        }
        #expect(UploadDestination.authorityProblem("[::1") != nil)
        #expect(UploadDestination.authorityProblem("h:0") != nil)
        #expect(UploadDestination.authorityProblem("h:65535") == nil)
    }

    @Test func headerValuesWithControlCharactersAreRefused() {
        for value in ["a\u{01}b", "a\rb", "a\nb", "a\u{7F}", "\u{00}"] {
            let params = UploadJob.Params(files: ["/a"], to: "http://h/files/", headers: ["X-Test: \(value)"])
            #expect(throws: JobError.self) { _ = try params.headerFields() }
        }
        let tab = UploadJob.Params(files: ["/a"], to: "http://h/files/", headers: ["X-Test: a\tb"])
        #expect((try? tab.headerFields())?.first?.value == "a\tb")
    }
}
