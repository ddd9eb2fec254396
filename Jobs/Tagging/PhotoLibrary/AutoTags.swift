import TrailbookLoop
import TrailbookPaths

/// The namespaced tags `autotag` derives from a photo's metadata and pixels.
///
/// | tag | from |
/// |---|---|
/// | `year:2024`, `month:2024-05` | `takenAt`, unless it is a camera clock's factory default (`CameraClock`) |
/// | `make:Canon`, `camera:Canon EOS 40D` | EXIF Make and Model (the model alone when it already starts with the make) |
/// | `place:Lisbon` | GPS → nearest place within the table's radius |
/// | `aspect:portrait` / `landscape` / `square` / `panorama` | upright pixel size |
/// | `night` | mean luma below `PixelAnalysis.nightLumaThreshold` |
/// | `color:blue` … | dominant palette colour (`ColorName`) |
/// | `unreadable` | the pixels could not be decoded |
///
/// `duplicate-of:<stable id>` needs the whole library and is added by the job via `PhotoStore.nearestDuplicate`.
public enum AutoTags {
    /// The namespace of a place tag: `place:` + the place's name (`place:Lisbon`).
    public static let placePrefix = "place:"
    /// Tag namespaces (the part before `:`) that autotag owns, plus its bare tags; a re-run replaces exactly these.
    public static let managedNamespaces: Set<String> = ["year", "month", "make", "camera", "place", "aspect", "color", "duplicate-of"]
    /// Bare tags autotag owns.
    public static let managedBareTags: Set<String> = ["night", "unreadable"]

    /// Whether autotag owns `tag` (for `PhotoStoreTransaction.replaceTags`).
    public static func isManaged(_ tag: String) -> Bool {
        if managedBareTags.contains(tag) { return true }
        guard let colon = tag.firstIndex(of: ":") else { return false }
        return managedNamespaces.contains(String(tag[..<colon]))
    }

    /// The tags for one photo, sorted. `pixels` is `nil` when decoding failed (`unreadable`).
    public static func tags(metadata: PhotoMetadata, pixels: PixelAnalysis?, places: PlaceTable?) -> [String] {
        var tags = Set<String>()
        if let taken = metadata.takenAt, taken.utf8.count >= 7, !CameraClock.isFactoryDefault(taken) {
            tags.insert("year:" + taken.prefix(4))
            tags.insert("month:" + taken.prefix(7))
        }
        if let make = metadata.cameraMake { tags.insert("make:" + make) }
        if let model = metadata.cameraModel {
            if let make = metadata.cameraMake, !model.lowercased().hasPrefix(make.lowercased()) {
                tags.insert("camera:\(make) \(model)")
            } else {
                tags.insert("camera:" + model)
            }
        }
        if let gps = metadata.gps, let place = places?.nearest(to: gps) { tags.insert(Self.placePrefix + place.place.name) }
        if let pixels {
            tags.insert("aspect:" + pixels.aspect.rawValue)
            if pixels.isNight { tags.insert("night") }
            tags.insert("color:" + pixels.dominantColor.rawValue)
        } else {
            tags.insert("unreadable")
        }
        return tags.sorted()
    }
}

/// Everything a worker learns from one file in one read: identity, stamp, metadata, pixels.
///
/// Pure and `Codable`, so an isolated worker process can compute it and send it to the daemon as JSON.
public struct PhotoInspection: Hashable, Sendable, Codable {
    /// The file's path (its exact bytes; JSON: `BytePath`'s form).
    public var path: BytePath
    /// Its stamp, from the descriptor that was read.
    public var stamp: FileStamp
    /// Its content ID.
    public var stableID: StableID
    /// Its metadata.
    public var metadata: PhotoMetadata
    /// Its pixel analysis, or `nil` when decoding failed.
    public var pixels: PixelAnalysis?
    /// Why `pixels` is `nil`, in words (`PhotoLibraryError.message`; the code is `pixelErrorCode`).
    public var pixelError: String?
    /// Why `pixels` is `nil`, as the photo library's stable code (`truncated`, `corrupt`, `too_large`, …).
    public var pixelErrorCode: String?
    /// The keywords the photo already carries in XMP (its embedded packet's and its sidecars' `dc:subject`), when
    /// asked for (import); `nil` otherwise.
    public var keywords: [String]?

    /// Reads `path` once and inspects it.
    ///
    /// - Parameters:
    ///   - analysePixels: decode and analyse the pixels (autotag) or not (import).
    ///   - limits: decoder limits.
    ///   - readKeywords: also read the XMP keywords (`keywords`).
    /// - Throws: `PhotoLibraryError` `.io`/`.tooLarge` if the file cannot be read, `.empty`/`.unsupportedFormat` if it is
    ///   no format the library reads (`PhotoFormat`), `.corrupt` for a HEIF libheif cannot parse. A photo whose
    ///   pixels fail to decode is not an error: see `pixelError`.
    public init(path: BytePath, analysePixels: Bool = true, limits: DecodeLimits = DecodeLimits(), readKeywords: Bool = false)
        throws(PhotoLibraryError)
    {
        let file = try PhotoFile.read(path: path)
        self.path = path
        stamp = file.stamp
        stableID = StableID(contentsOf: file.bytes)
        let decoder = try PhotoFormat.decoder(for: file.bytes)
        metadata = try decoder.metadata(file.bytes)
        if readKeywords {
            keywords = XMPKeywords.keywords(ofPhoto: path, bytes: file.bytes, warnings: &metadata.warnings)
        }
        guard analysePixels else { return }
        do {
            pixels = PixelAnalysis(displayed: try decoder.displayedImage(file.bytes, metadata: metadata, limits: limits))
        } catch {
            pixelError = error.message
            pixelErrorCode = error.code.name
        }
    }

    /// Reads the file at `path` (text) once and inspects it; see `init(path:analysePixels:limits:readKeywords:)`.
    public init(path: String, analysePixels: Bool = true, limits: DecodeLimits = DecodeLimits(), readKeywords: Bool = false)
        throws(PhotoLibraryError)
    {
        try self.init(path: BytePath(path), analysePixels: analysePixels, limits: limits, readKeywords: readKeywords)
    }

    /// What reading the photo noticed, in words, for `PhotoRecord.warnings`: the metadata's warnings, the pixel
    /// analysis's, and why the pixels did not decode.
    public var warnings: [String] {
        metadata.warnings + (pixels?.warnings ?? []) + (pixelError.map { ["unreadable (\(pixelErrorCode ?? "corrupt")): " + $0] } ?? [])
    }

    /// The import record for `PhotoStore.upsert`.
    public var importRecord: PhotoImport {
        PhotoImport(path: path, stamp: stamp, stableID: stableID, metadata: metadata)
    }
}
