/// Tasks waiting to run: higher priority first, then first-in-first-out or
/// last-in-first-out within a priority. Entries are removed lazily: an entry
/// whose generation is no longer its task's (the task started, was
/// cancelled, suspended or re-prioritized) is skipped when it comes up.
struct RunQueue: Sendable {
    private struct Entry: Sendable {
        let task: String
        let generation: Int
    }

    private var lanes: [[Entry]] = Array(repeating: [], count: Priority.allCases.count)
    private var heads: [Int] = Array(repeating: 0, count: Priority.allCases.count)

    mutating func enqueue(_ task: String, priority: Priority, generation: Int) {
        lanes[priority.rank].append(Entry(task: task, generation: generation))
    }

    /// The next entry for which `isCurrent(task, generation)` holds, removed
    /// from the queue with every stale entry before it.
    mutating func next(_ prioritization: Prioritization, isCurrent: (String, Int) -> Bool) -> String? {
        for lane in lanes.indices {
            while heads[lane] < lanes[lane].count {
                let entry: Entry
                switch prioritization {
                case .fifo:
                    entry = lanes[lane][heads[lane]]
                    heads[lane] += 1
                case .lifo:
                    entry = lanes[lane].removeLast()
                }
                if heads[lane] == lanes[lane].count {
                    lanes[lane].removeAll(keepingCapacity: true)
                    heads[lane] = 0
                }
                if isCurrent(entry.task, entry.generation) { return entry.task }
            }
        }
        return nil
    }

    mutating func removeAll() {
        for lane in lanes.indices {
            lanes[lane].removeAll()
            heads[lane] = 0
        }
    }
}
