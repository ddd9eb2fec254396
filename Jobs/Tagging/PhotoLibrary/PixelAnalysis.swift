/// Tags-to-be computed from a photo's pixels: aspect class, darkness, dominant colour and a perceptual hash.
///
/// The photo is decoded at reduced scale (long side ≤ `DecodeLimits.targetLongSide`, 256 px by default) into the
/// picture as displayed (`PhotoDecoder`), so a portrait photo stored sideways (JPEG orientation 6) is `portrait`.
public struct PixelAnalysis: Hashable, Sendable, Codable {
    /// Upright width in pixels at full size (the header's size with orientation applied).
    public var width: Int
    /// Upright height in pixels at full size.
    public var height: Int
    /// The shape class of the upright image.
    public var aspect: AspectClass
    /// Mean luma, 0…255, BT.601 weights: `Y = 0.299 R + 0.587 G + 0.114 B` (ITU-R BT.601-7 §2.5.1).
    public var meanLuma: Double
    /// `meanLuma < PixelAnalysis.nightLumaThreshold`.
    public var isNight: Bool
    /// The palette colour covering most pixels.
    public var dominantColor: ColorName
    /// The share of pixels, 0…1, in `dominantColor`'s bucket.
    public var dominantColorShare: Double
    /// The 64-bit difference hash (dHash) of the upright image.
    public var perceptualHash: PerceptualHash
    /// How much structure the hash reflects: `PerceptualHash.hashAndDetail(of:)`. Below
    /// `PerceptualHash.minimumDetail` (a flat picture, a plain gradient) the hash is no evidence of anything.
    public var hashDetail: Int
    /// Decoder warnings about corrupt data that did not stop decoding.
    public var decoderWarnings: Int

    /// What the analysis noticed, in words: corrupt data decoded anyway, a hash with too little detail.
    public var warnings: [String] {
        var warnings: [String] = []
        if decoderWarnings > 0 {
            warnings.append("corrupt data: the decoder warned \(decoderWarnings) time(s) and decoded the rest")
        }
        if !hashIsEvidence {
            warnings.append("too little detail to look for duplicates (a flat picture or a plain gradient)")
        }
        return warnings
    }

    /// Whether `perceptualHash` says enough about the picture to find its duplicates with (`hashDetail` at least
    /// `PerceptualHash.minimumDetail`).
    public var hashIsEvidence: Bool { hashDetail >= PerceptualHash.minimumDetail }

    /// Mean luma below which an image counts as `night`: 50 of 255 (about 20 % grey). A typical night street
    /// scene averages 20–45; indoor and overcast daylight photos average 80–140.
    public static let nightLumaThreshold = 50.0

    /// Decodes `jpeg` and analyses it.
    ///
    /// - Parameters:
    ///   - jpeg: the file's bytes.
    ///   - orientation: EXIF orientation 1…8 (from `PhotoMetadata.orientation`); other values mean 1.
    ///   - limits: decoder limits (pixel count, memory, scans, working size).
    /// - Throws: `PhotoLibraryError` from decoding (see `RGBImage.decodeJPEG`).
    public init(jpeg: [UInt8], orientation: Int = 1, limits: DecodeLimits = DecodeLimits()) throws(PhotoLibraryError) {
        self.init(
            displayed: try JPEGDecoder().displayedImage(
                jpeg, metadata: PhotoMetadata(orientation: orientation), limits: limits))
    }

    /// Analyses a decoded picture as displayed (any format, see `PhotoDecoder`).
    public init(displayed: DisplayedImage) {
        self.init(image: displayed.image, width: displayed.width, height: displayed.height)
        decoderWarnings = displayed.warnings
    }

    /// Analyses an already upright image; `width`/`height` give the full size for the aspect class
    /// (default: the image's own size).
    public init(image: RGBImage, width: Int? = nil, height: Int? = nil) {
        self.width = width ?? image.width
        self.height = height ?? image.height
        aspect = AspectClass(width: self.width, height: self.height)
        var lumaSum = 0
        var histogram = [Int](repeating: 0, count: 4096)
        let p = image.pixels
        var i = 0
        while i < p.count {
            let r = Int(p[i]), g = Int(p[i + 1]), b = Int(p[i + 2])
            lumaSum += 299 * r + 587 * g + 114 * b
            histogram[(r >> 4) << 8 | (g >> 4) << 4 | (b >> 4)] += 1
            i += 3
        }
        let count = image.width * image.height
        meanLuma = Double(lumaSum) / 1000 / Double(count)
        isNight = meanLuma < PixelAnalysis.nightLumaThreshold
        (dominantColor, dominantColorShare) = ColorName.dominant(histogram: histogram, pixelCount: count)
        (perceptualHash, hashDetail) = PerceptualHash.hashAndDetail(of: image)
        decoderWarnings = 0
    }
}

/// The shape of an upright image.
public enum AspectClass: String, Hashable, Sendable, Codable, CaseIterable {
    /// Taller than wide by more than 5 %.
    case portrait
    /// Wider than tall by more than 5 %, less than 2 : 1.
    case landscape
    /// Sides within ±5 % of each other: `max/min ≤ 1.05`.
    case square
    /// Long side at least twice the short side (either way round).
    case panorama

    /// The class of a `width × height` image (upright pixels).
    public init(width: Int, height: Int) {
        let long = Double(max(width, height)), short = Double(max(1, min(width, height)))
        if long / short >= 2.0 {
            self = .panorama
        } else if long / short <= 1.05 {
            self = .square
        } else {
            self = height > width ? .portrait : .landscape
        }
    }
}

/// A small palette of colour names for the dominant-colour tag.
///
/// Method: a coarse RGB histogram (4 bits per channel, 4 096 bins) of the working image; each bin's centre
/// colour is converted to HSV and named: value < 0.2 → `black`; saturation < 0.2 → `white` (value > 0.8) or
/// `gray`; otherwise by hue: red < 15° or ≥ 345°, orange 15–40° (`brown` when value < 0.6), yellow 40–70°,
/// green 70–170°, cyan 170–200°, blue 200–260°, purple 260–290°, pink 290–345°. The name whose bins hold the
/// most pixels wins (ties: the earlier case).
public enum ColorName: String, Hashable, Sendable, Codable, CaseIterable {
    case red, orange, brown, yellow, green, cyan, blue, purple, pink, white, gray, black

    /// The name for one colour, components 0…255.
    public init(red r: Int, green g: Int, blue b: Int) {
        let maxC = max(r, g, b), minC = min(r, g, b)
        let value = Double(maxC) / 255
        let saturation = maxC == 0 ? 0 : Double(maxC - minC) / Double(maxC)
        if value < 0.2 {
            self = .black
            return
        }
        if saturation < 0.2 {
            self = value > 0.8 ? .white : .gray
            return
        }
        let delta = Double(maxC - minC)
        var hue: Double
        if maxC == r {
            hue = 60 * (Double(g - b) / delta)
        } else if maxC == g {
            hue = 60 * (Double(b - r) / delta + 2)
        } else {
            hue = 60 * (Double(r - g) / delta + 4)
        }
        if hue < 0 { hue += 360 }
        switch hue {
        case ..<15, 345...: self = .red
        case ..<40: self = value < 0.6 ? .brown : .orange
        case ..<70: self = .yellow
        case ..<170: self = .green
        case ..<200: self = .cyan
        case ..<260: self = .blue
        case ..<290: self = .purple
        default: self = .pink
        }
    }

    static func dominant(histogram: [Int], pixelCount: Int) -> (ColorName, Double) {
        var totals = [ColorName: Int]()
        for (bin, count) in histogram.enumerated() where count > 0 {
            let r = (bin >> 8) << 4 | 8, g = ((bin >> 4) & 15) << 4 | 8, b = (bin & 15) << 4 | 8
            totals[ColorName(red: r, green: g, blue: b), default: 0] += count
        }
        var best = ColorName.black
        var bestCount = -1
        for name in ColorName.allCases where (totals[name] ?? 0) > bestCount {
            best = name
            bestCount = totals[name] ?? 0
        }
        return (best, pixelCount > 0 ? Double(bestCount) / Double(pixelCount) : 0)
    }
}

/// A 64-bit perceptual hash: dHash (the "difference hash", N. Krawetz, "Kind of Like That", 2013).
///
/// Method: luma (BT.601) of the upright image, area-averaged down to 9 × 8; bit `8·row + col` (counting from the
/// most significant bit) is 1 when pixel `col` is darker than pixel `col + 1` in that row. Survives rescaling,
/// recompression and small brightness changes; not rotation. Compare with `distance(to:)`: 0–`nearDuplicateDistance`
/// means near duplicates, unrelated photos are typically 20–44 apart — but only for hashes with enough detail
/// (`hashAndDetail(of:)`): every flat picture hashes to 0.
public struct PerceptualHash: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The 64 bits.
    public let value: UInt64

    /// Hamming distance at or below which two photos count as near duplicates: 10 of 64 bits.
    public static let nearDuplicateDistance = 10

    public init(value: UInt64) { self.value = value }

    /// The dHash of `image`.
    public init(image: RGBImage) {
        self = PerceptualHash.hashAndDetail(of: image).hash
    }

    /// The smallest luma step between neighbouring cells of the 9 × 8 grid that counts as structure: 2 % of the
    /// range (5.1 of 255). Steps below it are JPEG noise, dithering or a faint vignette, and their bits flip
    /// between copies of one picture as easily as between two different flat pictures.
    public static let significantStep = 2 * 255 * 1000 / 100

    /// `detail` at or above which a hash is evidence for duplicates: 4 steps up and 4 down. A flat picture has
    /// 0 (every bit 0, whatever its colour or size), a plain gradient 0 (every step one way), so two of them
    /// would otherwise be "duplicates" at distance 0; a photo typically has 15–30.
    public static let minimumDetail = 4

    /// The dHash of `image` and its detail: of the 64 comparisons, those whose luma step is at least
    /// `significantStep`, counted apart by direction (brighter to the right, darker to the right); `detail` is
    /// the smaller count. Few significant steps, or all in one direction, is a picture with no structure to
    /// recognise it by.
    public static func hashAndDetail(of image: RGBImage) -> (hash: PerceptualHash, detail: Int) {
        let small = image.resized(width: 9, height: 8)
        var luma = [Int](repeating: 0, count: 72)
        for i in 0..<72 {
            let r = Int(small.pixels[3 * i]), g = Int(small.pixels[3 * i + 1]), b = Int(small.pixels[3 * i + 2])
            luma[i] = 299 * r + 587 * g + 114 * b
        }
        var bits: UInt64 = 0
        var rising = 0, falling = 0
        for row in 0..<8 {
            for col in 0..<8 {
                bits <<= 1
                let left = luma[row * 9 + col], right = luma[row * 9 + col + 1]
                if left < right { bits |= 1 }
                if right - left >= significantStep { rising += 1 }
                if left - right >= significantStep { falling += 1 }
            }
        }
        return (PerceptualHash(value: bits), min(rising, falling))
    }

    /// The number of differing bits, 0…64.
    public func distance(to other: PerceptualHash) -> Int { (value ^ other.value).nonzeroBitCount }

    /// Encodes as its 16 hex digits (`description`): a JSON number is a double, which keeps only 53 of the 64
    /// bits (a worker's answer lost the low bits of most hashes, and all ones did not decode at all).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    /// Decodes 16 hex digits.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard text.utf8.count == 16, let value = UInt64(text, radix: 16) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not 16 hex digits: \(text)")
        }
        self.value = value
    }

    /// 16 lowercase hex digits.
    public var description: String {
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
