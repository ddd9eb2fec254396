import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Tag spelling rules.
public enum TagName {
    /// Longest tag, in UTF-8 bytes (of its NFC form).
    public static let maxBytes = 200

    /// `tag` trimmed of surrounding spaces and in NFC (`nfc`), as the store keeps it.
    ///
    /// - Throws: `PhotoLibraryError.invalidTag` when empty, longer than `maxBytes`, or holding control characters.
    public static func validated(_ tag: String) throws(PhotoLibraryError) -> String {
        guard let clean = trimmed(tag).map(nfc) else { throw PhotoLibraryError(.invalidTag, "empty tag") }
        guard clean.utf8.count <= maxBytes else {
            throw PhotoLibraryError(.invalidTag, "tag longer than \(maxBytes) bytes")
        }
        guard !clean.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw PhotoLibraryError(.invalidTag, "tag holds control characters")
        }
        return clean
    }

    /// `text` in Unicode Normalization Form C (https://unicode.org/reports/tr15/): `Cão` typed with the
    /// precomposed U+00E3 or as `a` + U+0303 gives the same bytes, so it is one tag.
    ///
    /// Why the standard library's `_nfcCodeUnits` and not Foundation's `precomposedStringWithCanonicalMapping`:
    /// on Linux that one is only in the full `Foundation` (CoreFoundation), not in `FoundationEssentials`, which
    /// is all this project links; linking it would cost every daemon and worker process about 7 MiB of RSS
    /// (measured: 11.1 vs 18.6 MiB for a program that only normalizes one string). `_nfcCodeUnits` is the
    /// normalizer `String`'s own `==` and hashing use, so two tags are one exactly when Swift says their strings
    /// are equal. `TagNameTests` checks it against Foundation's.
    public static func nfc(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return text }  // ASCII is NFC
        return String(decoding: text._nfcCodeUnits, as: UTF8.self)
    }
}
