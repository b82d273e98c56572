/// A `Content-Range` of bytes (RFC 9110 §14.4), `bytes first-last/complete`,
/// read from the bytes an origin sent: every number within 63 bits, `first`
/// at most `last`, and `last` before the complete length when that is known
/// (`*` leaves it unknown).
struct ContentRange: Equatable, Sendable {
    var first: Int64
    var last: Int64
    var completeLength: Int64?

    init(first: Int64, last: Int64, completeLength: Int64?) {
        self.first = first
        self.last = last
        self.completeLength = completeLength
    }

    /// Nil for anything but a satisfied byte range: another unit, the
    /// unsatisfied form (`bytes */1000`), a missing or extra part, a sign,
    /// a number past `Int64.max`, a range that ends before it starts or at
    /// or after the complete length.
    init?(_ value: String) {
        var bytes = Array(value.utf8)[...]
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes = bytes.dropFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes = bytes.dropLast() }
        let unit = Array("bytes".utf8)
        guard bytes.count > unit.count + 1,
            zip(bytes.prefix(unit.count), unit).allSatisfy({ $0 | 0x20 == $1 }), bytes[bytes.startIndex + unit.count] == 0x20
        else { return nil }
        var rest = bytes.dropFirst(unit.count)
        while rest.first == 0x20 { rest = rest.dropFirst() }
        guard let dash = rest.firstIndex(of: UInt8(ascii: "-")), let slash = rest.firstIndex(of: UInt8(ascii: "/")),
            dash < slash, let first = HTTPField.decimal(rest[..<dash]), let last = HTTPField.decimal(rest[(dash + 1)..<slash]),
            first <= last
        else { return nil }
        let complete = rest[(slash + 1)...]
        if complete.elementsEqual([UInt8(ascii: "*")]) {
            self.init(first: first, last: last, completeLength: nil)
            return
        }
        guard let length = HTTPField.decimal(complete), last < length else { return nil }
        self.init(first: first, last: last, completeLength: length)
    }

    /// The bytes the range holds.
    var count: Int64 { last - first + 1 }
}
