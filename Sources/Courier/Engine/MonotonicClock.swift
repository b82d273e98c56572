/// Seconds on the monotonic clock, for durations, deadlines and rates, as
/// the scheduler's values hold them.
///
/// It is Swift's `SuspendingClock`, which reads `CLOCK_MONOTONIC` on Linux:
/// the clock that libcurl's timeouts, Dispatch's timers (which serve the
/// scheduler's wake-ups) and `Condition`'s timed waits run on.
/// `ContinuousClock` reads `CLOCK_BOOTTIME`, which also counts time the
/// machine spent asleep, so its moments would not match those timers'.
enum MonotonicClock {
    private static let clock = SuspendingClock()
    /// The clock's zero, so `now()` reads as `CLOCK_MONOTONIC` does.
    private static let epoch = clock.systemEpoch

    static func now() -> Double {
        let elapsed = epoch.duration(to: clock.now).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18
    }
}
