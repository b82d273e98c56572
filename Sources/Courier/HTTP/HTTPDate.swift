import Curl
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// HTTP dates (RFC 9110 §5.6.7): IMF-fixdate, and the obsolete RFC 850 and
/// asctime forms a recipient must also accept. All in GMT.
///
/// An IMF-fixdate of a real day and time is read directly; every other
/// text is libcurl's (`CurlDate`), after a check that it is made of the
/// words an HTTP date has. Both read the same dates the same way, and only
/// dates from the year 1583 (the earliest libcurl reads) through 9999 are
/// taken: beyond them a date is invalid, so no arithmetic on it can
/// overflow.
enum HTTPDate {
    /// 1583-01-01T00:00:00Z, in seconds since 1970.
    static let earliest: Int64 = -12_212_553_600
    /// 9999-12-31T23:59:59Z, in seconds since 1970.
    static let latest: Int64 = 253_402_300_799
    /// 0001-01-01T00:00:00Z, the earliest instant `format` writes.
    private static let formatEarliest: Int64 = -62_135_596_800

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
    /// The words of letters an HTTP date may hold, in lower case.
    private static let words: Set<String> = Set(months).union([
        "mon", "tue", "wed", "thu", "fri", "sat", "sun", "monday", "tuesday", "wednesday", "thursday", "friday",
        "saturday", "sunday", "gmt", "utc",
    ])

    /// The date `text` names, or nil when it is not an HTTP date or falls
    /// outside the years 1583 through 9999.
    static func parse(_ text: String) -> Date? {
        if let seconds = fixdateSeconds(text) { return Date(timeIntervalSince1970: TimeInterval(seconds)) }
        return parsedByLibcurl(text)
    }

    /// `parse` for every text, by libcurl.
    static func parsedByLibcurl(_ text: String) -> Date? {
        guard hasDateWords(text), let seconds = CurlDate.parse(text), (earliest...latest).contains(seconds) else {
            return nil
        }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// Seconds since 1970 for an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37
    /// GMT`, the form origins send) naming a real day and time from 1583
    /// through 9999: what libcurl reads from it, without its `sscanf`s.
    /// Nil for any other text, which is left to libcurl.
    static func fixdateSeconds(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { bytes -> Int64? in
            guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == UInt8(ascii: " "),
                bytes[7] == UInt8(ascii: " "), bytes[11] == UInt8(ascii: " "), bytes[16] == UInt8(ascii: " "),
                bytes[19] == UInt8(ascii: ":"), bytes[22] == UInt8(ascii: ":"),
                bytes[25...].elementsEqual(" GMT".utf8),
                let weekday = word(at: 0, in: bytes), weekdayWords.contains(weekday),
                let month = word(at: 8, in: bytes).flatMap({ monthWords.firstIndex(of: $0) }).map({ $0 + 1 }),
                let day = number(bytes, 5, 2), let year = number(bytes, 12, 4), let hour = number(bytes, 17, 2),
                let minute = number(bytes, 20, 2), let second = number(bytes, 23, 2),
                (1583...9999).contains(year), (1...daysIn(month: month, year: year)).contains(day), hour < 24,
                minute < 60, second < 60
            else { return nil }
            return Int64(days(year: year, month: month, day: day)) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        }
    }

    /// The three letters at `offset` in lower case, packed into one
    /// integer (as `packed` packs a name); nil when one is not a letter.
    private static func word(at offset: Int, in bytes: UnsafeBufferPointer<UInt8>) -> UInt32? {
        var packed: UInt32 = 0
        for byte in bytes[offset..<(offset + 3)] {
            guard isLetter(byte) else { return nil }
            packed = packed << 8 | UInt32(byte | 0x20)
        }
        return packed
    }

    /// The letters of `name` in lower case, packed into one integer.
    private static func packed(_ name: String) -> UInt32 {
        name.utf8.reduce(0) { $0 << 8 | UInt32($1 | 0x20) }
    }

    /// `weekdays` and `months` as `word(at:in:)` reads them: compared as
    /// integers, not string by string.
    private static let weekdayWords = weekdays.map(packed)
    private static let monthWords = months.map(packed)

    /// The `count` decimal digits at `offset`, or nil if any is not one.
    private static func number(_ bytes: UnsafeBufferPointer<UInt8>, _ offset: Int, _ count: Int) -> Int? {
        var value = 0
        for byte in bytes[offset..<(offset + count)] {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    private static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// Whether `text` holds only what the three HTTP date forms do: digits,
    /// weekday and month names and GMT, separated by spaces, commas and
    /// colons, with dashes only inside an RFC 850 date ("06-Nov-94") and a
    /// sign only in the zone "+0000". libcurl alone would read other zones,
    /// trailing words and "-1994" (as 1994).
    private static func hasDateWords(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 64 else { return false }
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if isLetter(byte) {
                var end = index
                while end < bytes.count, isLetter(bytes[end]) { end += 1 }
                let word = String(decoding: bytes[index..<end].map { $0 | 0x20 }, as: UTF8.self)
                guard words.contains(word) else { return false }
                index = end
                continue
            }
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: " "), UInt8(ascii: ","), UInt8(ascii: ":"):
                break
            case UInt8(ascii: "-"):
                guard index > 0, index + 1 < bytes.count, isAlphanumeric(bytes[index - 1]),
                    isAlphanumeric(bytes[index + 1])
                else { return false }
            case UInt8(ascii: "+"):
                guard bytes[(index + 1)...].starts(with: "0000".utf8),
                    index + 5 == bytes.count || !isAlphanumeric(bytes[index + 5])
                else { return false }
            default:
                return false
            }
            index += 1
        }
        return true
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        isLetter(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// `date` as an IMF-fixdate, whole seconds. A date outside the years 1
    /// through 9999 is written as the nearest of them; NaN as 1970.
    static func format(_ date: Date) -> String {
        let seconds = clampedSeconds(date.timeIntervalSince1970)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let time = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        let weekday = weekdays[((days % 7) + 7) % 7]
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        func four(_ n: Int) -> String { String(repeating: "0", count: max(0, 4 - String(n).utf8.count)) + String(n) }
        let monthName = months[month - 1].capitalized
        return "\(weekday), \(two(day)) \(monthName) \(four(year)) \(two(time / 3600)):\(two(time / 60 % 60)):\(two(time % 60)) GMT"
    }

    /// Whole seconds of `interval`, bounded to what `format` writes.
    private static func clampedSeconds(_ interval: TimeInterval) -> Int {
        guard !interval.isNaN else { return 0 }
        let bounded = min(max(interval.rounded(.down), TimeInterval(formatEarliest)), TimeInterval(latest))
        return Int(bounded)
    }

    /// The civil date `days` after 1970-01-01 (Howard Hinnant's algorithm).
    private static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
