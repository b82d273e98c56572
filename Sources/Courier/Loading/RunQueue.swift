/// Tasks waiting to run: higher priority first, then first-in-first-out or
/// last-in-first-out within a priority. Entries are removed lazily: a task
/// that left the queue (started, cancelled, suspended, re-prioritized) is
/// skipped when its entry comes up.
struct RunQueue {
    private struct Entry {
        let task: DownloadTask
        let generation: Int
    }

    private var lanes: [[Entry]] = Array(repeating: [], count: Priority.allCases.count)
    private var heads: [Int] = Array(repeating: 0, count: Priority.allCases.count)

    mutating func enqueue(_ task: DownloadTask) {
        task.queueGeneration += 1
        lanes[task.priority.rank].append(Entry(task: task, generation: task.queueGeneration))
    }

    /// The next task that may start, removed from the queue.
    mutating func next(_ prioritization: Prioritization) -> DownloadTask? {
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
                if entry.generation == entry.task.queueGeneration, entry.task.state == .queued, !entry.task.started {
                    entry.task.queueGeneration += 1
                    return entry.task
                }
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
