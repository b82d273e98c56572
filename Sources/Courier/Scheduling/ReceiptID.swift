/// A receipt's id: a number the scheduler issues in order, written `r42` in
/// answers and notifications. Ids compare by number, so `r9` comes before
/// `r10`.
struct ReceiptID: Hashable, Comparable, Sendable, CustomStringConvertible {
    let number: Int

    init(_ number: Int) { self.number = number }

    var description: String { idText(prefix: UInt8(ascii: "r"), number) }

    static func < (lhs: ReceiptID, rhs: ReceiptID) -> Bool { lhs.number < rhs.number }

    /// Where a hash table puts the id: its number mixed with the table's
    /// seed (see `NumberHash`).
    func _rawHashValue(seed: Int) -> Int { NumberHash.mix(number, seed: seed) }
}

/// `prefix` and `number` in decimal (`r42`): a short string, made in place
/// rather than through string interpolation, as every answer and notice of
/// a download writes two.
func idText(prefix: UInt8, _ number: Int) -> String {
    var digits = 1
    var rest = number.magnitude
    while rest >= 10 {
        rest /= 10
        digits += 1
    }
    let count = 1 + (number < 0 ? 1 : 0) + digits
    return String(unsafeUninitializedCapacity: count) { text in
        text[0] = prefix
        if number < 0 { text[1] = UInt8(ascii: "-") }
        var magnitude = number.magnitude
        var index = count
        repeat {
            index -= 1
            text[index] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
        return count
    }
}
