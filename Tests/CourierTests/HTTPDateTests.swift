import Foundation
import Testing

@testable import Courier

/// HTTP dates from origins are hostile: every one parses to a date within
/// the years 1583 through 9999 or to nil, and formatting any `Date` works.
@Suite(.timeLimit(.minutes(1)))
struct HTTPDateTests {
    struct ParseCase: CustomTestStringConvertible, Sendable {
        var text: String
        /// Seconds since 1970, or nil for "not a date".
        var seconds: Int64?
        var testDescription: String { text.debugDescription }
    }

    static let parseCases: [ParseCase] = [
        // The three forms RFC 9110 §5.6.7 names.
        ParseCase(text: "Sun, 06 Nov 1994 08:49:37 GMT", seconds: 784_111_777),
        ParseCase(text: "Sunday, 06-Nov-94 08:49:37 GMT", seconds: 784_111_777),
        ParseCase(text: "Sun Nov  6 08:49:37 1994", seconds: 784_111_777),
        ParseCase(text: "Thu, 01 Jan 1970 00:00:00 GMT", seconds: 0),
        ParseCase(text: "Sun, 06 Nov 2039 08:49:37 GMT", seconds: 2_204_182_177),
        ParseCase(text: "Fri, 31 Dec 9999 23:59:59 GMT", seconds: 253_402_300_799),
        ParseCase(text: "Mon, 01 Jan 1583 00:00:00 GMT", seconds: -12_212_553_600),
        ParseCase(text: "Sun, 06 Nov 1994 08:49:37 +0000", seconds: 784_111_777),
        // Years no arithmetic should meet.
        ParseCase(text: "Sun, 06 Nov 999999999999 08:49:37 GMT", seconds: nil),
        ParseCase(text: "Sun Nov  6 08:49:37 999999999999", seconds: nil),
        ParseCase(text: "Sunday, 06-Nov-999999999999 08:49:37 GMT", seconds: nil),
        ParseCase(text: "Sun, 06 Nov 9223372036854775808 08:49:37 GMT", seconds: nil),
        ParseCase(text: "Sun, 06 Nov 99999999999999999999999 08:49:37 GMT", seconds: nil),
        ParseCase(text: "Sun, 06 Nov 2147483647 08:49:37 GMT", seconds: nil),
        ParseCase(text: "Sat, 01 Jan 10000 00:00:00 GMT", seconds: nil),
        ParseCase(text: "Sun, 06 Nov 1582 08:49:37 GMT", seconds: nil),
        ParseCase(text: "Sun, 06 Nov -1994 08:49:37 GMT", seconds: nil),
        ParseCase(text: "Sun, 06 Nov -5 08:49:37 GMT", seconds: nil),
        ParseCase(text: "Sun, 06 Nov -999999999999 08:49:37 GMT", seconds: nil),
        // Not dates.
        ParseCase(text: "", seconds: nil),
        ParseCase(text: "0", seconds: nil),
        ParseCase(text: "-1", seconds: nil),
        ParseCase(text: "garbage", seconds: nil),
        ParseCase(text: "Sun, 06 Nov 1994 25:49:37 GMT", seconds: nil),
        ParseCase(text: "Sun, 32 Nov 1994 08:49:37 GMT", seconds: nil),
        ParseCase(text: "Sun, 06 Nov 1994 08:49:37 PST", seconds: nil),
        ParseCase(text: "Sun, 06 Nov 1994 08:49:37 +0100", seconds: nil),
        ParseCase(text: "Sun, 06 Nov 1994 08:49:37 GMT garbage", seconds: nil),
        ParseCase(text: "Sun, 06 Nov 1994 08:49:37 GMT\u{0}2", seconds: nil),
        ParseCase(text: "Sun, 06 Nov 1994 99999999999999999999:49:37 GMT", seconds: nil),
        ParseCase(text: String(repeating: "9", count: 10_000), seconds: nil),
    ]

    @Test(arguments: parseCases)
    func parse(_ c: ParseCase) {
        #expect(HTTPDate.parse(c.text) == c.seconds.map { Date(timeIntervalSince1970: TimeInterval($0)) })
    }

    struct FormatCase: CustomTestStringConvertible, Sendable {
        var seconds: TimeInterval
        var text: String
        var testDescription: String { "\(seconds)" }
    }

    static let formatCases: [FormatCase] = [
        FormatCase(seconds: 784_111_777, text: "Sun, 06 Nov 1994 08:49:37 GMT"),
        FormatCase(seconds: 784_111_777.9, text: "Sun, 06 Nov 1994 08:49:37 GMT"),
        FormatCase(seconds: -1, text: "Wed, 31 Dec 1969 23:59:59 GMT"),
        FormatCase(seconds: 253_402_300_799, text: "Fri, 31 Dec 9999 23:59:59 GMT"),
        FormatCase(seconds: 1e300, text: "Fri, 31 Dec 9999 23:59:59 GMT"),
        FormatCase(seconds: .infinity, text: "Fri, 31 Dec 9999 23:59:59 GMT"),
        FormatCase(seconds: .greatestFiniteMagnitude, text: "Fri, 31 Dec 9999 23:59:59 GMT"),
        FormatCase(seconds: -62_135_596_800, text: "Mon, 01 Jan 0001 00:00:00 GMT"),
        FormatCase(seconds: -1e300, text: "Mon, 01 Jan 0001 00:00:00 GMT"),
        FormatCase(seconds: -.infinity, text: "Mon, 01 Jan 0001 00:00:00 GMT"),
        FormatCase(seconds: .nan, text: "Thu, 01 Jan 1970 00:00:00 GMT"),
    ]

    @Test(arguments: formatCases)
    func format(_ c: FormatCase) {
        #expect(HTTPDate.format(Date(timeIntervalSince1970: c.seconds)) == c.text)
    }

    @Test func formattedDatesParseBack() {
        // Given dates across the range courier accepts, 1583 through 9999
        for seconds in stride(from: -12_212_553_600, through: 253_402_300_799, by: 7_777_777_777) {
            // When one is formatted and parsed again
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            // Then it is the same instant
            #expect(HTTPDate.parse(HTTPDate.format(date)) == date)
        }
    }

    @Test func fixdatesReadWithoutLibcurlAsLibcurlReadsThem() {
        // Given IMF-fixdates at random instants from 1583 through 9999
        var random = SplitMix(seed: 0x6874_7470)
        var texts = (0..<2000).map { _ in
            HTTPDate.format(Date(timeIntervalSince1970: TimeInterval(Int64.random(in: HTTPDate.earliest...HTTPDate.latest, using: &random))))
        }
        // and the last days of every month of a common, a leap and a century year
        for year in [1900, 2000, 2023, 2024] {
            for month in ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"] {
                for day in 27...31 { texts.append("Mon, \(day) \(month) \(year) 23:59:59 GMT") }
            }
        }
        // When each is read by the fast path and by libcurl, then both agree
        for text in texts {
            #expect(HTTPDate.parse(text) == HTTPDate.parsedByLibcurl(text), "\(text)")
        }
        // and the canonical ones took the fast path
        #expect(texts.prefix(2000).allSatisfy { HTTPDate.fixdateSeconds($0) != nil })
    }

    @Test(arguments: [
        "sun, 06 nov 1994 08:49:37 GMT", "SUN, 06 NOV 1994 08:49:37 GMT", "Sun, 31 Nov 1994 08:49:37 GMT",
        "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:60 GMT", "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1582 08:49:37 GMT",
        "Sun, 06 Xyz 1994 08:49:37 GMT", "Abc, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun,  6 Nov 1994 08:49:37 GMT", "Sun, 0a Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMX",
        "S\u{0}n, 06 Nov 1994 08:49:37 GMT", "Sun; 06 Nov 1994 08:49:37 GMT",
    ])
    func unusualFixdatesReadAsLibcurlReadsThem(_ text: String) {
        #expect(HTTPDate.parse(text) == HTTPDate.parsedByLibcurl(text))
    }
}
