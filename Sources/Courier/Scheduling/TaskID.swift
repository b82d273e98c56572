/// A task's id: a number the scheduler issues in order, written `t42` in
/// answers and notifications. Ids compare by number, so `t9` comes before
/// `t10`.
struct TaskID: Hashable, Comparable, Sendable, CustomStringConvertible {
    let number: Int

    init(_ number: Int) { self.number = number }

    var description: String { idText(prefix: UInt8(ascii: "t"), number) }

    static func < (lhs: TaskID, rhs: TaskID) -> Bool { lhs.number < rhs.number }

    /// Where a hash table puts the id: its number mixed with the table's
    /// seed (see `NumberHash`).
    func _rawHashValue(seed: Int) -> Int { NumberHash.mix(number, seed: seed) }
}

/// The hash of the scheduler's ids in its tables: a number mixed with a
/// table's seed by MurmurHash3's 64-bit finalizer, a dozen instructions.
/// `Hasher`'s SipHash takes some 200 for one number, and each download
/// looks its task, receipt and transfer up two dozen times. The numbers are
/// the scheduler's own, issued in order, never chosen by a client, so
/// keyed hashing has nothing to defend; the finalizer spreads every bit of
/// the number and of the seed over the whole hash, so the tables' per-table
/// seeds still tell their orders apart.
enum NumberHash {
    static func mix(_ value: Int, seed: Int) -> Int {
        var bits = UInt64(bitPattern: Int64(value)) ^ UInt64(bitPattern: Int64(seed))
        bits ^= bits >> 33
        bits &*= 0xff51_afd7_ed55_8ccd
        bits ^= bits >> 33
        bits &*= 0xc4ce_b9fe_1a85_ec53
        bits ^= bits >> 33
        return Int(truncatingIfNeeded: bits)
    }
}
