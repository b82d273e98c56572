/// Tasks waiting to run: higher priority first; within a priority, tasks
/// that ran before (a retry whose wait has ended) first in the order they
/// came back, then the others first-in-first-out or last-in-first-out.
/// Entries are removed lazily: an entry whose generation is no longer its
/// task's (the task started, was cancelled, suspended or re-prioritized) is
/// skipped when it comes up.
struct RunQueue: Sendable {
    private struct Entry: Sendable {
        let task: TaskID
        let generation: Int
    }

    /// One priority's waiting tasks, as a queue with a moving head.
    private struct Lane: Sendable {
        var entries: [Entry] = []
        var head = 0

        mutating func append(_ entry: Entry) { entries.append(entry) }

        /// The entry at the head (`last` false) or the tail, removed.
        mutating func take(last: Bool) -> Entry? {
            guard head < entries.count else { return nil }
            let entry: Entry
            if last {
                entry = entries.removeLast()
            } else {
                entry = entries[head]
                head += 1
            }
            if head == entries.count {
                entries.removeAll(keepingCapacity: true)
                head = 0
            }
            return entry
        }
    }

    private var lanes = Array(repeating: Lane(), count: Priority.allCases.count)
    private var returning = Array(repeating: Lane(), count: Priority.allCases.count)

    /// Queues `task`; `ranBefore` puts it before every task of its priority
    /// that never started.
    mutating func enqueue(_ task: TaskID, priority: Priority, generation: Int, ranBefore: Bool = false) {
        let entry = Entry(task: task, generation: generation)
        if ranBefore {
            returning[priority.rank].append(entry)
        } else {
            lanes[priority.rank].append(entry)
        }
    }

    /// The next entry for which `isCurrent(task, generation)` holds, removed
    /// from the queue with every stale entry before it.
    mutating func next(_ prioritization: Prioritization, isCurrent: (TaskID, Int) -> Bool) -> TaskID? {
        for rank in lanes.indices {
            while let entry = returning[rank].take(last: false) {
                if isCurrent(entry.task, entry.generation) { return entry.task }
            }
            while let entry = lanes[rank].take(last: prioritization == .lifo) {
                if isCurrent(entry.task, entry.generation) { return entry.task }
            }
        }
        return nil
    }

    mutating func removeAll() {
        lanes = Array(repeating: Lane(), count: Priority.allCases.count)
        returning = lanes
    }
}
