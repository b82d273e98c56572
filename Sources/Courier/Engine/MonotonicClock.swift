#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Seconds on the monotonic clock, for durations, deadlines and rates, as
/// the scheduler's values hold them.
///
/// On Linux it is `CLOCK_MONOTONIC`: the clock that libcurl's timeouts,
/// Dispatch's timers (which serve the scheduler's wake-ups) and
/// `Condition`'s timed waits run on, and the one Swift's `SuspendingClock`
/// reads there. `ContinuousClock` reads `CLOCK_BOOTTIME`, which also counts
/// time the machine spent asleep, so its moments would not match those
/// timers'. The engine reads it for every step of a download: read
/// directly, a reading is the system's and two multiplications, where the
/// `SuspendingClock` instant's duration took some 200 instructions of
/// 128-bit arithmetic on top. Elsewhere it is `SuspendingClock`.
enum MonotonicClock {
    #if os(Linux)
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
    }
    #else
    private static let clock = SuspendingClock()
    /// The clock's zero, so `now()` reads as the system's clock does.
    private static let epoch = clock.systemEpoch

    static func now() -> Double {
        let elapsed = epoch.duration(to: clock.now).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18
    }
    #endif
}
