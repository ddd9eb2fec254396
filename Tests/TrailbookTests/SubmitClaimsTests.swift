import Testing

@testable import TrailbookEngine

/// `SubmitClaims`: what submits under way do, and how long a stored submit's claims outlive it.
struct SubmitClaimsTests {
    private func holder(_ submit: Int, _ index: Int = 0) -> SubmitClaims.Holder {
        SubmitClaims.Holder(jobID: "job-\(submit)-\(index)", submit: submit, index: index)
    }

    @Test func aClaimIsHeldByKindAndKeyUntilItsSubmitIsAnswered() {
        var claims = SubmitClaims()
        claims.claim(["a", "b"], kind: "upload", by: holder(1))
        #expect(claims.holder(of: ["x", "b"], kind: "upload")?.holder == holder(1))
        #expect(claims.holder(of: ["x", "b"], kind: "upload")?.key == "b")
        #expect(claims.holder(of: ["a"], kind: "tag") == nil, "another kind's key is another thing")
        #expect(claims.holder(of: ["c"], kind: "upload") == nil)
        claims.release(submit: 1, stored: true)
        #expect(claims.holder(of: ["a"], kind: "upload") == nil, "no read in flight could have missed it")
        #expect(claims.isEmpty)
    }

    @Test func theOldestHolderIsNamedAndALaterOneStaysWhenItGoes() {
        var claims = SubmitClaims()
        claims.claim(["a"], kind: "upload", by: holder(1))
        claims.claim(["a"], kind: "upload", by: holder(2, 3))
        #expect(claims.holder(of: ["a"], kind: "upload")?.holder == holder(1))
        claims.release(submit: 1, stored: false)
        #expect(claims.holder(of: ["a"], kind: "upload")?.holder == holder(2, 3))
        claims.release(submit: 2, stored: false)
        #expect(claims.isEmpty)
    }

    /// The case the keeping is for: a read sent before a submit's commit may answer from a snapshot without it.
    @Test func aStoredSubmitsClaimsOutliveTheReadsInFlightAtItsRelease() {
        var claims = SubmitClaims()
        let early = claims.beginRead()
        claims.claim(["a"], kind: "upload", by: holder(1))
        claims.claim(["b"], kind: "upload", by: holder(2))
        claims.release(submit: 1, stored: true)
        claims.release(submit: 2, stored: false)
        #expect(claims.holder(of: ["a"], kind: "upload")?.holder == holder(1), "kept for the read begun before")
        #expect(claims.holder(of: ["b"], kind: "upload") == nil, "a refused submit's jobs never existed")
        // A read begun after the release sees the commit in the store; the early one still may not.
        let late = claims.beginRead()
        claims.endRead(late)
        #expect(claims.holder(of: ["a"], kind: "upload") != nil)
        claims.endRead(early)
        #expect(claims.holder(of: ["a"], kind: "upload") == nil)
        #expect(claims.isEmpty)
    }

    @Test func aClaimReleasedDuringALaterReadWaitsForThatReadToo() {
        var claims = SubmitClaims()
        let first = claims.beginRead()
        claims.claim(["a"], kind: "upload", by: holder(1))
        let second = claims.beginRead()
        claims.release(submit: 1, stored: true)
        claims.endRead(first)
        #expect(claims.holder(of: ["a"], kind: "upload") != nil, "the second read was in flight at the release")
        claims.endRead(second)
        #expect(claims.isEmpty)
    }
}
