import Curl
import Dispatch
import Testing

/// The waker other threads hold instead of the multi handle: it ends a
/// poll from another thread, and does nothing once the handle is gone.
@Suite(.timeLimit(.minutes(1)))
struct MultiHandleWakerTests {
    @Test func aWakerMadeBeforeItsHandleEndsAPollFromAnotherThread() {
        CurlLibrary.initialize()
        // Given a waker handed out before the multi handle exists
        let waker = MultiHandle.Waker()
        waker.wakeup()
        let multi = MultiHandle(waker: waker)
        defer { multi.cleanup() }

        // When another thread wakes it while it polls for up to 30 s
        let polling = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            polling.wait()
            waker.wakeup()
        }
        let began = DispatchTime.now()
        polling.signal()
        multi.poll(timeoutMilliseconds: 30_000)

        // Then the poll ends long before its timeout
        let waited = Double(DispatchTime.now().uptimeNanoseconds - began.uptimeNanoseconds) / 1e9
        #expect(waited < 10, "the poll waited \(waited) s")
    }

    @Test func aWakerOutlivesItsHandleAndThenWakesNothing() {
        CurlLibrary.initialize()
        // Given a waker whose multi handle was cleaned up
        let multi = MultiHandle()
        let waker = multi.waker
        multi.cleanup()

        // When it is woken, from this thread and others at once, then the
        // process goes on (a wake-up of a freed handle would crash it
        // or, under AddressSanitizer, be reported)
        waker.wakeup()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in waker.wakeup() }
    }
}
