/// The final progress of the most recent finished receipts, so `progress`
/// can still answer for them; the oldest are forgotten past `limit`.
///
/// Every `download` adds a receipt, and once the history is full forgets
/// one, so both are on every download's path. The receipts are kept in the
/// order they finished, in a ring of at most `limit`, and found through a
/// table of their own, by open addressing on the receipt's number spread
/// by one multiplication (Fibonacci hashing), where a dictionary hashes
/// each number with SipHash. Numbers issued in sequence land far apart:
/// laid side by side, the receipts kept would make one run of `limit`
/// slots, which forgetting the oldest would walk to its end.
struct FinishedHistory: Sendable {
    let limit: Int
    /// The receipts kept, oldest first from `oldest`, round the end once
    /// the ring holds `limit`.
    private var ring: [ReceiptProgress] = []
    private var oldest = 0
    /// Where each kept receipt lies in `ring`, in the slot its number
    /// gives (`home`) or the first free one after it, round the end; at
    /// most three quarters of the slots are taken, so a search always
    /// ends at a free one.
    private var slots: [Slot] = []
    /// 64 less the bits of the table's size, a power of two.
    private var shift = 64
    /// How many receipts kept belong to each task, counting only those
    /// whose number is not their task's: a task shares its number with
    /// the receipt it was made for (`DownloadScheduler.download`), which
    /// `hasTask` finds in the table, so most tasks (every hit's) need no
    /// entry here.
    private var receiptsJoiningTask: [TaskID: Int] = [:]

    private struct Slot {
        var number: Int
        /// In `ring`; `Slot.free.position` for a free slot.
        var position: Int
        static let free = Slot(number: 0, position: -1)
        var isFree: Bool { position < 0 }
    }

    init(limit: Int) { self.limit = limit }

    subscript(receipt: ReceiptID) -> ReceiptProgress? {
        guard let index = slot(of: receipt.number) else { return nil }
        return ring[slots[index].position]
    }

    func hasTask(_ task: TaskID) -> Bool {
        if let made = self[ReceiptID(task.number)], made.figures.task == task { return true }
        return receiptsJoiningTask[task] != nil
    }

    /// Keeps `snapshot`, forgetting the oldest receipt when `limit` are
    /// kept. A receipt kept already is found as the newer snapshot.
    mutating func add(_ snapshot: ReceiptProgress) {
        guard limit > 0 else { return }
        let position: Int
        if ring.count < limit {
            position = ring.count
            if (position + 1) * 4 > slots.count * 3 { grow() }
            ring.append(snapshot)
        } else {
            position = oldest
            forget(at: position)
            ring[position] = snapshot
            oldest = oldest + 1 == limit ? 0 : oldest + 1
        }
        insert(snapshot.receipt.number, at: position)
        if snapshot.figures.task.number != snapshot.receipt.number {
            receiptsJoiningTask[snapshot.figures.task, default: 0] += 1
        }
    }

    /// The slot that holds receipt `number`.
    private func slot(of number: Int) -> Int? {
        guard !slots.isEmpty else { return nil }
        let mask = slots.count - 1
        var index = home(number)
        while !slots[index].isFree {
            if slots[index].number == number { return index }
            index = (index + 1) & mask
        }
        return nil
    }

    /// Points receipt `number`'s slot at `position`: the slot it has, or
    /// the first free one from where its number falls.
    private mutating func insert(_ number: Int, at position: Int) {
        let mask = slots.count - 1
        var index = home(number)
        while !slots[index].isFree, slots[index].number != number {
            index = (index + 1) & mask
        }
        slots[index] = Slot(number: number, position: position)
    }

    /// Forgets the receipt at `position` in the ring: frees its slot (none
    /// when a newer snapshot of the same receipt took it over), moving the
    /// slots after it back so that each stays reachable from where its
    /// number falls.
    private mutating func forget(at position: Int) {
        let forgotten = ring[position]
        if forgotten.figures.task.number != forgotten.receipt.number {
            let task = forgotten.figures.task
            receiptsJoiningTask[task, default: 1] -= 1
            if receiptsJoiningTask[task] == 0 { receiptsJoiningTask[task] = nil }
        }
        let mask = slots.count - 1
        var hole = home(forgotten.receipt.number)
        while slots[hole].position != position {
            if slots[hole].isFree { return }
            hole = (hole + 1) & mask
        }
        var next = (hole + 1) & mask
        while !slots[next].isFree {
            // A slot moves back into the hole unless its number falls
            // after the hole, up to where it lies (round the end).
            let falls = home(slots[next].number)
            let staysAfterHole = hole <= next ? (hole < falls && falls <= next) : (hole < falls || falls <= next)
            if !staysAfterHole {
                slots[hole] = slots[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        slots[hole] = .free
    }

    /// The slot receipt `number` falls on: the top bits of its product
    /// with 2^64 over the golden ratio.
    private func home(_ number: Int) -> Int {
        Int(truncatingIfNeeded: (UInt64(truncatingIfNeeded: number) &* 0x9E37_79B9_7F4A_7C15) >> UInt64(shift))
    }

    /// Doubles the table (16 slots at first) and puts every kept receipt
    /// in it again.
    private mutating func grow() {
        slots = Array(repeating: .free, count: max(16, slots.count * 2))
        shift = 64 - slots.count.trailingZeroBitCount
        for position in ring.indices { insert(ring[position].receipt.number, at: position) }
    }
}
