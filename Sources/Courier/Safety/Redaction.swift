/// Keeps credentials and forged lines out of what courier reports: URL
/// passwords, credential header values, and control characters in log text.
/// Works on bytes, so no Unicode equivalence hides a separator.
public enum Redaction {
    static let mask = Array("***".utf8)
    /// Header names whose values are credentials, in lower case.
    static let credentialHeaders = ["authorization", "proxy-authorization", "cookie", "set-cookie"]

    /// `url` with the password of its user information replaced by `***`
    /// (a user name alone, which may be a token, is replaced whole).
    public static func url(_ url: String) -> String {
        String(decoding: redactingUserInfo(Array(url.utf8)), as: UTF8.self)
    }

    /// A log line: user information in every URL and the values of
    /// credential headers replaced by `***`, control characters and Unicode
    /// line separators escaped, so the text is one line that says what it
    /// said, without secrets.
    public static func logText(_ text: String) -> String {
        let bytes = escapingControls(redactingCredentialHeaders(redactingUserInfo(Array(text.utf8))))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Replaces the user information of every `scheme://user:password@host`.
    static func redactingUserInfo(_ bytes: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            guard index + 3 <= bytes.count, bytes[index] == UInt8(ascii: ":"), bytes[index + 1] == UInt8(ascii: "/"),
                bytes[index + 2] == UInt8(ascii: "/")
            else {
                output.append(bytes[index])
                index += 1
                continue
            }
            output.append(contentsOf: "://".utf8)
            let start = index + 3
            var end = start
            while end < bytes.count, !isAuthorityEnd(bytes[end]) { end += 1 }
            if let at = bytes[start..<end].lastIndex(of: UInt8(ascii: "@")) {
                if let colon = bytes[start..<at].firstIndex(of: UInt8(ascii: ":")) {
                    output.append(contentsOf: bytes[start...colon])
                }
                output.append(contentsOf: mask)
                output.append(contentsOf: bytes[at..<end])
            } else {
                output.append(contentsOf: bytes[start..<end])
            }
            index = end
        }
        return output
    }

    /// Replaces the value after `Authorization:`, `"cookie": "`… and the
    /// like, up to the end of the line or of the quoted string.
    static func redactingCredentialHeaders(_ bytes: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        outer: while index < bytes.count {
            for name in credentialHeaders where startsName(name, in: bytes, at: index) {
                var cursor = index + name.utf8.count
                var quoted = false
                if cursor < bytes.count, bytes[cursor] == UInt8(ascii: "\"") { cursor += 1 }
                while cursor < bytes.count, bytes[cursor] == UInt8(ascii: " ") { cursor += 1 }
                guard cursor < bytes.count, bytes[cursor] == UInt8(ascii: ":") || bytes[cursor] == UInt8(ascii: "=") else {
                    continue
                }
                cursor += 1
                while cursor < bytes.count, bytes[cursor] == UInt8(ascii: " ") { cursor += 1 }
                if cursor < bytes.count, bytes[cursor] == UInt8(ascii: "\"") {
                    quoted = true
                    cursor += 1
                }
                output.append(contentsOf: bytes[index..<cursor])
                output.append(contentsOf: mask)
                while cursor < bytes.count {
                    let byte = bytes[cursor]
                    if byte == 0x0A || byte == 0x0D || (quoted && byte == UInt8(ascii: "\"")) { break }
                    if quoted, byte == UInt8(ascii: "\\") { cursor += 1 }
                    cursor += 1
                }
                index = min(cursor, bytes.count)
                continue outer
            }
            output.append(bytes[index])
            index += 1
        }
        return output
    }

    /// C0 controls, DEL, and the line separators U+0085, U+2028 and U+2029
    /// as escapes (`\n`, `\r`, `\t`, `\u{XX}`).
    static func escapingControls(_ bytes: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case 0x0A: output.append(contentsOf: "\\n".utf8)
            case 0x0D: output.append(contentsOf: "\\r".utf8)
            case 0x09: output.append(contentsOf: "\\t".utf8)
            case 0x00..<0x20, 0x7F: output.append(contentsOf: "\\u{\(hex(byte))}".utf8)
            case 0xC2 where index + 1 < bytes.count && bytes[index + 1] == 0x85:
                output.append(contentsOf: "\\u{85}".utf8)
                index += 1
            case 0xE2 where index + 2 < bytes.count && bytes[index + 1] == 0x80 && (bytes[index + 2] == 0xA8 || bytes[index + 2] == 0xA9):
                output.append(contentsOf: "\\u{20\(hex(bytes[index + 2] - 0x80))}".utf8)
                index += 2
            default: output.append(byte)
            }
            index += 1
        }
        return output
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16, uppercase: true)
        return digits.count == 1 ? "0" + digits : digits
    }

    private static func isAuthorityEnd(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "\""), UInt8(ascii: "'"),
            UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "\\"), 0x00...0x20, 0x7F:
            return true
        default:
            return false
        }
    }

    /// Whether `name` (lower case) starts at `index`, compared without ASCII
    /// case, and is not the tail of a longer word.
    private static func startsName(_ name: String, in bytes: [UInt8], at index: Int) -> Bool {
        let name = Array(name.utf8)
        guard index + name.count <= bytes.count else { return false }
        if index > 0, isNameByte(bytes[index - 1]) { return false }
        for (offset, expected) in name.enumerated() where lowercased(bytes[index + offset]) != expected { return false }
        return true
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }
}
