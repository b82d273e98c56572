/// Where the parts of a URL lie when it is in the form libcurl's URL API
/// writes back exactly as it was given (libcurl 7.88's, which
/// `PlainURLTests` holds the linked libcurl to):
/// `http://` or `https://`, a host name in lower case that starts with a
/// letter, or an IPv4 address of four decimal parts without leading zeros,
/// an optional port without leading zeros, a path with no `.` or `..`
/// segment, and an optional query that is not empty; printable ASCII alone,
/// no fragment, no user name.
///
/// libcurl reads every other URL into parts that make another text: it
/// lowers the scheme, writes a numeric host in dotted decimal, drops a port's
/// leading zeros, an empty query's `?` and a fragment's empty `#`, adds a
/// `/` for an empty path and removes dot segments. So a handle given such a
/// URL already parsed (`CURLOPT_CURLU`) beside the same text
/// (`CURLOPT_URL`), which libcurl then reports as the effective URL
/// untouched, fetches and reports exactly what it would have made of the
/// text alone, and libcurl neither parses it nor writes it out again.
struct PlainURL {
    /// Where the path starts: the scheme and authority are the bytes before.
    let pathStart: Int
    /// Where the `?` before the query is, when there is one.
    let queryMark: Int?
    /// A `%` is in the path or the query. libcurl lowers the hex digits of
    /// an escape in a part set on its own (`curl_url_set` of a path), not
    /// in a whole URL it parses: such a URL is parsed whole.
    let hasPercent: Bool

    /// Nil when `bytes` is not in that form.
    init?(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let pathStart = Self.originEnd(bytes) else { return nil }
        self.init(bytes, pathStart: pathStart)
    }

    /// The URL whose scheme and authority, the bytes before `pathStart`,
    /// are known to be in that form (they are those of a URL found so
    /// before, and `bytes[pathStart]` is a `/`): its path and query are
    /// checked alone.
    init?(_ bytes: UnsafeBufferPointer<UInt8>, pathStart: Int) {
        let count = bytes.count
        guard pathStart < count, bytes[pathStart] == UInt8(ascii: "/") else { return nil }
        self.pathStart = pathStart
        var percent = false
        var mark: Int?
        var index = pathStart
        while index < count {
            let byte = bytes[index]
            index += 1
            // Most bytes are neither special nor out of the form.
            if Self.isOrdinary(byte) { continue }
            switch byte {
            case UInt8(ascii: "%"):
                percent = true
            case UInt8(ascii: "?"):
                if mark == nil { mark = index - 1 }
            case UInt8(ascii: "/"):
                // A segment that starts with a dot and is no longer than two
                // dots may be a dot segment: such a path is not plain.
                guard mark == nil, index < count, bytes[index] == UInt8(ascii: ".") else { continue }
                let after = index + 1 < count ? bytes[index + 1] : UInt8(ascii: "/")
                if after == UInt8(ascii: "/") || after == UInt8(ascii: "?") || after == UInt8(ascii: ".") { return nil }
            default:
                // A fragment, a space, a control or a byte past ASCII.
                return nil
            }
        }
        // An empty query's `?` is dropped.
        if let mark, mark == count - 1 { return nil }
        queryMark = mark
        hasPercent = percent
    }

    /// Where the scheme and authority of a URL in that form end: at the
    /// `/` that starts its path.
    static func originEnd(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        let count = bytes.count
        var index: Int
        if starts(bytes, with: "https://") {
            index = 8
        } else if starts(bytes, with: "http://") {
            index = 7
        } else {
            return nil
        }
        guard let hostEnd = hostEnd(bytes, from: index) else { return nil }
        index = hostEnd
        if index < count, bytes[index] == UInt8(ascii: ":") {
            guard let (value, end) = decimal(bytes, from: index + 1, maxDigits: 5), value > 0, value <= 65535 else { return nil }
            index = end
        }
        guard index < count, bytes[index] == UInt8(ascii: "/") else { return nil }
        return index
    }

    /// Printable ASCII but `#`, `%`, `/` and `?`: bit `n` of the first word
    /// for byte `n`, of the second for byte `64 + n`.
    private static let ordinaryBelow64: UInt64 = 0x7FFF_7FD6_0000_0000
    private static let ordinaryFrom64: UInt64 = 0x7FFF_FFFF_FFFF_FFFF

    private static func isOrdinary(_ byte: UInt8) -> Bool {
        let mask: UInt64 = byte < 64 ? ordinaryBelow64 : (byte < 128 ? ordinaryFrom64 : 0)
        return mask & (1 << UInt64(byte & 63)) != 0
    }

    private static func starts(_ bytes: UnsafeBufferPointer<UInt8>, with prefix: StaticString) -> Bool {
        let length = prefix.utf8CodeUnitCount
        guard bytes.count >= length else { return false }
        let expected = prefix.utf8Start
        for index in 0..<length where bytes[index] != expected[index] { return false }
        return true
    }

    /// The end of a host name that starts with a lower-case letter and holds
    /// lower-case letters, digits, dots and hyphens alone, or of an IPv4
    /// address of four plain decimal parts of at most 255.
    private static func hostEnd(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        guard start < bytes.count else { return nil }
        var index = start
        if isLowerLetter(bytes[index]) {
            while index < bytes.count, isHostByte(bytes[index]) { index += 1 }
            return index
        }
        for part in 0..<4 {
            if part > 0 {
                guard index < bytes.count, bytes[index] == UInt8(ascii: ".") else { return nil }
                index += 1
            }
            guard let (value, end) = decimal(bytes, from: index, maxDigits: 3), value <= 255 else { return nil }
            index = end
        }
        // Anything else a host may hold after the four parts makes it no
        // IPv4 address, or another one.
        guard index == bytes.count || bytes[index] == UInt8(ascii: ":") || bytes[index] == UInt8(ascii: "/") else { return nil }
        return index
    }

    /// A decimal number of 1 to `maxDigits` digits with no leading zero
    /// (`0` alone aside), and where its digits end.
    private static func decimal(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, maxDigits: Int) -> (Int, Int)? {
        var index = start
        var value = 0
        while index < bytes.count, index - start < maxDigits + 1, isDigit(bytes[index]) {
            value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
            index += 1
        }
        let digits = index - start
        guard digits > 0, digits <= maxDigits, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        return (value, index)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }

    private static func isLowerLetter(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "a") < 26 }

    private static func isHostByte(_ byte: UInt8) -> Bool {
        isLowerLetter(byte) || isDigit(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
    }
}
