import TrailbookPaths
import TrailbookSQLite

extension PhotoStore {
    /// The library's root: the deepest folder that holds every photo of the library (their paths' common folder,
    /// compared byte by byte), which `upload --keep-folders` names photos relative to. `nil` when the library has
    /// no photo.
    /// - Throws: `PhotoLibraryError` when the store cannot be read.
    public func libraryRoot() throws(PhotoLibraryError) -> BytePath? {
        // The byte-wise least and greatest paths share the prefix every path shares.
        let rows = try store {
            try database.query("SELECT min(CAST(path AS BLOB)), max(CAST(path AS BLOB)) FROM photos", [])
        }
        guard let row = rows.first, let least = row.blob(0), let greatest = row.blob(1) else { return nil }
        let common = zip(least, greatest).prefix { $0 == $1 }.count
        guard let slash = least[..<common].lastIndex(of: UInt8(ascii: "/")) else { return nil }
        return BytePath(bytes: slash == 0 ? [UInt8(ascii: "/")] : Array(least[..<slash]))
    }
}
