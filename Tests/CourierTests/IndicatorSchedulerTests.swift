import Synchronization
import Testing

@testable import Courier
import CourierTestSupport

@Suite(.timeLimit(.minutes(1)))
struct IndicatorSchedulerTests {
    @Test func manualSchedulerRunsDueTimersInDeadlineOrder() {
        let scheduler = ManualIndicatorScheduler()
        let ran = Mutex<[String]>([])
        func record(_ name: String) -> @Sendable () -> Void {
            { ran.withLock { $0.append("\(name)@\(scheduler.now)") } }
        }

        _ = scheduler.schedule(after: 2, record("c"))
        _ = scheduler.schedule(after: 1, record("a"))
        _ = scheduler.schedule(after: 1, record("b"))
        let cancelled = scheduler.schedule(after: 0.5, record("x"))
        cancelled.cancel()

        scheduler.advance(by: 1.5)
        #expect(ran.withLock { $0 } == ["a@1.0", "b@1.0"])
        #expect(scheduler.now == 1.5)
        scheduler.advance(by: 0.5)
        #expect(ran.withLock { $0 } == ["a@1.0", "b@1.0", "c@2.0"])
        #expect(scheduler.pendingCount == 0)
    }

    @Test func manualSchedulerRunsTimersScheduledByATimerWithinTheSameAdvance() {
        let scheduler = ManualIndicatorScheduler()
        let ran = Mutex(0)
        _ = scheduler.schedule(after: 1) {
            _ = scheduler.schedule(after: 1) { ran.withLock { $0 += 1 } }
        }

        scheduler.advance(by: 1.5)
        #expect(ran.withLock { $0 } == 0)
        scheduler.advance(by: 0.5)
        #expect(ran.withLock { $0 } == 1)
    }

    @Test func dispatchSchedulerRunsTimersAndSkipsCancelledOnes() async {
        let scheduler = DispatchIndicatorScheduler()
        let ran = Mutex<[String]>([])

        let cancelled = scheduler.schedule(after: 0.1) { ran.withLock { $0.append("cancelled") } }
        cancelled.cancel()
        // The queue is serial and ordered by deadline: once the later timer
        // has run, the cancelled one would have run before it.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            _ = scheduler.schedule(after: 0.15) {
                ran.withLock { $0.append("ran") }
                continuation.resume()
            }
        }

        #expect(ran.withLock { $0 } == ["ran"])
    }
}
