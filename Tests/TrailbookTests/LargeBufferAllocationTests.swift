import Testing

@testable import TrailbookCLI

/// The daemon's allocator setting: large buffers mapped on their own, so a freed one leaves the process. (What it
/// saves is measured by bench/s3_upload.py: a test process's RSS moves with every test running beside it.)
struct LargeBufferAllocationTests {
    /// A GLIBC_TUNABLES that sets the threshold itself is left to rule; otherwise the threshold is set.
    @Test func setsTheThresholdUnlessTheEnvironmentDoes() {
        #expect(!LargeBufferAllocation.apply(environment: ["GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"]))
        #expect(LargeBufferAllocation.apply(environment: ["GLIBC_TUNABLES": "glibc.malloc.arena_max=2"]))
    }
}
