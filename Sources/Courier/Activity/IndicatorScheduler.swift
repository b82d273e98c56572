/// The clock and timers of an `ActivityIndicator`, injected so that tests
/// can move time by hand (`ManualIndicatorScheduler`) while the server uses
/// real time (`DispatchIndicatorScheduler`).
public protocol IndicatorScheduler: Sendable {
    /// Seconds on a monotonic clock.
    var now: Double { get }

    /// Runs `action` once, `seconds` from now, unless the returned timer is
    /// cancelled first. Never runs `action` before returning, so it may be
    /// called while holding a lock that `action` takes.
    func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> any IndicatorTimer
}
