import Dispatch
import Locking

/// Real time: timers run on a private serial queue. A delay that is not
/// finite never fires.
public struct DispatchIndicatorScheduler: IndicatorScheduler {
    private let queue: DispatchQueue

    public init(label: String = "courier.indicator") {
        queue = DispatchQueue(label: label)
    }

    public var now: Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    public func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> any IndicatorTimer {
        let timer = Timer()
        if seconds.isFinite {
            queue.asyncAfter(deadline: .now() + max(0, seconds)) {
                if !timer.cancelled.withLock({ $0 }) { action() }
            }
        }
        return timer
    }

    /// A scheduled action that does nothing once cancelled.
    private struct Timer: IndicatorTimer {
        let cancelled = Locked(false)

        func cancel() { cancelled.withLock { $0 = true } }
    }
}
