/// Where the parts of a URL lie when it is in the form libcurl's URL API
/// writes back exactly as it was given (libcurl 7.88 and later):
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
        let count = bytes.count
        var index: Int
        if Self.starts(bytes, with: "https://") {
            index = 8
        } else if Self.starts(bytes, with: "http://") {
            index = 7
        } else {
            return nil
        }
        guard let hostEnd = Self.hostEnd(bytes, from: index) else { return nil }
        index = hostEnd
        if index < count, bytes[index] == UInt8(ascii: ":") {
            guard let portEnd = Self.portEnd(bytes, from: index + 1) else { return nil }
            index = portEnd
        }
        guard index < count, bytes[index] == UInt8(ascii: "/") else { return nil }
        pathStart = index
        var percent = false
        var mark: Int?
        while index < count {
            let byte = bytes[index]
            // Printable ASCII, no fragment.
            guard byte > 0x20, byte < 0x7F, byte != UInt8(ascii: "#") else { return nil }
            if byte == UInt8(ascii: "%") {
                percent = true
            } else if byte == UInt8(ascii: "?"), mark == nil {
                mark = index
            } else if mark == nil, byte == UInt8(ascii: "/"), index + 1 < count, bytes[index + 1] == UInt8(ascii: ".") {
                // A segment that starts with a dot and is no longer than two
                // dots may be a dot segment: such a path is not plain.
                let after = index + 2 < count ? bytes[index + 2] : UInt8(ascii: "/")
                if after == UInt8(ascii: "/") || after == UInt8(ascii: "?") || after == UInt8(ascii: ".") { return nil }
            }
            index += 1
        }
        // An empty query's `?` is dropped.
        if let mark, mark == count - 1 { return nil }
        queryMark = mark
        hasPercent = percent
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

    /// The end of a port of 1 to 65535 written without leading zeros.
    private static func portEnd(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        guard let (value, end) = decimal(bytes, from: start, maxDigits: 5), value > 0, value <= 65535 else { return nil }
        return end
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
