/// A position in decimal degrees on WGS 84: latitude north positive, longitude east positive.
public struct GPSCoordinate: Hashable, Sendable, Codable {
    /// Degrees, −90…90 (north positive).
    public let latitude: Double
    /// Degrees, −180…180 (east positive).
    public let longitude: Double

    /// A coordinate, or `nil` when either value is NaN, infinite or out of range.
    public init?(latitude: Double, longitude: Double) {
        guard latitude.isFinite, longitude.isFinite, abs(latitude) <= 90, abs(longitude) <= 180 else { return nil }
        self.latitude = latitude
        self.longitude = longitude
    }

    /// Mean Earth radius in kilometres (IUGG R1 = 6 371.0088 km), used by `distance(to:)`.
    public static let earthRadiusKilometres = 6_371.0088

    /// Great-circle distance in kilometres by the haversine formula:
    /// `d = 2R · asin(√(sin²(Δφ/2) + cos φ1 · cos φ2 · sin²(Δλ/2)))`, φ latitude and λ longitude in radians.
    ///
    /// Treats the Earth as a sphere; the error against the WGS 84 ellipsoid is under 0.5 %.
    public func distance(to other: GPSCoordinate) -> Double {
        let radians = Double.pi / 180
        let phi1 = latitude * radians
        let phi2 = other.latitude * radians
        let dPhi = (other.latitude - latitude) * radians
        let dLambda = (other.longitude - longitude) * radians
        let a = sin(dPhi / 2) * sin(dPhi / 2) + cos(phi1) * cos(phi2) * sin(dLambda / 2) * sin(dLambda / 2)
        return 2 * GPSCoordinate.earthRadiusKilometres * asin(min(1, a.squareRoot()))
    }
}

#if canImport(Glibc)
import Glibc
#endif
