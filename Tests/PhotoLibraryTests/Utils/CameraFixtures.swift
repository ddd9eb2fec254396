import Foundation
import PhotoLibrary
import Testing

/// Camera-like photos made at test time, so no test needs files from outside the repository: pixels encoded by
/// libjpeg (`RGBImage.jpegData`), EXIF written by exiftool (a second writer besides libexif, as cameras and phone
/// apps differ), and the awkward kinds real libraries hold (CMYK, a truncated progressive file).
///
/// Extra real photos may be added by pointing `TRAILBOOK_EXTRA_PHOTOS` at a folder of them; they are checked when
/// given and never needed (`RealPhotoTests`). Nothing is looked for outside the repository unless named so.
enum CameraFixtures {
    /// What a photo holds, as the tests expect to read it back (a generated one, or a real one in the extras).
    struct Photo: Sendable, CustomTestStringConvertible {
        var file: String
        var make: String?
        var model: String?
        var orientation: Int?
        /// Stored size (before orientation).
        var width: Int
        var height: Int
        var takenAt: String?
        var gps: (Double, Double)?
        var place: String?
        var aspect: AspectClass
        /// exiftool arguments that write the EXIF above (generated photos only).
        var exiftool: [String] = []
        var testDescription: String { file }
    }

    /// A picture with structure at every scale the analysis looks at (so its hash is evidence).
    static func picture(_ width: Int, _ height: Int, phase: Double = 0) -> RGBImage {
        Fixtures.image(width, height) { x, y in
            let u = Double(x) * 160 / Double(width), v = Double(y) * 90 / Double(height)
            let s = 128 + 100 * sin(u / 17 + phase) * cos(v / 11)
            return (UInt8(s), UInt8(255 - s), 90)
        }
    }

    /// The generated camera photos.
    static let photos: [Photo] = [
        Photo(
            file: "canon-40d.jpg", make: "Canon", model: "Canon EOS 40D", orientation: 1, width: 100, height: 68,
            takenAt: "2008-05-30T15:56:01", aspect: .landscape,
            exiftool: ["-Make=Canon", "-Model=Canon EOS 40D", "-Orientation#=1", "-DateTimeOriginal=2008:05:30 15:56:01"]),
        Photo(
            file: "nikon-gps.jpg", make: "NIKON", model: "COOLPIX P6000", orientation: 1, width: 640, height: 480,
            takenAt: "2008-10-22T16:28:39", gps: (43.4674483, 11.8851267), place: "Arezzo", aspect: .landscape,
            exiftool: [
                "-Make=NIKON", "-Model=COOLPIX P6000", "-Orientation#=1", "-DateTimeOriginal=2008:10:22 16:28:39",
                "-GPSLatitude=43.4674483", "-GPSLatitudeRef=N", "-GPSLongitude=11.8851267", "-GPSLongitudeRef=E",
            ]),
        Photo(
            file: "iphone-madrid.jpg", make: "Apple", model: "iPhone 6", orientation: 1, width: 326, height: 244,
            takenAt: "2015-04-10T20:12:23+02:00", gps: (40.4469722, -3.7247528), place: "Madrid", aspect: .landscape,
            exiftool: [
                "-Make=Apple", "-Model=iPhone 6", "-Orientation#=1", "-DateTimeOriginal=2015:04:10 20:12:23",
                "-OffsetTimeOriginal=+02:00", "-GPSLatitude=40.4469722", "-GPSLatitudeRef=N",
                "-GPSLongitude=3.7247528", "-GPSLongitudeRef=W",
            ]),
        Photo(
            file: "sony-sydney.jpg", make: "SONY", model: "HDR-HC3", orientation: nil, width: 100, height: 64,
            takenAt: "2007-06-15T04:42:32", gps: (-33.8688, 151.2093), place: "Sydney", aspect: .landscape,
            exiftool: [
                "-Make=SONY", "-Model=HDR-HC3", "-DateTimeOriginal=2007:06:15 04:42:32", "-GPSLatitude=33.8688",
                "-GPSLatitudeRef=S", "-GPSLongitude=151.2093", "-GPSLongitudeRef=E",
            ]),
        // Stored 45 × 60, orientation 6 (rotate 90° clockwise): upright 60 × 45.
        Photo(
            file: "orient-landscape-6.jpg", orientation: 6, width: 45, height: 60, aspect: .landscape,
            exiftool: ["-Orientation#=6"]),
        // Stored 60 × 45, orientation 5 (transpose): upright 45 × 60.
        Photo(
            file: "orient-portrait-5.jpg", orientation: 5, width: 60, height: 45, aspect: .portrait,
            exiftool: ["-Orientation#=5"]),
    ]

    /// A CMYK JPEG (Adobe marker, inverted as Photoshop writes it) of a red picture, 100 × 100.
    static let cmykFile = "cmyk-red.jpg"
    /// A progressive JPEG cut in half: its header and EXIF are whole, its scans are not.
    static let truncatedFile = "truncated-progressive.jpg"

    /// Writes every generated photo into `dir` (exiftool for the EXIF) plus the CMYK and truncated files.
    ///
    /// - Throws: when libjpeg or exiftool fails (exiftool is a test dependency: scripts/install-deps.sh).
    static func write(into dir: String) throws {
        for (n, photo) in photos.enumerated() {
            let path = dir + "/" + photo.file
            Fixtures.write(try picture(photo.width, photo.height, phase: Double(n)).jpegData(), to: path)
            try exiftool(["-overwrite_original", "-q"] + photo.exiftool + [path])
        }
        let red = Fixtures.image(100, 100) { x, y in (UInt8(200 + (x * y) % 40), UInt8((x + y) % 30), 20) }
        Fixtures.write(try red.jpegData(cmyk: true), to: dir + "/" + cmykFile)
        let progressive = try picture(200, 150).jpegData(progressive: true)
        let truncated = dir + "/" + truncatedFile
        Fixtures.write(Array(progressive.prefix(progressive.count / 2)), to: truncated)
        try exiftool(["-overwrite_original", "-q", "-m", "-Make=Pentax", truncated])
    }

    /// Runs exiftool with `arguments`.
    static func exiftool(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["exiftool"] + arguments
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw FixtureError(
                "exiftool \(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(message) "
                    + "(install it with scripts/install-deps.sh: libimage-exiftool-perl)")
        }
    }

    /// The optional folder of extra real photos, `$TRAILBOOK_EXTRA_PHOTOS`; `nil` when it is not set.
    static let extraPhotos: String? = {
        guard let path = ProcessInfo.processInfo.environment["TRAILBOOK_EXTRA_PHOTOS"], !path.isEmpty else { return nil }
        return path
    }()

    struct FixtureError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
