#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a pthread mutex: the only way to it is `withLock`.
///
/// It has `Synchronization.Mutex`'s API and the same rules, which the
/// compiler checks at every use: the value goes in as `sending`, the body
/// gets it `inout sending` and gives back a `sending` result, so nothing
/// non-Sendable that the lock guards escapes it, and nothing from outside
/// the lock is stored in it while still in use outside. It may therefore
/// guard a value that is not `Sendable` (a hash being fed, a database
/// connection), and is `Sendable` itself whatever it guards.
///
/// It is built on a pthread mutex instead of `Mutex` because on Linux
/// ThreadSanitizer does not model `Mutex`'s futex: every access a contended
/// `Mutex` guards reads as a data race, and the real races drown in them
/// (swift-nio keeps `NIOLockedValueBox` on pthreads for the same reason).
/// That is why it stays `@unchecked Sendable`, as `Mutex` itself is: the
/// compiler cannot see that `mutex` guards `value`; `withLock`, the one
/// place that reaches `value`, takes the lock around every access.
public final class Locked<Value>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Read and written only with `mutex` held, in `withLock`.
    @usableFromInline var value: Value

    public init(_ value: sending Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock. Inlinable, so each
    /// caller gets a copy made for its own value type and closure.
    @inlinable
    public func withLock<Result, Failure: Error>(
        _ body: (inout sending Value) throws(Failure) -> sending Result
    ) throws(Failure) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
