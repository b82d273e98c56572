import Testing

@testable import Courier

/// The history against a plain model: the last `limit` receipts
/// added, found by number, and the tasks they belong to.
@Suite(.timeLimit(.minutes(1))) struct FinishedHistoryTests {
    private struct Model {
        let limit: Int
        var kept: [ReceiptProgress] = []

        mutating func add(_ snapshot: ReceiptProgress) {
            kept.append(snapshot)
            if kept.count > limit { kept.removeFirst() }
        }

        subscript(receipt: ReceiptID) -> ReceiptProgress? { kept.last { $0.receipt == receipt } }

        func hasTask(_ task: TaskID) -> Bool { kept.contains { $0.figures.task == task } }
    }

    private static func snapshot(_ receipt: Int, task: Int, received: Int64 = 0) -> ReceiptProgress {
        ReceiptProgress(
            receipt: ReceiptID(receipt),
            figures: TaskProgress(task: TaskID(task), received: received, expected: nil, bytesPerSecond: 0), state: .finished)
    }

    @Test(arguments: [1, 3, 12, 100])
    func keepsTheLastReceiptsInAnyOrderOfFinishing(limit: Int) {
        var random = SplitMix(seed: 0x6869_7374 &+ UInt64(limit))
        var history = FinishedHistory(limit: limit)
        var model = Model(limit: limit)
        // Receipts issued in sequence finish mostly in turn, some late (a
        // long transfer), some joining an earlier task.
        var unfinished: [Int] = []
        var next = 1
        for step in 0..<3000 {
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                unfinished.append(next)
                next += Int.random(in: 0..<8, using: &random) == 0 ? 64 : 1
            }
            let index = Int.random(in: 0..<10, using: &random) == 0 ? Int.random(in: 0..<unfinished.count, using: &random) : 0
            let receipt = unfinished.remove(at: index)
            let task = Int.random(in: 0..<4, using: &random) == 0 ? max(1, receipt - Int.random(in: 1...5, using: &random)) : receipt
            let added = Self.snapshot(receipt, task: task, received: Int64(receipt))
            history.add(added)
            model.add(added)
            // Every receipt near the one added, now and then; else the one added.
            let probes = step % 16 == 0 ? max(1, receipt - 2 * limit - 70)...(receipt + 3) : receipt...receipt
            for probe in probes {
                #expect(history[ReceiptID(probe)] == model[ReceiptID(probe)], "receipt \(probe)")
                #expect(history.hasTask(TaskID(probe)) == model.hasTask(TaskID(probe)), "task \(probe)")
            }
        }
    }

    @Test func aFullHistoryOfReceiptsIssuedInSequenceForgetsEachInFewSteps() {
        // Given a history as large as the scheduler's, filled many times
        // over by receipts finishing in the order they were issued (a
        // burst of hits): were they laid side by side, forgetting the
        // oldest would walk all the others, some 10^9 steps in all
        var history = FinishedHistory(limit: 10_000)
        for number in 1...200_000 {
            history.add(Self.snapshot(number, task: number))
        }

        // Then it ends in time, with the last ten thousand kept
        #expect(history[ReceiptID(190_000)] == nil && history[ReceiptID(190_001)] != nil)
        #expect(history[ReceiptID(200_000)] != nil && history.hasTask(TaskID(195_000)) && !history.hasTask(TaskID(5)))
    }

    @Test func aReceiptAddedAgainIsFoundAsItsNewerSnapshot() {
        var history = FinishedHistory(limit: 3)
        history.add(Self.snapshot(1, task: 1, received: 10))
        history.add(Self.snapshot(1, task: 1, received: 20))
        #expect(history[ReceiptID(1)]?.figures.received == 20)
        history.add(Self.snapshot(2, task: 2))
        history.add(Self.snapshot(3, task: 3))
        // The older snapshot goes first, and takes nothing with it.
        #expect(history[ReceiptID(1)]?.figures.received == 20 && history.hasTask(TaskID(1)))
        history.add(Self.snapshot(4, task: 4))
        #expect(history[ReceiptID(1)] == nil && !history.hasTask(TaskID(1)) && history[ReceiptID(4)] != nil)
    }

    @Test func aLimitOfNoneKeepsNothing() {
        var history = FinishedHistory(limit: 0)
        history.add(Self.snapshot(1, task: 1))
        #expect(history[ReceiptID(1)] == nil && !history.hasTask(TaskID(1)))
    }
}
