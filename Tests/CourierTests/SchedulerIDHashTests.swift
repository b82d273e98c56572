import Testing

@testable import Courier

/// The scheduler's ids are hashed by `NumberHash`: equal ids land alike,
/// and ids issued in order spread over a table's buckets and move with its
/// seed, so tables of thousands of them stay quick to fill and to copy.
@Suite struct SchedulerIDHashTests {
    @Test func equalIdsHashAlikeUnderEverySeed() {
        for seed in [0, 1, -1, 0x5bd1_e995, Int.max] {
            #expect(TaskID(42)._rawHashValue(seed: seed) == TaskID(42)._rawHashValue(seed: seed))
            #expect(ReceiptID(42)._rawHashValue(seed: seed) == ReceiptID(42)._rawHashValue(seed: seed))
            let transfer = TransferID(task: TaskID(7), attempt: 2)
            #expect(transfer._rawHashValue(seed: seed) == TransferID(task: TaskID(7), attempt: 2)._rawHashValue(seed: seed))
        }
    }

    /// Numbers issued in order fill the low bits (a table's bucket) about
    /// evenly: 4,096 ids over 256 buckets put 16 in each on average, and
    /// none gets more than twice that or stays empty.
    @Test func idsInOrderSpreadOverTheBuckets() {
        for seed in [0, 0x7f4a_7c15] {
            var buckets = [Int](repeating: 0, count: 256)
            for number in 1...4096 { buckets[TaskID(number)._rawHashValue(seed: seed) & 255] += 1 }
            #expect(buckets.min()! > 0 && buckets.max()! <= 32)
        }
    }

    /// Another table's seed puts the same ids in other buckets, so ids read
    /// out of one table in its order do not pile up in another.
    @Test func theSeedMovesAnId() {
        let moved = (1...1000).filter { NumberHash.mix($0, seed: 1) & 255 != NumberHash.mix($0, seed: 2) & 255 }
        #expect(moved.count > 900)
    }

    /// Two attempts of a task, and the same attempt of two tasks, are
    /// different transfers and hash apart.
    @Test func aTransferHashesByTaskAndAttempt() {
        let first = TransferID(task: TaskID(3), attempt: 0)
        #expect(first._rawHashValue(seed: 0) != TransferID(task: TaskID(3), attempt: 1)._rawHashValue(seed: 0))
        #expect(first._rawHashValue(seed: 0) != TransferID(task: TaskID(4), attempt: 0)._rawHashValue(seed: 0))
    }

    /// Tables keyed by the ids find every one of thousands, and none that
    /// was removed.
    @Test func tablesOfIdsFindWhatTheyHold() {
        var tasks: [TaskID: Int] = [:]
        var transfers: Set<TransferID> = []
        for number in 1...5000 {
            tasks[TaskID(number)] = number
            transfers.insert(TransferID(task: TaskID(number), attempt: number % 3))
        }
        for number in stride(from: 2, through: 5000, by: 2) { tasks[TaskID(number)] = nil }
        #expect((1...5000).allSatisfy { tasks[TaskID($0)] == ($0 % 2 == 1 ? $0 : nil) })
        #expect((1...5000).allSatisfy { transfers.contains(TransferID(task: TaskID($0), attempt: $0 % 3)) })
        #expect(!transfers.contains(TransferID(task: TaskID(1), attempt: 0)))
        var copy: [TaskID: Int] = [:]
        for (id, number) in tasks { copy[id] = number }
        #expect(copy == tasks)
    }
}
