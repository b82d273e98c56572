import Dispatch

/// Real time: timers run on a private serial queue. A delay that is not
/// finite never fires.
public struct DispatchIndicatorScheduler: IndicatorScheduler {
    private let queue: DispatchQueue

    public init(label: String = "courier.indicator") {
        queue = DispatchQueue(label: label)
    }

    public var now: Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    public func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> any IndicatorTimer {
        let item = DispatchWorkItem(block: action)
        if seconds.isFinite {
            queue.asyncAfter(deadline: .now() + max(0, seconds), execute: item)
        }
        return Timer(item: item)
    }

    private struct Timer: IndicatorTimer, @unchecked Sendable {
        // DispatchWorkItem is thread-safe; it is not marked Sendable.
        let item: DispatchWorkItem

        func cancel() { item.cancel() }
    }
}
