// swift-tools-version:6.0
import PackageDescription

// Layers, bottom up: C system libraries (Debian -dev packages, through pkg-config) → the loop layer
// (TrailbookLoop) and the SQLite layer (TrailbookSQLite) → the engine (TrailbookEngine) → job kinds in Jobs/
// → the CLI and the executable. No outside Swift packages: none can be fetched on the build machines.
let package = Package(
    name: "trailbook-jobs",
    products: [
        .executable(name: "trailbook-jobs", targets: ["trailbook-jobs"])
    ],
    targets: [
        .systemLibrary(name: "CUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        .target(name: "TrailbookLoop", dependencies: ["CUV"]),
        .target(name: "TrailbookSQLite", dependencies: ["CSQLite"]),
        .target(name: "TrailbookHTTP", dependencies: ["TrailbookLoop", "CCurl"]),
        .target(name: "TrailbookEngine", dependencies: ["TrailbookLoop", "TrailbookSQLite", "CCrypto"]),

        .target(name: "TusClient", dependencies: ["TrailbookHTTP", "CCrypto"], path: "Jobs/Upload/Tus"),
        .target(name: "UploadJob", dependencies: ["TrailbookEngine"], path: "Jobs/Upload/Job"),

        .target(name: "TrailbookCLI", dependencies: ["TrailbookEngine", "UploadJob"]),
        .executableTarget(name: "trailbook-jobs", dependencies: ["TrailbookCLI"]),

        .testTarget(
            name: "TrailbookTests",
            dependencies: ["TrailbookLoop", "TrailbookSQLite", "TrailbookEngine", "UploadJob", "TrailbookCLI"]
        ),
        .testTarget(name: "EndToEndTests", dependencies: ["trailbook-jobs"]),
        .testTarget(name: "HTTPTests", dependencies: ["TrailbookLoop", "TrailbookHTTP", "TusClient", "CCrypto"]),
    ]
)
