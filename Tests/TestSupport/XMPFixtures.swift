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
}
