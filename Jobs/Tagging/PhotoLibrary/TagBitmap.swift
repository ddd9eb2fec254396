/// The bit arithmetic of the photo store's tag index (schema 4, see `PhotoStore`): local ID `id` is bit
/// `id & 63` of word `id >> 6`, and a tag's row for a word is a 64-bit integer with the bits of the photos of that
/// word that have the tag. SQLite keeps the integer signed; bit 63 is its sign bit, so the store converts with
/// `bitPattern`.
///
/// The layout is a bitmap index, as search engines keep posting lists (for example Roaring bitmaps,
/// https://arxiv.org/abs/1402.6407, use fixed runs of IDs per container); a word of 64 is the largest run that
/// SQLite can hold in one integer, so the store needs no blob arithmetic and its trigger and view are plain SQL.
enum TagBitmap {
    /// The word that holds local ID `id`'s bit.
    static func word(of id: PhotoLocalID) -> Int64 { id >> 6 }

    /// Local ID `id`'s bit within its word.
    static func bit(of id: PhotoLocalID) -> UInt64 { 1 << UInt64(id & 63) }

    /// `ids` (ascending, distinct) grouped by word: each word once, in order, with the bits of its IDs set.
    static func words(of ids: [PhotoLocalID]) -> [(word: Int64, bits: UInt64)] {
        var words: [(word: Int64, bits: UInt64)] = []
        for id in ids {
            let word = word(of: id)
            if let last = words.last, last.word == word {
                words[words.count - 1].bits |= bit(of: id)
            } else {
                words.append((word, bit(of: id)))
            }
        }
        return words
    }
}
