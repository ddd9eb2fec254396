/// JPEGs of a big phone's size made in a moment and a few hundred KB: for the decode bounds, without encoding
/// 200 megapixels of pixels.
public enum LargeJPEG {
    /// A valid baseline JPEG of `width × height` (default 16 384 × 12 288, 201 megapixels, a 200 MP phone's size),
    /// built by hand: one grey component, Huffman tables of one code each, every 8 × 8 block "DC unchanged, end of
    /// block" (2 bits), so a flat mid-grey picture. djpeg and exiftool read it.
    public static func flatGrey(width: Int = 16_384, height: Int = 12_288) -> [UInt8] {
        var out: [UInt8] = [0xFF, 0xD8]
        func segment(_ marker: UInt8, _ payload: [UInt8]) {
            out += [0xFF, marker, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
        }
        segment(0xDB, [0x00] + [UInt8](repeating: 1, count: 64))  // DQT 0, all ones
        segment(0xC0, [8, UInt8(height >> 8), UInt8(height & 0xFF), UInt8(width >> 8), UInt8(width & 0xFF), 1, 1, 0x11, 0])
        // DHT: DC table 0 and AC table 0, each one code of length 1 ("0") for symbol 0 (DC: no change; AC: EOB).
        segment(0xC4, [0x00, 1] + [UInt8](repeating: 0, count: 15) + [0x00])
        segment(0xC4, [0x10, 1] + [UInt8](repeating: 0, count: 15) + [0x00])
        segment(0xDA, [1, 1, 0x00, 0, 63, 0])
        let blocks = ((width + 7) / 8) * ((height + 7) / 8)
        out += [UInt8](repeating: 0, count: (blocks * 2 + 7) / 8)  // 2 zero bits a block
        out += [0xFF, 0xD9]
        return out
    }
}
