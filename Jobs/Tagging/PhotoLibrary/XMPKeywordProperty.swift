import CExempi

/// One XMP property photo apps read keywords from, and how a keyword is written in it.
///
/// darktable reads `lr:hierarchicalSubject` whenever it is present and `dc:subject` only otherwise; digiKam reads
/// `digiKam:TagsList` first, then `MicrosoftPhoto:LastKeywordXMP`, `lr:hierarchicalSubject`, and `dc:subject`
/// last; Lightroom reads `lr:hierarchicalSubject` and `dc:subject`. A keyword is written in all four, so every app
/// shows the same keywords whichever it prefers: a namespaced keyword (`year:2024`) as the hierarchy its app
/// writes (`year|2024` in Lightroom's, `year/2024` in digiKam's and Microsoft's), a bare one (`family`) as it is.
public struct XMPKeywordProperty: Hashable, Sendable {
    /// The namespace URI.
    public var namespace: String
    /// The prefix it is registered with (`dc`, `lr`, `digiKam`, `MicrosoftPhoto`).
    public var prefix: String
    /// The property's name in its namespace.
    public var name: String
    /// The hierarchy separator, `nil` for the flat `dc:subject`.
    public var separator: Character?
    /// Whether the array is an ordered `rdf:Seq` (digiKam's TagsList) rather than an `rdf:Bag`.
    public var isOrdered: Bool

    /// `dc:subject`: every keyword as written (`year:2024`).
    public static let subject = XMPKeywordProperty(
        namespace: "http://purl.org/dc/elements/1.1/", prefix: "dc", name: "subject", separator: nil, isOrdered: false)
    /// `lr:hierarchicalSubject` (Lightroom; darktable reads it first): `year|2024`, `family`.
    public static let hierarchicalSubject = XMPKeywordProperty(
        namespace: "http://ns.adobe.com/lightroom/1.0/", prefix: "lr", name: "hierarchicalSubject", separator: "|",
        isOrdered: false)
    /// `digiKam:TagsList` (digiKam reads it first): `year/2024`, `family`.
    public static let digiKamTags = XMPKeywordProperty(
        namespace: "http://www.digikam.org/ns/1.0/", prefix: "digiKam", name: "TagsList", separator: "/",
        isOrdered: true)
    /// `MicrosoftPhoto:LastKeywordXMP` (Windows Photo Gallery; digiKam reads it): `year/2024`, `family`.
    public static let microsoftKeywords = XMPKeywordProperty(
        namespace: "http://ns.microsoft.com/photo/1.0/", prefix: "MicrosoftPhoto", name: "LastKeywordXMP",
        separator: "/", isOrdered: false)

    /// Every property a keyword is written to, `dc:subject` first.
    public static let all: [XMPKeywordProperty] = [subject, hierarchicalSubject, digiKamTags, microsoftKeywords]
    /// The hierarchical ones.
    static let hierarchical: [XMPKeywordProperty] = [hierarchicalSubject, digiKamTags, microsoftKeywords]

    /// `keyword` as this property holds it: `year:2024` → `year|2024` or `year/2024` (the first `:` becomes the
    /// separator; a keyword with `:` at either end, or none, stays as it is); itself in `dc:subject`.
    public func form(of keyword: String) -> String {
        guard let separator, let colon = keyword.firstIndex(of: ":"), colon != keyword.startIndex,
            keyword.index(after: colon) != keyword.endIndex
        else { return keyword }
        return keyword[..<colon] + String(separator) + keyword[keyword.index(after: colon)...]
    }

    /// Whether `items` of this property already show the `dc:subject` item `keyword`: its own form is there, or it
    /// is one level of a hierarchy there (Lightroom writes `year|2024` and the levels `year`, `2024` in
    /// `dc:subject`, which are not keywords of their own).
    func shows(_ keyword: String, in items: [String]) -> Bool {
        guard let separator else { return items.contains(keyword) }
        let own = form(of: keyword)
        return items.contains { $0 == own || $0.split(separator: separator).contains(Substring(keyword)) }
    }

    /// The array's options for `xmp_append_array_item`.
    var arrayOptions: UInt32 {
        let bag = XMP_PROP_VALUE_IS_ARRAY.rawValue
        return UInt32(isOrdered ? bag | XMP_PROP_ARRAY_IS_ORDERED.rawValue : bag)
    }
}
