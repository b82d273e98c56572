import Courier
import Locking

/// Time that moves only when told to, for tests: `advance(by:)` runs every
/// timer that falls due, in the order of their deadlines (timers due at the
/// same moment in the order they were scheduled), with `now` set to each
/// one's deadline while it runs. Timers scheduled by a running action are
/// run too when they fall due within the same advance.
public final class ManualIndicatorScheduler: IndicatorScheduler {
    private struct Entry {
        var deadline: Double
        var sequence: UInt64
        var action: @Sendable () -> Void
    }

    private struct State {
        var now: Double
        var nextSequence: UInt64 = 0
        // Unordered; the earliest is searched for on each step.
        var entries: [UInt64: Entry] = [:]
    }

    private let state: Locked<State>

    public init(now: Double = 0) {
        state = Locked(State(now: now))
    }

    public var now: Double { state.withLock { $0.now } }

    /// Timers scheduled and neither run nor cancelled.
    public var pendingCount: Int { state.withLock { $0.entries.count } }

    public func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> any IndicatorTimer {
        state.withLock { state in
            let sequence = state.nextSequence
            state.nextSequence += 1
            state.entries[sequence] = Entry(deadline: state.now + max(0, seconds), sequence: sequence, action: action)
            return Timer(scheduler: self, sequence: sequence)
        }
    }

    /// Moves time forward by `seconds`, running the timers that fall due.
    /// Actions run without the scheduler's lock held.
    public func advance(by seconds: Double) {
        let target = state.withLock { $0.now + max(0, seconds) }
        while let action = popDue(before: target) {
            action()
        }
        state.withLock { $0.now = max($0.now, target) }
    }

    private func popDue(before target: Double) -> (@Sendable () -> Void)? {
        state.withLock { state in
            let due = state.entries.values.filter { $0.deadline <= target }
            guard let next = due.min(by: { ($0.deadline, $0.sequence) < ($1.deadline, $1.sequence) }) else {
                return nil
            }
            state.entries[next.sequence] = nil
            state.now = max(state.now, next.deadline)
            return next.action
        }
    }

    fileprivate func cancel(_ sequence: UInt64) {
        _ = state.withLock { $0.entries.removeValue(forKey: sequence) }
    }

    private struct Timer: IndicatorTimer {
        let scheduler: ManualIndicatorScheduler
        let sequence: UInt64

        func cancel() { scheduler.cancel(sequence) }
    }
}
