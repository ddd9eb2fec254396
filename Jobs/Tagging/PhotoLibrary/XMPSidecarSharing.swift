import TrailbookPaths

#if canImport(Glibc)
    import Glibc
#endif

/// Photos that would share one sidecar: with Lightroom naming (`XMPSidecarNaming.lightroom`) `IMG_1.JPG` and
/// `IMG_1.HEIC` in one folder both have `IMG_1.xmp`. One file cannot hold two photos' keywords, so such a sidecar
/// is neither written (`xmp_shared_sidecar`) nor read at import (a warning on each photo): the keywords of one
/// photo never reach the other. darktable naming (`IMG_1.JPG.xmp`) gives every photo its own.
public enum XMPSidecarSharing {
    /// The stable code of a change not written, and the start of the import warning.
    public static let code = "xmp_shared_sidecar"

    /// The other photo files (`PhotoScan.photoExtensions`, in lower, upper or title case) in the folder of
    /// `photoPath` whose `naming` sidecar is the same file as its own, sorted; `[]` for darktable naming. A few
    /// `stat` calls, no directory listing.
    public static func others(sharingSidecarOf photoPath: BytePath, naming: XMPSidecarNaming) -> [BytePath] {
        guard naming == .lightroom else { return [] }
        let sidecar = naming.sidecarPath(for: photoPath)
        guard sidecar.bytes.count > 4 else { return [] }
        let stem = Array(sidecar.bytes.dropLast(4))  // ".xmp"
        var own = stat()
        let ownExists = photoPath.withCString { stat($0, &own) } == 0
        var found: [BytePath] = []
        var tried = Set<[UInt8]>()
        for ext in PhotoScan.photoExtensions.sorted() {
            for spelling in [ext, ext.uppercased(), ext.prefix(1).uppercased() + ext.dropFirst()] {
                let candidate = stem + [UInt8(ascii: ".")] + Array(spelling.utf8)
                guard candidate != photoPath.bytes, tried.insert(candidate).inserted else { continue }
                var info = stat()
                let path = BytePath(bytes: candidate)
                guard path.withCString({ stat($0, &info) }) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
                if ownExists, info.st_dev == own.st_dev, info.st_ino == own.st_ino { continue }  // itself, another case
                let isSeen = found.contains { other in
                    var seen = stat()
                    return other.withCString { stat($0, &seen) } == 0 && seen.st_dev == info.st_dev
                        && seen.st_ino == info.st_ino
                }
                if isSeen { continue }  // the same file under another case
                found.append(path)
            }
        }
        return found.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
    }

    /// What to say about `photoPath`'s sidecar shared with `others`.
    static func message(_ photoPath: BytePath, sidecar: BytePath, others: [BytePath]) -> String {
        let names = others.map { "\($0.lastComponent)" }.joined(separator: ", ")
        return "\(sidecar) is the sidecar of \(photoPath.lastComponent) and of \(names) (Lightroom naming): one file "
            + "cannot hold two photos' keywords, so it is left as it is and its keywords are given to neither; use "
            + "--xmp-naming darktable (\(photoPath.lastComponent).xmp, one sidecar per photo), or rename one photo"
    }

    /// The failure of a change to a shared sidecar.
    static func failure(_ photoPath: BytePath, sidecar: BytePath, others: [BytePath]) -> XMPSidecarFailure {
        XMPSidecarFailure(code: code, message: message(photoPath, sidecar: sidecar, others: others))
    }
}
