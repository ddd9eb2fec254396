/// Text as a terminal shows it: control characters made visible, widths in columns.
///
/// Every field the CLI draws for people (file names, tags, error messages, reasons) goes through `escape` first:
/// a name holding `ESC ]0;… BEL` or `ESC [2J` would otherwise retitle or clear the terminal, and a newline would
/// split a row and could fake a line. Widths count terminal columns, not characters, per grapheme cluster (what
/// Swift calls a `Character`), so a cut never splits an emoji sequence or leaves half a wide character.
///
/// Widths follow what glibc's `wcwidth` (Debian 12, glibc 2.36, Unicode 14) gives each scalar in a UTF-8 locale,
/// which is also what tmux and xterm use: East Asian Wide and Fullwidth = 2, nonspacing and enclosing marks, format
/// characters, Hangul medial vowels and final consonants = 0, everything else 1. A cluster takes the sum of its
/// scalars, and at least 2 when it is drawn as an emoji (a scalar with Emoji_Presentation, or VS16): terminals
/// disagree on ZWJ sequences (one emoji, 2 columns, or each part drawn, up to 2 per part), so the larger count
/// is used and a line can come out short, never too long. The table is used rather than calling `wcwidth`
/// because `wcwidth` answers only in the process's locale (`-1` for every non-ASCII character under `C`) and per
/// scalar; `TerminalTextTests` checks the table against glibc's `wcwidth` under `C.UTF-8`.
package enum TerminalText {
    /// `text` with every control character replaced by a visible escape: `\t`, `\n`, `\r`; `\xHH` for the other
    /// C0 controls (U+0000–U+001F) and DEL (`\x7f`); `\uHHHH` for the C1 controls (U+0080–U+009F) and the
    /// bidirectional controls (U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which reorder what follows. (In
    /// a file name, `\xHH` also stands for a byte that is not UTF-8: see `BytePath`.) Backslashes are left as they
    /// are: the exact bytes are in `--json`.
    package static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar) else {
                out.unicodeScalars.append(scalar)
                continue
            }
            switch scalar.value {
            case 0x09: out += "\\t"
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0..<0x20, 0x7F: out += "\\x" + hex(scalar.value, digits: 2)
            default: out += "\\u" + hex(scalar.value, digits: 4)
            }
        }
        return out
    }

    /// Whether `escape` replaces `scalar`.
    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7F...0x9F, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }

    /// Columns `text` takes on a terminal (after `escape`; a control character left in counts as its escape).
    static func columns(_ text: String) -> Int {
        // ASCII without controls: one column a byte.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return text.utf8.count }
        return text.reduce(0) { $0 + columns(of: $1) }
    }

    /// Columns one grapheme cluster takes.
    static func columns(of character: Character) -> Int {
        var sum = 0
        var emoji = false
        for scalar in character.unicodeScalars {
            if needsEscape(scalar) { return escape(String(character)).utf8.count }
            sum += columns(of: scalar)
            if scalar.properties.isEmojiPresentation || scalar.value == 0xFE0F { emoji = true }
        }
        return emoji ? max(2, sum) : sum
    }

    /// Columns one scalar takes on its own (`wcwidth`).
    static func columns(of scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        if value < 0x300 { return (value >= 0x20 && value < 0x7F) || value >= 0xA0 ? 1 : 0 }
        if isWide(value) { return 2 }
        if value == 0x200B || (0x1160...0x11FF).contains(value) || (0xD7B0...0xD7FF).contains(value) { return 0 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark: return 0
        case .format:
            // Prepended concatenation marks (ARABIC NUMBER SIGN and the like) are drawn: glibc gives them 1.
            return [0x600, 0x601, 0x602, 0x603, 0x604, 0x605, 0x6DD, 0x70F, 0x890, 0x891, 0x8E2, 0x110BD, 0x110CD]
                .contains(value) ? 1 : 0
        default: return 1
        }
    }

    /// Whether `value` is East Asian Wide or Fullwidth (Unicode 14 `EastAsianWidth.txt`, W and F, assigned code
    /// points only; generated with Python's `unicodedata`, whose data is the same version as glibc 2.36's).
    static func isWide(_ value: UInt32) -> Bool {
        guard value >= wideRanges[0].lowerBound else { return false }
        var low = 0
        var high = wideRanges.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if value < wideRanges[middle].lowerBound {
                high = middle - 1
            } else if value > wideRanges[middle].upperBound {
                low = middle + 1
            } else {
                return true
            }
        }
        return false
    }

    /// The longest prefix of `text` (whole clusters) that fits in `columns`, and its width.
    static func prefix(_ text: String, columns limit: Int) -> (text: Substring, columns: Int) {
        var used = 0
        var end = text.startIndex
        for index in text.indices {
            let width = columns(of: text[index])
            if used + width > limit { break }
            used += width
            end = text.index(after: index)
        }
        return (text[..<end], used)
    }

    private static let wideRanges: [ClosedRange<UInt32>] = [
        0x1100...0x115F, 0x231A...0x231B, 0x2329...0x232A, 0x23E9...0x23EC, 0x23F0...0x23F0, 0x23F3...0x23F3,
        0x25FD...0x25FE, 0x2614...0x2615, 0x2648...0x2653, 0x267F...0x267F, 0x2693...0x2693, 0x26A1...0x26A1,
        0x26AA...0x26AB, 0x26BD...0x26BE, 0x26C4...0x26C5, 0x26CE...0x26CE, 0x26D4...0x26D4, 0x26EA...0x26EA,
        0x26F2...0x26F3, 0x26F5...0x26F5, 0x26FA...0x26FA, 0x26FD...0x26FD, 0x2705...0x2705, 0x270A...0x270B,
        0x2728...0x2728, 0x274C...0x274C, 0x274E...0x274E, 0x2753...0x2755, 0x2757...0x2757, 0x2795...0x2797,
        0x27B0...0x27B0, 0x27BF...0x27BF, 0x2B1B...0x2B1C, 0x2B50...0x2B50, 0x2B55...0x2B55, 0x2E80...0x2E99,
        0x2E9B...0x2EF3, 0x2F00...0x2FD5, 0x2FF0...0x2FFB, 0x3000...0x3029, 0x302E...0x303E, 0x3041...0x3096,
        0x309B...0x30FF, 0x3105...0x312F, 0x3131...0x318E, 0x3190...0x31E3, 0x31F0...0x321E, 0x3220...0x3247,
        0x3250...0x4DBF, 0x4E00...0xA48C, 0xA490...0xA4C6, 0xA960...0xA97C, 0xAC00...0xD7A3, 0xF900...0xFA6D,
        0xFA70...0xFAD9, 0xFE10...0xFE19, 0xFE30...0xFE52, 0xFE54...0xFE66, 0xFE68...0xFE6B, 0xFF01...0xFF60,
        0xFFE0...0xFFE6, 0x16FE0...0x16FE3, 0x16FF0...0x16FF1, 0x17000...0x187F7, 0x18800...0x18CD5,
        0x18D00...0x18D08, 0x1AFF0...0x1AFF3, 0x1AFF5...0x1AFFB, 0x1AFFD...0x1AFFE, 0x1B000...0x1B122,
        0x1B150...0x1B152, 0x1B164...0x1B167, 0x1B170...0x1B2FB, 0x1F004...0x1F004, 0x1F0CF...0x1F0CF,
        0x1F18E...0x1F18E, 0x1F191...0x1F19A, 0x1F200...0x1F202, 0x1F210...0x1F23B, 0x1F240...0x1F248,
        0x1F250...0x1F251, 0x1F260...0x1F265, 0x1F300...0x1F320, 0x1F32D...0x1F335, 0x1F337...0x1F37C,
        0x1F37E...0x1F393, 0x1F3A0...0x1F3CA, 0x1F3CF...0x1F3D3, 0x1F3E0...0x1F3F0, 0x1F3F4...0x1F3F4,
        0x1F3F8...0x1F43E, 0x1F440...0x1F440, 0x1F442...0x1F4FC, 0x1F4FF...0x1F53D, 0x1F54B...0x1F54E,
        0x1F550...0x1F567, 0x1F57A...0x1F57A, 0x1F595...0x1F596, 0x1F5A4...0x1F5A4, 0x1F5FB...0x1F64F,
        0x1F680...0x1F6C5, 0x1F6CC...0x1F6CC, 0x1F6D0...0x1F6D2, 0x1F6D5...0x1F6D7, 0x1F6DD...0x1F6DF,
        0x1F6EB...0x1F6EC, 0x1F6F4...0x1F6FC, 0x1F7E0...0x1F7EB, 0x1F7F0...0x1F7F0, 0x1F90C...0x1F93A,
        0x1F93C...0x1F945, 0x1F947...0x1F9FF, 0x1FA70...0x1FA74, 0x1FA78...0x1FA7C, 0x1FA80...0x1FA86,
        0x1FA90...0x1FAAC, 0x1FAB0...0x1FABA, 0x1FAC0...0x1FAC5, 0x1FAD0...0x1FAD9, 0x1FAE0...0x1FAE7,
        0x1FAF0...0x1FAF6, 0x20000...0x2A6DF, 0x2A700...0x2B738, 0x2B740...0x2B81D, 0x2B820...0x2CEA1,
        0x2CEB0...0x2EBE0, 0x2F800...0x2FA1D, 0x30000...0x3134A
    ]
}
