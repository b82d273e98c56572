#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a pthread mutex: the only way to it is `withLock`.
///
/// It does what `Synchronization.Mutex` does, with a lock that
/// ThreadSanitizer sees: on Linux, TSan does not model `Mutex`'s futex, so
/// every access it guards reads as a data race and the real races drown in
/// them (swift-nio keeps `NIOLockedValueBox` on pthreads for the same
/// reason).
public final class Locked<Value>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Read and written only with `mutex` held.
    @usableFromInline var value: Value

    public init(_ value: Value) {
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
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
