// swift-tools-version:6.0
import Foundation
import PackageDescription

// A package of its own that uses trailbook-jobs as a library: its own job kind (thumbnails of a folder), its own
// executable with the whole command line, and tests on the in-process harness (docs/how-to/write-a-job-kind.md).
// In your package: `.package(url: "…/trailbook-jobs", from: "0.1.0")` and `package: "trailbook-jobs"`.

// The project two folders up, by path; SwiftPM names a path dependency after its folder.
let project = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
let trailbook = project.lastPathComponent.lowercased()

let package = Package(
    name: "thumbnails",
    dependencies: [.package(path: project.path)],
    targets: [
        .target(
            name: "ThumbnailJob",
            dependencies: [
                .product(name: "TrailbookJobs", package: trailbook),
                // Only for its JPEG decode/encode (`RGBImage`); a kind without images needs only TrailbookJobs.
                .product(name: "TrailbookTagging", package: trailbook),
            ]),
        .executableTarget(
            name: "thumbnail-jobs",
            dependencies: ["ThumbnailJob", .product(name: "TrailbookCommandLine", package: trailbook)]),
        .testTarget(
            name: "ThumbnailJobTests",
            dependencies: [
                "ThumbnailJob", .product(name: "TrailbookJobsTesting", package: trailbook),
                // The end-to-end test drives the example's own daemon through the typed client.
                .product(name: "TrailbookClient", package: trailbook),
            ]),
    ]
)
