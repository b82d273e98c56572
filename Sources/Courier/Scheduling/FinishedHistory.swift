/// The final progress of the most recent finished receipts, so `progress`
/// can still answer for them; the oldest are forgotten past `limit`.
///
/// Every `download` adds a receipt, and once the history is full forgets
/// one, so both are on every download's path: the receipts are kept in the
/// order they finished, in a ring of at most `limit`, and found by where
/// they lie in it (receipt ids hash without SipHash, see `NumberHash`).
struct FinishedHistory: Sendable {
    let limit: Int
    /// The receipts kept, oldest first from `oldest`, round the end once
    /// the ring holds `limit`.
    private var ring: [ReceiptProgress] = []
    private var oldest = 0
    /// Where each kept receipt's newest snapshot lies in `ring`.
    private var positions: [ReceiptID: Int] = [:]
    /// How many receipts kept belong to each task, counting only those
    /// whose number is not their task's: a task shares its number with
    /// the receipt it was made for (`DownloadScheduler.download`), which
    /// `hasTask` finds by that number, so most tasks (every hit's) need no
    /// entry here.
    private var receiptsJoiningTask: [TaskID: Int] = [:]

    init(limit: Int) { self.limit = limit }

    subscript(receipt: ReceiptID) -> ReceiptProgress? { positions[receipt].map { ring[$0] } }

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
            ring.append(snapshot)
        } else {
            position = oldest
            forget(at: position)
            ring[position] = snapshot
            oldest = oldest + 1 == limit ? 0 : oldest + 1
        }
        positions[snapshot.receipt] = position
        if snapshot.figures.task.number != snapshot.receipt.number {
            receiptsJoiningTask[snapshot.figures.task, default: 0] += 1
        }
    }

    /// Forgets the receipt at `position` in the ring, unless a newer
    /// snapshot of it lies elsewhere.
    private mutating func forget(at position: Int) {
        let forgotten = ring[position]
        if forgotten.figures.task.number != forgotten.receipt.number {
            let task = forgotten.figures.task
            receiptsJoiningTask[task, default: 1] -= 1
            if receiptsJoiningTask[task] == 0 { receiptsJoiningTask[task] = nil }
        }
        if positions[forgotten.receipt] == position { positions[forgotten.receipt] = nil }
    }
}
