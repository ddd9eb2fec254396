import CUV

/// Holes in sparse files: ranges that read as zeros with no disk blocks behind them.
///
/// Linux man-pages, lseek(2), "Seeking file data and holes": `SEEK_HOLE` gives the first hole at or after an
/// offset; every file has an implicit hole at its end, so a file without holes (or on a file system that does not
/// track them) gives its length.
public enum FileHoles {
    /// The offset of the first hole of the open file `fd`, in bytes from its start (its length when it has none),
    /// or `nil` if `lseek` fails (`fd` is not a seekable file).
    public static func first(in fd: Int32) -> Int64? {
        let offset = tb_seek_hole(fd, 0)
        return offset >= 0 ? Int64(offset) : nil
    }
}
