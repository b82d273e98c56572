/// RFC 9110 field syntax, checked on bytes: a Swift `Character` comparison
/// misses `"\r\n"`, which is one grapheme cluster.
enum HTTPField {
    /// A field name: one or more token characters (RFC 9110 §5.6.2).
    static func isValidName(_ name: String) -> Bool {
        isValidName(name.utf8)
    }

    static func isValidName(_ bytes: some Collection<UInt8>) -> Bool {
        !bytes.isEmpty && bytes.allSatisfy(isTokenByte)
    }

    /// A field value: visible characters, obs-text, spaces and tabs; never
    /// CR, LF, NUL or another control (RFC 9110 §5.5).
    static func isValidValue(_ value: String) -> Bool {
        isValidValue(value.utf8)
    }

    static func isValidValue(_ bytes: some Sequence<UInt8>) -> Bool {
        bytes.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }

    /// The most bytes of a validator courier sends back to an origin: a
    /// longer one (curl takes header lines of up to 100 KiB) is not worth a
    /// conditional request.
    static let maximumValidatorLength = 8192

    /// Whether `bytes`, read from an origin or from the cache directory, may
    /// go back to an origin as a validator (`If-None-Match`, `If-Range`,
    /// `If-Modified-Since`): a field value of at most
    /// `maximumValidatorLength` bytes, never CR, LF or NUL.
    static func isSendableValidator(_ bytes: [UInt8]) -> Bool {
        !bytes.isEmpty && bytes.count <= maximumValidatorLength && isValidValue(bytes)
    }

    /// `bytes` without the spaces and tabs around them.
    static func trimmingBlanks<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> Bytes.SubSequence {
        var slice = bytes[...]
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
        return slice
    }

    /// Decimal digits alone (no sign, no blanks), whose value fits in 63
    /// bits: a length or offset an origin sent.
    static func decimal(_ digits: some Collection<UInt8>) -> Int64? {
        guard !digits.isEmpty else { return nil }
        var value: Int64 = 0
        for digit in digits {
            guard (0x30...0x39).contains(digit) else { return nil }
            let (shifted, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = shifted.addingReportingOverflow(Int64(digit - 0x30))
            guard !overflowA, !overflowB else { return nil }
            value = sum
        }
        return value
    }

    /// A token character (RFC 9110 §5.6.2), looked up in two 64-bit masks,
    /// bit `n` of the first for byte `n` and of the second for byte
    /// `64 + n`: a name is checked per field of every response, and a chain
    /// of range tests costs more per byte.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        let mask: UInt64 = byte < 64 ? tokenBytesBelow64 : (byte < 128 ? tokenBytesFrom64 : 0)
        return mask & (1 << UInt64(byte & 63)) != 0
    }

    /// `!`, `#` to `'`, `*`, `+`, `-`, `.` and the digits.
    private static let tokenBytesBelow64: UInt64 = 0x03FF_6CFA_0000_0000
    /// The letters, `^`, `_`, `` ` ``, `|` and `~`.
    private static let tokenBytesFrom64: UInt64 = 0x57FF_FFFF_C7FF_FFFE
}
