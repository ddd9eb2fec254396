import TrailbookLoop
import TrailbookPaths

#if canImport(Glibc)
import Glibc
#endif

/// A named place with a position, one row of a `PlaceTable`.
public struct Place: Hashable, Sendable, Codable {
    /// The name used in the `place:` tag, e.g. `Lisbon`.
    public let name: String
    /// Where it is (the city centre for cities).
    public let coordinate: GPSCoordinate

    public init(name: String, coordinate: GPSCoordinate) {
        self.name = name
        self.coordinate = coordinate
    }
}

/// An offline table of places for turning a photo's GPS position into a place name, with no network.
///
/// Lookup is nearest-neighbour by great-circle distance (`GPSCoordinate.distance(to:)`, haversine) within
/// `maxDistanceKilometres`; beyond it a photo gets no place. Rows are kept sorted by latitude, so a lookup only
/// measures the places in the latitude band that can be within range (1° of latitude ≈ 111.2 km).
public struct PlaceTable: Sendable {
    /// The places, sorted by latitude.
    public let places: [Place]
    /// How far a photo may be from a place and still get its name, in kilometres. Default 50.
    public var maxDistanceKilometres: Double

    /// A table of `places`.
    public init(places: [Place], maxDistanceKilometres: Double = 50) {
        self.places = places.sorted { $0.coordinate.latitude < $1.coordinate.latitude }
        self.maxDistanceKilometres = maxDistanceKilometres
    }

    /// The nearest place to `coordinate` within `maxDistanceKilometres`, with its distance in kilometres;
    /// `nil` when none is that close. Ties go to the earlier row by latitude.
    public func nearest(to coordinate: GPSCoordinate) -> (place: Place, kilometres: Double)? {
        guard !places.isEmpty else { return nil }
        // Latitude band: points farther apart in latitude than this are farther apart than the limit.
        let band = maxDistanceKilometres / (GPSCoordinate.earthRadiusKilometres * Double.pi / 180) + 1e-9
        var low = 0, high = places.count
        while low < high {
            let mid = (low + high) / 2
            if places[mid].coordinate.latitude < coordinate.latitude - band { low = mid + 1 } else { high = mid }
        }
        var best: (place: Place, kilometres: Double)?
        var i = low
        while i < places.count, places[i].coordinate.latitude <= coordinate.latitude + band {
            let d = coordinate.distance(to: places[i].coordinate)
            if d <= maxDistanceKilometres, d < (best?.kilometres ?? .infinity) { best = (places[i], d) }
            i += 1
        }
        return best
    }

    /// The bundled table: about 100 well-known travel cities (`PlaceTable.bundledPlaces`), 50 km radius.
    public static var bundled: PlaceTable { PlaceTable(places: bundledPlaces) }

    /// Parses a places CSV: one `name,lat,lon` per line, decimal degrees (north and east positive).
    ///
    /// A name may be double-quoted (`"Washington, D.C.",38.9072,-77.0369`, `""` for a quote inside). Blank lines
    /// and lines starting with `#` are skipped, and so is the first other line if its latitude is not a number (a
    /// header). A byte order mark before the first line (spreadsheets write one) is not part of the first name.
    /// - Throws: `PhotoLibraryError.badPlaceFile` naming the first bad line (wrong field count, empty name, a
    ///   name that cannot be a tag (`TagName.validated`: control characters, too long), a coordinate that is not
    ///   a number or out of range), or when the text holds no place at all.
    public static func parseCSV(_ text: String, maxDistanceKilometres: Double = 50) throws(PhotoLibraryError)
        -> PlaceTable
    {
        var places: [Place] = []
        var lineNumber = 0
        var sawLine = false
        // U+FEFF first: a BOM, which would make the first place `\u{FEFF}Home`, a tag no search matches.
        let text = text.hasPrefix("\u{FEFF}") ? Substring(text.dropFirst()) : Substring(text)
        // "\r\n" is one Character in Swift, so both line ends are named.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNumber += 1
            var line = Substring(rawLine)
            if line.hasSuffix("\r") { line = line.dropLast() }
            guard let content = trimmed(String(line)), !content.hasPrefix("#") else { continue }
            guard let fields = splitCSV(content), fields.count == 3 else {
                throw PhotoLibraryError(.badPlaceFile, "line \(lineNumber): expected name,lat,lon")
            }
            let lat = Double(trimmed(fields[1]) ?? ""), lon = Double(trimmed(fields[2]) ?? "")
            defer { sawLine = true }
            if lat == nil && !sawLine { continue }  // a header, as the first line that is not blank or a comment
            guard let name = trimmed(fields[0]) else {
                throw PhotoLibraryError(.badPlaceFile, "line \(lineNumber): empty name")
            }
            // Checked here, at submit, rather than as the job's failure on the first photo with a position.
            do {
                _ = try TagName.validated(AutoTags.placePrefix + name)
            } catch {
                throw PhotoLibraryError(.badPlaceFile, "line \(lineNumber): the name cannot be a tag: \(error.message)")
            }
            guard let lat, let lon, let coordinate = GPSCoordinate(latitude: lat, longitude: lon) else {
                throw PhotoLibraryError(.badPlaceFile, "line \(lineNumber): coordinates not numbers in range")
            }
            places.append(Place(name: name, coordinate: coordinate))
        }
        // An empty table would quietly take every place: tag off the photos it is used for.
        guard !places.isEmpty else {
            throw PhotoLibraryError(
                .badPlaceFile,
                "no places: give one name,lat,lon line per place (a first line whose lat is not a number is a header)")
        }
        return PlaceTable(places: places, maxDistanceKilometres: maxDistanceKilometres)
    }

    /// Reads and parses a places CSV file (see `parseCSV`).
    ///
    /// - Throws: `PhotoLibraryError.io` if the file cannot be read, `.badPlaceFile` if it is not UTF-8 or does not
    ///   parse.
    public static func load(csvAt path: BytePath, maxDistanceKilometres: Double = 50) throws(PhotoLibraryError)
        -> PlaceTable
    {
        let bytes = try PhotoFile.read(path: path, maxBytes: 64 << 20).bytes
        // Decoded with repairs, a Latin-1 `São Paulo` would tag photos `place:S\u{FFFD}o Paulo`.
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw PhotoLibraryError(.badPlaceFile, "\(path) is not UTF-8 text; save it as UTF-8")
        }
        return try parseCSV(text, maxDistanceKilometres: maxDistanceKilometres)
    }

    /// Splits one CSV line into fields (RFC 4180 quoting); `nil` on an unterminated quote.
    static func splitCSV(_ line: String) -> [String]? {
        var fields: [String] = []
        var field = ""
        var quoted = false
        var chars = Array(line)[...]
        while let c = chars.popFirst() {
            if quoted {
                if c == "\"" {
                    if chars.first == "\"" {
                        field.append("\"")
                        chars = chars.dropFirst()
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(c)
                }
            } else if c == "\"" {
                quoted = true
            } else if c == "," {
                fields.append(field)
                field = ""
            } else {
                field.append(c)
            }
        }
        guard !quoted else { return nil }
        fields.append(field)
        return fields
    }
}
