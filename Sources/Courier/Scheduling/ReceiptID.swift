/// A receipt's id: a number the scheduler issues in order, written `r42` in
/// answers and notifications. Ids compare by number, so `r9` comes before
/// `r10`.
struct ReceiptID: Hashable, Comparable, Sendable, CustomStringConvertible {
    let number: Int

    init(_ number: Int) { self.number = number }

    var description: String { "r\(number)" }

    static func < (lhs: ReceiptID, rhs: ReceiptID) -> Bool { lhs.number < rhs.number }

    /// Where a hash table puts the id: its number mixed with the table's
    /// seed (see `NumberHash`).
    func _rawHashValue(seed: Int) -> Int { NumberHash.mix(number, seed: seed) }
}
