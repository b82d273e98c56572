import Locking

/// One timer for the earliest moment asked of it, on the monotonic clock
/// (`MonotonicClock`): asking for a later moment while an earlier one is set
/// changes nothing, an earlier one replaces it. Its action runs on the
/// scheduler's queue once the moment has come.
final class WakeTimer: Sendable {
    private struct Armed {
        var moment: Double
        var timer: any IndicatorTimer
        /// Tells the set timer's firing from a replaced one's that had
        /// already started.
        var token: Int
    }

    private let scheduler: any IndicatorScheduler
    private let armed = Locked<(current: Armed?, tokens: Int)>((nil, 0))

    init(scheduler: any IndicatorScheduler) {
        self.scheduler = scheduler
    }

    /// Runs `action` once the clock reaches `moment`, unless an earlier
    /// moment is set (whose action runs instead, then).
    func wake(at moment: Double, _ action: @escaping @Sendable () -> Void) {
        armed.withLock { armed in
            if let current = armed.current, current.moment <= moment { return }
            armed.current?.timer.cancel()
            armed.tokens += 1
            let token = armed.tokens
            let timer = scheduler.schedule(after: moment - MonotonicClock.now()) { [self] in
                let due = self.armed.withLock { armed in
                    guard armed.current?.token == token else { return false }
                    armed.current = nil
                    return true
                }
                if due { action() }
            }
            armed.current = Armed(moment: moment, timer: timer, token: token)
        }
    }

    /// Nothing set runs.
    func cancel() {
        armed.withLock { armed in
            armed.current?.timer.cancel()
            armed.current = nil
        }
    }
}
