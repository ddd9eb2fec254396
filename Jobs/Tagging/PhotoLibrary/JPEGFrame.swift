/// A JPEG's frame header (SOFn, ITU T.81 §B.2.2) read by walking the markers, without libjpeg: what the file says
/// about its size, sample precision and coding process even when it is a kind libjpeg-turbo does not decode (12-bit
/// samples, lossless, hierarchical), so such a file is reported valid but not supported, with its size, instead
/// of `corrupt`.
public struct JPEGFrame: Hashable, Sendable {
    /// The frame marker's second byte: `0xC0`…`0xCF` except `0xC4` (DHT), `0xC8` (JPG) and `0xCC` (DAC).
    public var marker: UInt8
    /// Bits per sample (`P`): 8 or 12 for DCT-based processes, 2…16 for lossless.
    public var precision: Int
    /// Lines (`Y`); 0 when a DNL marker after the first scan gives it.
    public var height: Int
    /// Samples per line (`X`).
    public var width: Int
    /// Image components (`Nf`).
    public var components: Int

    /// The first frame header of `bytes`, or `nil` when there is none before the first scan or the markers do not
    /// lead to one (a damaged or cut-short file).
    public init?(jpeg bytes: [UInt8]) {
        guard bytes.count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return nil }
        var at = 2
        while at + 1 < bytes.count {
            guard bytes[at] == 0xFF else { return nil }
            var markerAt = at + 1
            while markerAt < bytes.count, bytes[markerAt] == 0xFF { markerAt += 1 }  // fill bytes
            guard markerAt < bytes.count else { return nil }
            let marker = bytes[markerAt]
            at = markerAt + 1
            if marker == 0x01 || (0xD0...0xD7).contains(marker) { continue }  // no length
            if marker == 0xD9 || marker == 0xDA { return nil }  // end, or a scan before any frame
            guard at + 2 <= bytes.count else { return nil }
            let length = Int(bytes[at]) << 8 | Int(bytes[at + 1])
            guard length >= 2, at + length <= bytes.count else { return nil }
            if JPEGFrame.isFrameMarker(marker) {
                guard length >= 8 else { return nil }
                self.marker = marker
                precision = Int(bytes[at + 2])
                height = Int(bytes[at + 3]) << 8 | Int(bytes[at + 4])
                width = Int(bytes[at + 5]) << 8 | Int(bytes[at + 6])
                components = Int(bytes[at + 7])
                return
            }
            at += length
        }
        return nil
    }

    /// Whether `marker` starts a frame header (SOF0…SOF15 less DHT, JPG and DAC).
    static func isFrameMarker(_ marker: UInt8) -> Bool {
        (0xC0...0xCF).contains(marker) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC
    }

    /// The coding process, in words (`baseline, Huffman (SOF0)`, `lossless, arithmetic (SOF11)`, …).
    public var process: String {
        let names = [
            "baseline", "extended sequential", "progressive", "lossless", "", "hierarchical sequential",
            "hierarchical progressive", "hierarchical lossless",
        ]
        let number = Int(marker) - 0xC0
        return names[number & 7] + (number >= 8 ? ", arithmetic" : ", Huffman") + " (SOF\(number))"
    }

    /// Why libjpeg-turbo (built for 8-bit samples, as Debian's is) does not decode this frame, in words; `nil` for
    /// the kinds it decodes (8-bit baseline, extended sequential and progressive, Huffman or arithmetic).
    public var unsupportedReason: String? {
        if [0xC3, 0xCB].contains(marker) { return "lossless coding" }
        if [0xC5, 0xC6, 0xC7, 0xCD, 0xCE, 0xCF].contains(marker) { return "hierarchical (differential) coding" }
        if precision != 8 { return "\(precision)-bit samples" }
        if height == 0 { return "a height given by a DNL marker after the first scan" }
        return nil
    }

    /// The error for a file of this frame that the decoder refused: what is valid about it and what is not read.
    func unsupportedError(_ reason: String) -> PhotoLibraryError {
        PhotoLibraryError(
            .unsupportedCoding,
            "a valid JPEG (\(width) × \(height), \(precision)-bit, \(process)) coded with \(reason), which the "
                + "decoder (libjpeg-turbo, 8-bit) does not read; its size and EXIF are kept, its pixels not analysed")
    }
}
