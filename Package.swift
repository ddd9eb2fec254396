// swift-tools-version:6.0
import PackageDescription

// Layers, bottom up: C system libraries (Debian -dev packages, through pkg-config) → the loop layer
// (TrailbookLoop) and the SQLite layer (TrailbookSQLite) → the engine (TrailbookEngine) → job kinds in Jobs/
// → the CLI and the executable. No outside Swift packages: none can be fetched on the build machines.
let package = Package(
    name: "trailbook-jobs",
    products: [
        .executable(name: "trailbook-jobs", targets: ["trailbook-jobs"]),
        .executable(name: "trailbook-jobsd", targets: ["trailbook-jobsd"]),
        // The libraries another package depends on (docs/how-to/write-a-job-kind.md). The core: the engine (the
        // scheduler, the job store, the control socket, the `JobKind` API), the job model and protocol, and the
        // loop. It links libuv, SQLite, OpenSSL's libcrypto and libpq, no HTTP or photo library. libpq is in the
        // core because the shared PostgreSQL store is one of the engine's two job stores, chosen at `daemon`
        // start (`--store`), not a job kind: several daemons of a user's own kinds share a queue the same way.
        .library(name: "TrailbookJobs", targets: ["TrailbookEngine", "TrailbookProtocol", "TrailbookLoop"]),
        // The built-in kinds, each with the stack it needs: uploads (libcurl) and photo tagging (libexif, libjpeg,
        // libheif, exempi).
        .library(name: "TrailbookUploads", targets: ["UploadJob", "UploadParams"]),
        .library(name: "TrailbookTagging", targets: ["TaggingJobs", "PhotoLibrary"]),
        // Runs a kind in-process on an in-memory store, for a kind's unit tests.
        .library(name: "TrailbookJobsTesting", targets: ["TrailbookJobsTesting"]),
        // Talks to a running daemon over its control socket; no C library.
        .library(name: "TrailbookClient", targets: ["TrailbookClient"]),
        // The whole command line (`daemon`, `worker`, `submit`, `watch`, …) with the built-in kinds and the caller's.
        .library(name: "TrailbookCommandLine", targets: ["TrailbookCLI"]),
    ],
    targets: [
        .systemLibrary(name: "CUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CExif", pkgConfig: "libexif", providers: [.apt(["libexif-dev"])]),
        .systemLibrary(name: "CJPEG", pkgConfig: "libjpeg", providers: [.apt(["libjpeg62-turbo-dev"])]),
        // libjpeg reports errors by longjmp, which must never cross a Swift frame: the decode/encode entry points
        // are C functions that catch it and return a status code.
        .target(name: "CJPEGShim", dependencies: ["CJPEG"], linkerSettings: [.linkedLibrary("jpeg")]),
        // XMP sidecars and embedded XMP keywords (Adobe's XMP toolkit, through exempi's C API).
        .systemLibrary(name: "CExempi", pkgConfig: "exempi-2.0", providers: [.apt(["libexempi-dev"])]),
        // HEIF/HEIC and AVIF photos (libheif 1.15 in Debian 12).
        .systemLibrary(name: "CHeif", pkgConfig: "libheif", providers: [.apt(["libheif-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // PostgreSQL's client library: the shared job store of several daemons (issue 15).
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // The HTTP server of `web` (issue 39): GNU libmicrohttpd (see TrailbookWeb/WebServer.swift for why).
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        // glibc's allocator controls (`mallopt`): the daemon's mmap threshold (`LargeBufferAllocation`).
        .systemLibrary(name: "CMalloc"),

        // Paths as the bytes the kernel takes (no C library): below the loop, the protocol and the photo library.
        .target(name: "TrailbookPaths"),
        // What the daemon and its clients say over the control socket: JSON, the job model, timestamps. No C
        // library, so the thin client links only this and Foundation's essentials.
        .target(name: "TrailbookProtocol", dependencies: ["TrailbookPaths"]),
        .target(name: "TrailbookLoop", dependencies: ["CUV"]),
        .target(name: "TrailbookSQLite", dependencies: ["CSQLite"]),
        .target(name: "TrailbookHTTP", dependencies: ["TrailbookLoop", "CCurl"]),
        // PostgreSQL from the loop (libpq's non-blocking API on a poll handle) and the shared queue's SQL.
        .target(name: "TrailbookPostgres", dependencies: ["TrailbookLoop", "CLibPQ"]),
        .target(name: "TrailbookEngine", dependencies: ["TrailbookProtocol", "TrailbookLoop", "TrailbookSQLite", "TrailbookPostgres", "CCrypto"]),

        .target(name: "TusClient", dependencies: ["TrailbookHTTP", "CCrypto"], path: "Jobs/Upload/Tus"),
        .target(
            name: "S3Client", dependencies: ["TrailbookEngine", "TrailbookHTTP", "TrailbookLoop", "TusClient", "CCrypto"],
            path: "Jobs/Upload/S3"),
        // The parts of an upload's params the thin client checks too: where it goes, the names there, S3's checksum.
        .target(name: "UploadParams", dependencies: ["TrailbookProtocol"], path: "Jobs/Upload/Params"),
        .target(
            name: "UploadJob", dependencies: ["UploadParams", "TrailbookEngine", "TrailbookLoop", "TrailbookHTTP", "TusClient", "S3Client"],
            path: "Jobs/Upload/Job"),
        .target(name: "SleepJob", dependencies: ["TrailbookEngine"], path: "Jobs/Sleep"),
        // The test harness: a kind's run on the loop with a checkpoint store of its own, stopped where a test says.
        .target(name: "TrailbookJobsTesting", dependencies: ["TrailbookEngine", "TrailbookLoop"]),
        // The photo library under the tagging job kinds: metadata, pixels, places, the photo store. No engine
        // dependency, so it runs the same in the daemon, on the thread pool or in a worker process (TrailbookLoop
        // only for `DirectoryEntry`).
        .target(
            name: "PhotoLibrary",
            dependencies: ["TrailbookPaths", "TrailbookLoop", "TrailbookSQLite", "CExif", "CJPEG", "CJPEGShim", "CHeif", "CCrypto", "CExempi"],
            path: "Jobs/Tagging/PhotoLibrary"
        ),

        // The tagging job kinds (import, tag, autotag) and their worker tasks. UploadJob only for the seam it
        // implements (`UploadPhotoLibrary`): uploads of library photos resolve and remember them here.
        .target(
            name: "TaggingJobs",
            dependencies: ["TrailbookEngine", "TrailbookLoop", "PhotoLibrary", "TrailbookSQLite", "UploadJob"],
            path: "Jobs/Tagging/Jobs"),

        // The command line. TrailbookClient has every command's spec and the client commands' handlers, and links no
        // C library; TrailbookCLI adds the commands that need the engine or the photo library (`daemon`, `photos
        // list`, …). `trailbook-jobs` is the thin client and hands those to `trailbook-jobsd`, which has them all.
        .target(name: "TrailbookClient", dependencies: ["TrailbookProtocol", "UploadParams"]),
        // `web`: the live page of the jobs, served on 127.0.0.1 by a client of the control socket.
        .target(name: "TrailbookWeb", dependencies: ["TrailbookClient", "TrailbookProtocol", "CMicroHTTPD"]),
        .target(
            name: "TrailbookCLI",
            dependencies: [
                "TrailbookClient", "TrailbookEngine", "TrailbookLoop", "TrailbookPostgres", "UploadJob", "SleepJob", "TaggingJobs",
                "PhotoLibrary", "TrailbookWeb", "CMalloc",
            ]),
        .executableTarget(name: "trailbook-jobs", dependencies: ["TrailbookClient"]),
        .executableTarget(name: "trailbook-jobsd", dependencies: ["TrailbookCLI"]),

        // Helpers shared by the test targets: a loop on its own thread, an actor pinned to it, a child that says READY.
        .target(name: "TestSupport", dependencies: ["TrailbookLoop"], path: "Tests/TestSupport"),
        .testTarget(
            name: "TrailbookTests",
            dependencies: [
                "TrailbookLoop", "TrailbookSQLite", "TrailbookProtocol", "TrailbookEngine", "UploadJob", "SleepJob", "TrailbookClient",
                "TrailbookCLI", "TestSupport", "TrailbookJobsTesting",
            ]
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "trailbook-jobs", "trailbook-jobsd", "TrailbookCLI", "TrailbookEngine", "TrailbookLoop", "TrailbookSQLite", "PhotoLibrary", "CExif",
                "TestSupport",
            ]),
        .testTarget(
            name: "PhotoLibraryTests",
            dependencies: ["PhotoLibrary", "TrailbookLoop", "TrailbookSQLite", "CExif", "CJPEGShim", "CHeif", "TestSupport"]
        ),
        .testTarget(
            name: "HTTPTests",
            dependencies: ["TrailbookLoop", "TrailbookHTTP", "TusClient", "S3Client", "CCrypto", "TestSupport"]),
        // Against a throwaway PostgreSQL server (Tests/TestSupport/PostgresServer.swift).
        .testTarget(name: "PostgresTests", dependencies: ["TrailbookPostgres", "TrailbookLoop", "TestSupport"]),
    ]
)
