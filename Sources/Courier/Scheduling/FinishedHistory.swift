/// The final progress of the most recent finished receipts, so `progress`
/// can still answer for them; the oldest are forgotten past `limit`.
struct FinishedHistory: Sendable {
    let limit: Int
    private var entries: [ReceiptID: ReceiptProgress] = [:]
    private var order: [ReceiptID] = []
    private var head = 0
    private var receiptsPerTask: [TaskID: Int] = [:]

    init(limit: Int) { self.limit = limit }

    subscript(receipt: ReceiptID) -> ReceiptProgress? { entries[receipt] }

    func hasTask(_ task: TaskID) -> Bool { receiptsPerTask[task] != nil }

    mutating func add(_ snapshot: ReceiptProgress) {
        let receipt = snapshot.receipt
        entries[receipt] = snapshot
        order.append(receipt)
        receiptsPerTask[snapshot.figures.task, default: 0] += 1
        while order.count - head > limit {
            let oldest = order[head]
            head += 1
            if let task = entries.removeValue(forKey: oldest)?.figures.task {
                receiptsPerTask[task, default: 1] -= 1
                if receiptsPerTask[task] == 0 { receiptsPerTask[task] = nil }
            }
        }
        if head > 4096, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
