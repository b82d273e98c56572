import FoundationEssentials

/// An origin's `Retry-After` (RFC 9110 §10.2.3): delay-seconds, or an HTTP
/// date. What an origin sends is hostile input: it is read as bytes and
/// every number is bounded, so no value can trap.
enum RetryAfter {
    /// The most seconds courier takes from a `Retry-After`: 2^53, the
    /// largest integer every JSON reader holds exactly. Any value past
    /// `--retry-max-delay` is not waited for, so larger ones mean no more.
    static let largest: Int64 = 1 << 53

    /// The seconds `value` asks to wait: its digits (more than `largest`
    /// reads as `largest`), or the time from `now` to its date (0 for a date
    /// past). Nil for anything else, which courier ignores: a sign, a
    /// fraction, words, an empty value, a date `HTTPDate` does not read (a
    /// year past 9999 is not a 4-digit year).
    static func seconds(_ value: String, now: Date) -> Int64? {
        var bytes = Array(value.utf8)[...]
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes = bytes.dropFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes = bytes.dropLast() }
        guard !bytes.isEmpty else { return nil }
        if bytes.allSatisfy({ (0x30...0x39).contains($0) }) {
            var seconds: Int64 = 0
            for digit in bytes {
                seconds = seconds * 10 + Int64(digit - 0x30)
                if seconds >= largest { return largest }
            }
            return seconds
        }
        guard let date = HTTPDate.parse(String(decoding: bytes, as: UTF8.self)) else { return nil }
        let interval = date.timeIntervalSince(now).rounded(.up)
        guard interval.isFinite else { return nil }
        return interval <= 0 ? 0 : Int64(min(interval, Double(largest)))
    }
}
