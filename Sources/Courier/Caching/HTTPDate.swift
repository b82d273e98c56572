import Foundation

/// HTTP dates (RFC 9110 §5.6.7): IMF-fixdate, and the obsolete RFC 850 and
/// asctime forms a recipient must also accept. All in GMT.
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]

    /// The date `text` names, or nil when it is not an HTTP date.
    static func parse(_ text: String) -> Date? {
        let tokens = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" || $0 == ":" }).map(String.init)
        guard tokens.count >= 7, months.contains(tokens[1].lowercased()) || tokens.count >= 8 else { return nil }
        let day, month, year, hour, minute, second: Int?
        if let asctimeMonth = months.firstIndex(of: tokens[1].lowercased()) {
            // Sun Nov  6 08:49:37 1994
            month = asctimeMonth + 1
            (day, hour, minute, second, year) = (Int(tokens[2]), Int(tokens[3]), Int(tokens[4]), Int(tokens[5]), Int(tokens[6]))
        } else {
            // Sun, 06 Nov 1994 08:49:37 GMT and Sunday, 06-Nov-94 08:49:37 GMT
            month = months.firstIndex(of: tokens[2].lowercased()).map { $0 + 1 }
            (day, year, hour, minute, second) = (Int(tokens[1]), Int(tokens[3]), Int(tokens[4]), Int(tokens[5]), Int(tokens[6]))
            guard ["gmt", "utc", "+0000"].contains(tokens[7].lowercased()) else { return nil }
        }
        guard let day, let month, var year, let hour, let minute, let second,
            (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        if year < 100 { year += year < 70 ? 2000 : 1900 }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3600 + minute * 60 + second))
    }

    /// `date` as an IMF-fixdate, whole seconds.
    static func format(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let time = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        let weekday = weekdays[((days % 7) + 7) % 7]
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let monthName = months[month - 1].capitalized
        return "\(weekday), \(two(day)) \(monthName) \(year) \(two(time / 3600)):\(two(time / 60 % 60)):\(two(time % 60)) GMT"
    }

    /// Days since 1970-01-01 (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

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
