import Testing

@testable import TrailbookCLI
@testable import TrailbookClient

/// The message of the `UsageError` that `body` throws, `nil` if it throws none, or a note if it throws another error.
private func usageMessage<T>(_ body: () throws -> T) -> String? {
    do {
        _ = try body()
        return nil
    } catch let error as UsageError {
        return error.message
    } catch {
        return "not a UsageError: \(error)"
    }
}

struct UnitsTests {
    @Test(
        arguments: [
            ("0", 0),
            ("1048576", 1_048_576),
            ("512KiB", 524_288),
            ("8MiB", 8_388_608),
            ("1GiB", 1_073_741_824),
            ("2TiB", 2_199_023_255_552),
            ("20MiB", 20_971_520),
            ("8mib", 8_388_608),
            ("8 MiB", 8_388_608),
            ("  64K ", 65_536),
            ("1M", 1_048_576),
            ("1G", 1_073_741_824),
            ("100B", 100),
            ("1KB", 1_000),
            ("20MB", 20_000_000),
            ("3GB", 3_000_000_000),
            ("1.5KiB", 1_536),
            ("0.5MiB", 524_288),
            ("0.1KiB", 102),  // 102.4 rounded down
            ("1.", 1),
        ] as [(String, Int64)])
    func parsesSizes(text: String, bytes: Int64) throws {
        #expect(try ByteCount.parse(text) == bytes)
    }

    @Test func acceptsTheLargestSize() throws {
        #expect(try ByteCount.parse("9223372036854775807") == Int64.max)
        #expect(try ByteCount.parse("8388607TiB") == 8_388_607 * (1 << 40))
    }

    @Test func rejectsOverflow() {
        #expect(usageMessage { try ByteCount.parse("9223372036854775808") }?.contains("too large") == true)
        #expect(usageMessage { try ByteCount.parse("8388608TiB") }?.contains("too large") == true)
        #expect(usageMessage { try ByteCount.parse("99999999999999999999999GiB") }?.contains("too large") == true)
        #expect(usageMessage { try ByteCount.parse("9223372036854775807.5KiB") }?.contains("too large") == true)
    }

    @Test func rejectsNegativeSizes() {
        #expect(usageMessage { try ByteCount.parse("-1") } == "size must not be negative, got '-1'")
        #expect(usageMessage { try ByteCount.parse("-8MiB") } == "size must not be negative, got '-8MiB'")
    }

    @Test(arguments: ["", "  ", "MiB", "8XB", "eight", "8 MiB extra", "1.2.3KiB", "0x10", "1e6", ".", "+5", "8_000"])
    func rejectsGarbageSizes(text: String) {
        let message = usageMessage { try ByteCount.parse(text) }
        #expect(message != nil)
        #expect(message?.contains("KiB, MiB, GiB") == true)
    }

    @Test func rejectsFractionsOfBytesAndTooManyDecimals() {
        #expect(usageMessage { try ByteCount.parse("1.5") } == "'1.5' is not a whole number of bytes")
        #expect(usageMessage { try ByteCount.parse("1.5B") } == "'1.5B' is not a whole number of bytes")
        #expect(usageMessage { try ByteCount.parse("1.0000001MiB") } == "'1.0000001MiB' has more than 6 decimal places")
    }

    @Test(
        arguments: [
            (0, "0 B"),
            (512, "512 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (1536, "1.5 KiB"),
            (8_388_608, "8.0 MiB"),
            (1_073_741_824, "1.0 GiB"),
            (1_048_575, "1.0 MiB"),  // 1023.999 KiB would print as 1024.0 KiB
            (-1536, "-1.5 KiB"),
            (Int64.max, "8.0 EiB"),
            (Int64.min, "-8.0 EiB"),
        ] as [(Int64, String)])
    func formatsSizes(bytes: Int64, text: String) {
        #expect(ByteCount.format(bytes) == text)
    }

    @Test func formatThenParseRoundTripsWholeUnits() throws {
        for text in ["1.0 KiB", "8.0 MiB", "1.5 GiB"] {
            #expect(ByteCount.format(try ByteCount.parse(text)) == text)
        }
    }

    @Test(
        arguments: [
            ("500ms", 0.5),
            ("30s", 30),
            ("5m", 300),
            ("1h", 3600),
            ("1.5s", 1.5),
            ("45", 45),
            ("0.25", 0.25),
            ("0s", 0),
            ("1h30m", 5400),
            ("2m30s", 150),
            ("1s500ms", 1.5),
            (" 10S ", 10),
            (".5s", 0.5),
            ("7d", 604_800),
            ("1d12h", 129_600),
        ] as [(String, Double)])
    func parsesDurations(text: String, seconds: Double) throws {
        #expect(try parseDuration(text) == seconds)
    }

    @Test func rejectsNegativeDurations() {
        #expect(usageMessage { try parseDuration("-5s") } == "duration must not be negative, got '-5s'")
        #expect(usageMessage { try parseDuration("-1") } == "duration must not be negative, got '-1'")
    }

    @Test func rejectsUnknownDurationUnits() {
        #expect(
            usageMessage { try parseDuration("5x") }
                == "'5x' is not a duration; unknown unit 'x'; use a number with a unit: ms, s, m, h, d (e.g. 500ms, 30s, 5m, 1h, 7d)"
        )
        #expect(usageMessage { try parseDuration("3days") }?.contains("unknown unit 'days'") == true)
    }

    @Test(arguments: ["", "s", "ms", "abc", "1.2.3s", "1h30", "5 s", "1e3", "inf", "nan", "5s!", "+5s", "."])
    func rejectsGarbageDurations(text: String) {
        let message = usageMessage { try parseDuration(text) }
        #expect(message != nil)
        #expect(message?.contains("500ms, 30s, 5m, 1h") == true)
    }

    @Test func rejectsInfiniteDurations() {
        let huge = String(repeating: "9", count: 400) + "h"
        #expect(usageMessage { try parseDuration(huge) } == "duration '\(huge)' is too large")
    }
}

struct PhotoTextTests {
    @Test func tagsWithCommasAreQuoted() {
        #expect(PhotoCommands.tagList(["trip", "camera:OLYMPUS u1020,S1020", "say \"hi\""])
            == #"trip, "camera:OLYMPUS u1020,S1020", "say ""hi""""#)
        #expect(PhotoCommands.tagList([]) == "")
    }

    @Test func cameraNamesTheMakeOnce() {
        #expect(PhotoCommands.camera(make: "Canon", model: "Canon EOS 40D") == "Canon EOS 40D")
        #expect(PhotoCommands.camera(make: "NIKON CORPORATION", model: "NIKON D70") == "NIKON D70")
        #expect(PhotoCommands.camera(make: "Apple", model: "iPhone 15") == "Apple iPhone 15")
        #expect(PhotoCommands.camera(make: nil, model: nil) == "-")
        #expect(PhotoCommands.camera(make: "Sony", model: nil) == "Sony")
    }
}
