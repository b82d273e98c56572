#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread mutex with a condition variable, for a thread that waits for
/// another to change what the mutex guards. Timed waits read the monotonic
/// clock, so a change of the wall clock neither stretches nor cuts them.
///
/// It is `@unchecked Sendable` because it is the primitive the others are
/// built on: all it holds is a pthread mutex and condition, behind pointers
/// the compiler cannot see are made to be shared between threads, and it
/// guards no value of its own (`Monitor` does, through it).
public final class Condition: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        #if canImport(Glibc)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        #else
        pthread_cond_init(condition, nil)
        #endif
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }

    public func unlock() { pthread_mutex_unlock(mutex) }

    /// Wakes every waiter. Call it with the lock held.
    public func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits until woken. Call it with the lock held; it is held again on
    /// return.
    public func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits until woken or `deadline` passes: false when the deadline
    /// passed. Call it with the lock held; it is held again on return.
    public func wait(until deadline: Deadline) -> Bool {
        #if canImport(Glibc)
        var time = deadline.time
        return pthread_cond_timedwait(condition, mutex, &time) != ETIMEDOUT
        #else
        let left = deadline.secondsLeft
        guard left > 0 else { return false }
        var relative = timespec(tv_sec: Int(left), tv_nsec: Int((left - left.rounded(.down)) * 1e9))
        return pthread_cond_timedwait_relative_np(condition, mutex, &relative) != ETIMEDOUT
        #endif
    }

    /// A point on the monotonic clock.
    public struct Deadline: Sendable {
        fileprivate let time: timespec

        /// `seconds` from now: a negative or zero count is now, one too
        /// large for the clock is the clock's end.
        public init(secondsFromNow seconds: Double) {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let whole = seconds > 0 ? seconds.rounded(.down) : 0
            guard whole < Double(Int.max - now.tv_sec - 1) else {
                time = timespec(tv_sec: .max, tv_nsec: 999_999_999)
                return
            }
            var nanoseconds = now.tv_nsec + Int(seconds > 0 ? (seconds - whole) * 1e9 : 0)
            var wholeSeconds = now.tv_sec + Int(whole)
            if nanoseconds >= 1_000_000_000 {
                nanoseconds -= 1_000_000_000
                wholeSeconds += 1
            }
            time = timespec(tv_sec: wholeSeconds, tv_nsec: nanoseconds)
        }

        fileprivate var secondsLeft: Double {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            return Double(time.tv_sec - now.tv_sec) + Double(time.tv_nsec - now.tv_nsec) / 1e9
        }
    }
}
