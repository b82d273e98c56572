import Testing

@testable import Courier

/// `MonotonicClock` reads the clock that `SuspendingClock` reads on Linux
/// (`CLOCK_MONOTONIC`), in seconds from its zero.
@Suite struct MonotonicClockTests {
    private static func suspendingSeconds() -> Double {
        let clock = SuspendingClock()
        let elapsed = clock.systemEpoch.duration(to: clock.now).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18
    }

    #if os(Linux)
    @Test func aReadingFallsBetweenTwoOfSuspendingClock() {
        let before = Self.suspendingSeconds()
        let reading = MonotonicClock.now()
        let after = Self.suspendingSeconds()
        // A microsecond either way for the conversions to seconds.
        #expect(before - 1e-6 <= reading && reading <= after + 1e-6)
    }
    #endif

    @Test func readingsNeverGoBack() {
        let readings = (0..<10_000).map { _ in MonotonicClock.now() }
        #expect(zip(readings, readings.dropFirst()).allSatisfy { $0 <= $1 })
    }
}
