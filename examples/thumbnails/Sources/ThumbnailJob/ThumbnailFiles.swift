import PhotoLibrary
import TrailbookEngine

#if canImport(Glibc)
    import Glibc
#endif

/// The file work of `ThumbnailJob`, run on the thread pool: listing photos, writing a thumbnail durably, removing
/// what a cancelled job made.
enum ThumbnailFiles {
    /// The names of the `.jpg`/`.jpeg` files directly in `folder`, sorted (the order the job works in).
    /// - Throws: `JobError` `source_missing` if the folder cannot be read.
    static func photos(in folder: String) throws(JobError) -> [String] {
        guard let directory = opendir(folder) else {
            throw JobError(code: "source_missing", message: "cannot read \(folder): \(String(cString: strerror(errno)))")
        }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            let lower = name.lowercased()
            if lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg") { names.append(name) }
        }
        return names.sorted()
    }

    /// Creates `folder` if it does not exist.
    /// - Throws: `JobError` `destination_unwritable` if it cannot.
    static func makeFolder(_ folder: String) throws(JobError) {
        if mkdir(folder, 0o755) != 0 && errno != EEXIST {
            throw JobError(code: "destination_unwritable", message: "cannot create \(folder): \(String(cString: strerror(errno)))")
        }
    }

    /// Decodes the JPEG at `source`, scales it to `longSide` and writes it to `destination` (via `.part`, fsynced,
    /// renamed).
    /// - Throws: `JobError` `bad_photo` for a file that is not a readable JPEG, `destination_unwritable` for a
    ///   failed write.
    static func makeThumbnail(of source: String, at destination: String, longSide: Int) throws(JobError) {
        let bytes = try read(source)
        var limits = DecodeLimits()
        limits.targetLongSide = longSide
        let jpeg: [UInt8]
        do {
            jpeg = try RGBImage.decodeJPEG(bytes, limits: limits).image.fitted(longSide: longSide).jpegData(quality: 80)
        } catch {
            throw JobError(code: "bad_photo", message: "\(source): \(error)")
        }
        let part = destination + ".part"
        let fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw unwritable(part) }
        defer { close(fd) }
        let written = jpeg.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == jpeg.count, fsync(fd) == 0, rename(part, destination) == 0 else { throw unwritable(part) }
    }

    /// Removes the `.part` files in `folder`; returns how many.
    static func removeParts(in folder: String) -> Int {
        guard let names = try? entries(of: folder) else { return 0 }
        return names.filter { $0.hasSuffix(".part") && unlink(folder + "/" + $0) == 0 }.count
    }

    /// Removes from `output` the thumbnails of the photos of `folder`; returns how many.
    /// - Throws: `JobError` if `folder` cannot be read or a thumbnail cannot be removed.
    static func removeThumbnails(of folder: String, in output: String) throws(JobError) -> Int {
        var removed = removeParts(in: output)
        for name in try photos(in: folder) {
            if unlink(output + "/" + name) == 0 {
                removed += 1
            } else if errno != ENOENT {
                throw unwritable(output + "/" + name)
            }
        }
        return removed
    }

    private static func entries(of folder: String) throws(JobError) -> [String] {
        guard let directory = opendir(folder) else { throw unwritable(folder) }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            names.append(withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) })
        }
        return names
    }

    private static func read(_ path: String) throws(JobError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw JobError(code: "source_missing", message: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 { throw JobError(code: "source_missing", message: "cannot read \(path)") }
            if count == 0 { return bytes }
            bytes += chunk[0..<count]
        }
    }

    private static func unwritable(_ path: String) -> JobError {
        JobError(code: "destination_unwritable", message: "cannot write \(path): \(String(cString: strerror(errno)))", retryable: true)
    }
}
