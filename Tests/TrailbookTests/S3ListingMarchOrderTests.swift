import Testing

@testable import UploadJob

/// The walk's order that `S3ListingMarch` reads S3's listing in step with: relative paths component by component,
/// byte order within a component (`/` as the lowest byte), as `UploadTreeWalk` meets them.
struct S3ListingMarchOrderTests {
    static func precedes(_ a: String, _ b: String) -> Bool {
        S3ListingMarch.walkPrecedes(Array(a.utf8), Array(b.utf8))
    }

    @Test func aFolderComesBeforeNamesThatExtendItsName() {
        // S3 lists "a-b.jpg" (0x2D) and "a b.jpg" (0x20) before "a/x.jpg" (0x2F); the walk meets the folder first.
        #expect(Self.precedes("a/x.jpg", "a-b.jpg"))
        #expect(Self.precedes("a/x.jpg", "a b.jpg"))
        #expect(Self.precedes("a/z/z.jpg", "a.jpg"))
        #expect(!Self.precedes("a-b.jpg", "a/x.jpg"))
        // Elsewhere it is byte order.
        #expect(Self.precedes("a.jpg", "a0.jpg"))
        #expect(Self.precedes("A.jpg", "a.jpg"))
        #expect(Self.precedes("a", "a.jpg"))
        #expect(Self.precedes("b/ z.jpg", "b/!.jpg"))
        #expect(!Self.precedes("a.jpg", "a.jpg"))
    }

    @Test func theOrderIsTheWalksOrderOfASortedTree() {
        // The walk's order of this tree, as `UploadTreeWalk` lists it (each directory's names in byte order).
        let walk = ["a/b/c.jpg", "a/b-c.jpg", "a/b.jpg", "a/x.jpg", "a b.jpg", "a+c.jpg", "a-b.jpg", "a.jpg", "a0.jpg"]
        let sorted = walk.shuffled().sorted(by: Self.precedes)
        #expect(sorted == walk)
    }
}
