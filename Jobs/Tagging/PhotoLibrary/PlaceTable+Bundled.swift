extension PlaceTable {
    /// The bundled places: well-known travel cities, coordinates of their centres in decimal degrees
    /// (WGS 84, to about 0.01°, from public gazetteer values).
    public static let bundledPlaces: [Place] = bundledRows.map { row in
        Place(name: row.0, coordinate: GPSCoordinate(latitude: row.1, longitude: row.2)!)
    }

    private static let bundledRows: [(String, Double, Double)] = [
        // Europe
        ("Lisbon", 38.7223, -9.1393), ("Porto", 41.1579, -8.6291), ("Madrid", 40.4168, -3.7038),
        ("Barcelona", 41.3874, 2.1686), ("Seville", 37.3891, -5.9845), ("Granada", 37.1773, -3.5986),
        ("Valencia", 39.4699, -0.3763), ("Palma", 39.5696, 2.6502), ("Paris", 48.8566, 2.3522),
        ("Nice", 43.7102, 7.2620), ("Lyon", 45.7640, 4.8357), ("Marseille", 43.2965, 5.3698),
        ("Bordeaux", 44.8378, -0.5792), ("London", 51.5074, -0.1278), ("Edinburgh", 55.9533, -3.1883),
        ("Dublin", 53.3498, -6.2603), ("Amsterdam", 52.3676, 4.9041), ("Brussels", 50.8503, 4.3517),
        ("Bruges", 51.2093, 3.2247), ("Berlin", 52.5200, 13.4050), ("Munich", 48.1351, 11.5820),
        ("Hamburg", 53.5511, 9.9937), ("Vienna", 48.2082, 16.3738), ("Salzburg", 47.8095, 13.0550),
        ("Zurich", 47.3769, 8.5417), ("Geneva", 46.2044, 6.1432), ("Rome", 41.9028, 12.4964),
        ("Florence", 43.7696, 11.2558), ("Arezzo", 43.4633, 11.8797), ("Siena", 43.3188, 11.3308),
        ("Venice", 45.4408, 12.3155), ("Milan", 45.4642, 9.1900), ("Naples", 40.8518, 14.2681),
        ("Palermo", 38.1157, 13.3615), ("Bologna", 44.4949, 11.3426), ("Athens", 37.9838, 23.7275),
        ("Santorini", 36.3932, 25.4615), ("Istanbul", 41.0082, 28.9784), ("Prague", 50.0755, 14.4378),
        ("Budapest", 47.4979, 19.0402), ("Krakow", 50.0647, 19.9450), ("Warsaw", 52.2297, 21.0122),
        ("Copenhagen", 55.6761, 12.5683), ("Stockholm", 59.3293, 18.0686), ("Oslo", 59.9139, 10.7522),
        ("Helsinki", 60.1699, 24.9384), ("Reykjavik", 64.1466, -21.9426), ("Dubrovnik", 42.6507, 18.0944),
        ("Split", 43.5081, 16.4402), ("Tallinn", 59.4370, 24.7536),
        // Africa and the Middle East
        ("Marrakesh", 31.6295, -7.9811), ("Cairo", 30.0444, 31.2357), ("Cape Town", -33.9249, 18.4241),
        ("Nairobi", -1.2921, 36.8219), ("Zanzibar", -6.1659, 39.2026), ("Dubai", 25.2048, 55.2708),
        ("Jerusalem", 31.7683, 35.2137), ("Petra", 30.3285, 35.4444),
        // Asia and Oceania
        ("Tokyo", 35.6762, 139.6503), ("Kyoto", 35.0116, 135.7681), ("Osaka", 34.6937, 135.5023),
        ("Seoul", 37.5665, 126.9780), ("Beijing", 39.9042, 116.4074), ("Shanghai", 31.2304, 121.4737),
        ("Hong Kong", 22.3193, 114.1694), ("Taipei", 25.0330, 121.5654), ("Bangkok", 13.7563, 100.5018),
        ("Chiang Mai", 18.7883, 98.9853), ("Hanoi", 21.0278, 105.8342), ("Ho Chi Minh City", 10.8231, 106.6297),
        ("Siem Reap", 13.3671, 103.8448), ("Singapore", 1.3521, 103.8198), ("Kuala Lumpur", 3.1390, 101.6869),
        ("Bali", -8.4095, 115.1889), ("Manila", 14.5995, 120.9842), ("Delhi", 28.6139, 77.2090),
        ("Agra", 27.1767, 78.0081), ("Jaipur", 26.9124, 75.7873), ("Mumbai", 19.0760, 72.8777),
        ("Kathmandu", 27.7172, 85.3240), ("Colombo", 6.9271, 79.8612), ("Sydney", -33.8688, 151.2093),
        ("Melbourne", -37.8136, 144.9631), ("Auckland", -36.8485, 174.7633), ("Queenstown", -45.0312, 168.6626),
        // The Americas
        ("New York", 40.7128, -74.0060), ("Boston", 42.3601, -71.0589), ("Washington", 38.9072, -77.0369),
        ("Chicago", 41.8781, -87.6298), ("New Orleans", 29.9511, -90.0715), ("Miami", 25.7617, -80.1918),
        ("Los Angeles", 34.0522, -118.2437), ("San Francisco", 37.7749, -122.4194),
        ("Las Vegas", 36.1699, -115.1398), ("Seattle", 47.6062, -122.3321), ("Honolulu", 21.3069, -157.8583),
        ("Vancouver", 49.2827, -123.1207), ("Toronto", 43.6532, -79.3832), ("Montreal", 45.5017, -73.5673),
        ("Quebec City", 46.8139, -71.2080), ("Mexico City", 19.4326, -99.1332), ("Cancun", 21.1619, -86.8515),
        ("Havana", 23.1136, -82.3666), ("Cartagena", 10.3910, -75.4794), ("Cusco", -13.5320, -71.9675),
        ("Lima", -12.0464, -77.0428), ("Rio de Janeiro", -22.9068, -43.1729), ("Buenos Aires", -34.6037, -58.3816),
        ("Santiago", -33.4489, -70.6693),
    ]
}
