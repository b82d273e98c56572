import Curl

/// The name `courier get` saves a download under when the user names none:
/// the URL's last path segment, percent-decoded (or, when asked, the
/// filename of the response's `Content-Disposition`), made into one safe
/// file name.
///
/// Made safe means: one name, never a path (`/` becomes `_`), no NUL or
/// other control character (each becomes `_`, bidirectional formatting
/// marks too, so a name cannot hide its real extension), never `.` or
/// `..`, and at most `maxBytes` bytes. A decoded name that is not UTF-8
/// keeps each byte that is not part of a valid UTF-8 sequence as its
/// escape (`caf%E9.txt` stays `caf%E9.txt`), so every name is a string
/// that shows as it is stored.
public enum RemoteFileName {
    /// A name's largest size in bytes: with courier's staging prefix and
    /// suffix it stays within the 255 bytes most file systems allow.
    public static let maxBytes = 200

    /// The name of what a URL ending in `/` (or with no path) points at,
    /// as wget and aria2c name it.
    public static let directoryIndex = "index.html"

    /// The name for `url` (an absolute URL): its last path segment,
    /// percent-decoded and made safe; `index.html` when the segment is
    /// empty (a bare `/`, a trailing `/`, a query alone), `.` or `..`.
    public static func forURL(_ url: String) -> String {
        // A URL libcurl does not parse is refused before any name is used.
        let path = CurlURL(url)?.path ?? "/"
        let segment = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).last ?? []
        return safe(percentDecoded(segment)) ?? directoryIndex
    }

    /// The file name a `Content-Disposition` value gives (`filename*` in
    /// UTF-8 or ISO-8859-1 before `filename`), without any directory part
    /// and made safe; nil when it gives none that is usable.
    public static func forContentDisposition(_ value: String) -> String? {
        let parameters = ContentDisposition.parameters(value)
        if let extended = parameters["filename*"], let decoded = ContentDisposition.extendedValue(extended) {
            if let name = safe(lastPathComponent(decoded)) { return name }
        }
        if let plain = parameters["filename"] {
            return safe(lastPathComponent(Array(plain.utf8)))
        }
        return nil
    }

    // MARK: - Making a name safe

    /// `bytes` as one file name (see the type's description), or nil when
    /// nothing of it is usable: empty, `.` or `..`.
    static func safe(_ bytes: [UInt8]) -> String? {
        var text = ""
        var index = 0
        while index < bytes.count {
            guard let length = validScalarLength(bytes, at: index) else {
                text += escaped(bytes[index])
                index += 1
                continue
            }
            let scalar = String(decoding: bytes[index..<index + length], as: UTF8.self).unicodeScalars.first!
            text.unicodeScalars.append(isReplaced(scalar) ? "_" : scalar)
            index += length
        }
        guard !text.isEmpty, text != ".", text != ".." else { return nil }
        return truncated(text)
    }

    /// Control characters (C0, DEL, C1), `/`, and the bidirectional
    /// formatting characters that reorder what a terminal shows.
    private static func isReplaced(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2F: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    private static func escaped(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        return String(decoding: [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]], as: UTF8.self)
    }

    /// The length of the well-formed UTF-8 sequence at `index` (RFC 3629:
    /// no overlong forms, no surrogates, nothing past U+10FFFF), or nil.
    static func validScalarLength(_ bytes: [UInt8], at index: Int) -> Int? {
        let lead = bytes[index]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: length = 2
        case 0xE0: (length, low) = (3, 0xA0)
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: (length, high) = (3, 0x9F)
        case 0xF0: (length, low) = (4, 0x90)
        case 0xF1...0xF3: length = 4
        case 0xF4: (length, high) = (4, 0x8F)
        default: return nil
        }
        guard index + length <= bytes.count else { return nil }
        for offset in 1..<length {
            let byte = bytes[index + offset]
            let range: ClosedRange<UInt8> = offset == 1 ? low...high : 0x80...0xBF
            guard range.contains(byte) else { return nil }
        }
        return length
    }

    /// `name` cut to `maxBytes` bytes on a character boundary, keeping its
    /// extension when short: the last two (`.tar.gz`) or the last one, of
    /// up to 16 bytes.
    private static func truncated(_ name: String) -> String {
        guard name.utf8.count > maxBytes else { return name }
        let dots = name.indices.filter { name[$0] == "." && $0 != name.startIndex }.suffix(2)
        let dot = dots.first { name.utf8[$0...].count <= 16 }
        let stem = dot.map { name[..<$0] } ?? Substring(name)
        let suffix = dot.map { name[$0...] } ?? ""
        var kept = ""
        for character in stem {
            guard kept.utf8.count + character.utf8.count + suffix.utf8.count <= maxBytes else { break }
            kept.append(character)
        }
        return kept + suffix
    }

    // MARK: - Reading the parts

    /// `bytes` with every `%XX` escape decoded; a `%` not followed by two
    /// hexadecimal digits stays as it is.
    static func percentDecoded(_ bytes: some Collection<UInt8>) -> [UInt8] {
        let bytes = Array(bytes)
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
            {
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(bytes[index])
                index += 1
            }
        }
        return decoded
    }

    /// The value of a hexadecimal digit, either case.
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// What follows the last `/` or `\` (a sender's directory is never
    /// used, as curl's `-J` drops it).
    private static func lastPathComponent(_ bytes: [UInt8]) -> [UInt8] {
        guard let separator = bytes.lastIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\\") }) else {
            return bytes
        }
        return Array(bytes[(separator + 1)...])
    }
}

/// The parameters of a `Content-Disposition` field value (RFC 6266).
enum ContentDisposition {
    /// Parameter names, lower-cased, to their values: quoted strings
    /// unquoted, the first of a repeated name kept.
    static func parameters(_ value: String) -> [String: String] {
        var parameters: [String: String] = [:]
        var rest = Substring(value)
        // The disposition type comes first.
        rest = rest.drop { $0 != ";" }
        while rest.first == ";" {
            rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" }
            let name = rest.prefix { $0 != "=" && $0 != ";" }
            rest = rest[name.endIndex...]
            guard rest.first == "=" else { continue }
            rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" }
            var parsed = ""
            if rest.first == "\"" {
                rest = rest.dropFirst()
                while let character = rest.first, character != "\"" {
                    rest = rest.dropFirst()
                    if character == "\\", let escaped = rest.first {
                        parsed.append(escaped)
                        rest = rest.dropFirst()
                    } else {
                        parsed.append(character)
                    }
                }
                rest = rest.dropFirst()
                rest = rest.drop { $0 != ";" }
            } else {
                let token = rest.prefix { $0 != ";" }
                parsed = token.trimmingBlanks
                rest = rest[token.endIndex...]
            }
            let key = name.trimmingBlanks.lowercased()
            if !key.isEmpty, parameters[key] == nil { parameters[key] = parsed }
        }
        return parameters
    }

    /// The bytes of an RFC 8187 value (`UTF-8''caf%C3%A9.txt`), in UTF-8;
    /// nil for another charset than UTF-8 or ISO-8859-1, or a broken form.
    static func extendedValue(_ value: String) -> [UInt8]? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let bytes = RemoteFileName.percentDecoded(parts[2].utf8)
        switch parts[0].lowercased() {
        case "utf-8":
            return bytes
        case "iso-8859-1":
            return Array(String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) })).utf8)
        default:
            return nil
        }
    }
}
