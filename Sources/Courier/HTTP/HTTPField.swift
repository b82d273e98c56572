/// RFC 9110 field syntax, checked on bytes: a Swift `Character` comparison
/// misses `"\r\n"`, which is one grapheme cluster.
enum HTTPField {
    /// A field name: one or more token characters (RFC 9110 §5.6.2).
    static func isValidName(_ name: String) -> Bool {
        !name.utf8.isEmpty && name.utf8.allSatisfy(isTokenByte)
    }

    /// A field value: visible characters, obs-text, spaces and tabs; never
    /// CR, LF, NUL or another control (RFC 9110 §5.5).
    static func isValidValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
