import Curl

/// A string that equals another only when their UTF-8 bytes are equal.
///
/// Swift's `String` compares and hashes by canonical equivalence, so
/// `"K" == "\u{212A}"` and `"\u{E9}" == "e\u{301}"`; as dictionary keys they
/// would name one resource, slot or view where the client named two. Keys
/// built from client or origin text use this type instead.
struct ExactString: Hashable, Sendable, CustomStringConvertible {
    let value: String

    init(_ value: String) { self.value = value }

    var description: String { value }

    static func == (lhs: ExactString, rhs: ExactString) -> Bool {
        lhs.value.isExactly(rhs.value)
    }

    /// Hashes the bytes in one piece where the string holds them so (a
    /// native string always does): a step of the hash function per byte
    /// would weigh on every look-up of a transfer by its URL.
    func hash(into hasher: inout Hasher) {
        hasher.combine(value.utf8.count)
        let hashed: Void? = value.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if hashed == nil {
            for byte in value.utf8 { hasher.combine(byte) }
        }
    }
}

extension String {
    /// Whether the path starts with a slash byte. `hasPrefix("/")` compares
    /// characters, so it says no for "/\u{301}tmp", whose first character
    /// is a slash with a combining accent.
    public var isAbsolutePath: Bool { utf8.first == UInt8(ascii: "/") }

    /// Whether the path ends with a slash byte.
    var endsWithSlash: Bool { utf8.last == UInt8(ascii: "/") }
}
