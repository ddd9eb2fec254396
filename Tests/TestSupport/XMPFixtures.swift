import Foundation

/// XMP test material shared by the photo-library and end-to-end tests: another app's sidecar, and exiftool as the
/// outside reader of what was written.
public enum XMPFixtures {
    /// A darktable sidecar with a rating (`xmp:Rating` 4), a colour label (`xmp:Label` Red), darktable's own
    /// namespace (`darktable:history_end` 3) and a keyword of its own (`beach`).
    public static let foreignSidecar = """
        <x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\
        <rdf:Description rdf:about="" xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/" \
        xmlns:darktable="http://darktable.sf.net/" xmp:Rating="4" xmp:Label="Red" darktable:history_end="3">\
        <dc:subject><rdf:Bag><rdf:li>beach</rdf:li></rdf:Bag></dc:subject></rdf:Description></rdf:RDF></x:xmpmeta>
        """

    /// Runs exiftool with `arguments` and returns its stdout, trimmed (stderr is dropped).
    /// - Throws: when exiftool cannot be started.
    public static func exiftool(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["exiftool"] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// What exiftool prints for one tag of `file` (`-s3`, list items joined by `;`; empty when absent).
    public static func seen(_ tag: String, _ file: String) throws -> String {
        try exiftool(["-s3", "-sep", ";", "-" + tag, file])
    }

    /// What exiftool prints for one tag of the file whose path is exactly `file` (bytes; need not be UTF-8, must
    /// hold no newline): the path goes to exiftool in an argument file (`-@`), which it reads as bytes, because a
    /// process argument given as a Swift `String` cannot hold bytes that are not UTF-8.
    /// - Throws: when the argument file cannot be written or exiftool cannot be started.
    public static func seen(_ tag: String, bytes file: [UInt8]) throws -> String {
        let argfile = NSTemporaryDirectory() + "/exiftool-args-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try Data(Array("-s3\n-sep\n;\n-\(tag)\n".utf8) + file + [0x0A]).write(to: URL(fileURLWithPath: argfile))
        defer { try? FileManager.default.removeItem(atPath: argfile) }
        return try exiftool(["-@", argfile])
    }
}
