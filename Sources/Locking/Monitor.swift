/// A value guarded by a mutex, with a condition variable for threads that
/// wait for it to change: the only way to the value is through `withLock`
/// and `wait(until:then:)`, and every change wakes whoever waits.
///
/// Its closures get the value as `Locked`'s do, `inout sending` (the
/// predicates too), and give back `sending` results, so the compiler checks
/// that nothing the lock guards escapes it and that it may guard a value
/// that is not `Sendable`. It is `@unchecked Sendable` for `Locked`'s
/// reason: the compiler cannot see that `condition`'s pthread mutex guards
/// `value`, and there is no `Mutex` with a condition variable to wait on.
public final class Monitor<Value>: @unchecked Sendable {
    @usableFromInline let condition = Condition()
    /// Read and written only with `condition`'s lock held.
    @usableFromInline var value: Value

    public init(_ value: sending Value) {
        self.value = value
    }

    /// Runs `body` with the value, holding the lock, then wakes the waiters
    /// (a broadcast nobody waits for costs no system call) unless `wake` is
    /// false: a change no waiter waits for should not wake one to look.
    @inlinable
    public func withLock<Result>(wake: Bool = true, _ body: (inout sending Value) -> sending Result) -> sending Result {
        condition.lock()
        defer {
            if wake { condition.broadcast() }
            condition.unlock()
        }
        return body(&value)
    }

    /// Runs `body` with the value, holding the lock, and wakes the waiters
    /// when `wakes` says its result is a change they wait for.
    @inlinable @discardableResult
    public func withLock<Result>(
        wakingIf wakes: (Result) -> Bool, _ body: (inout sending Value) -> sending Result
    ) -> sending Result {
        condition.lock()
        defer { condition.unlock() }
        let result = body(&value)
        if wakes(result) { condition.broadcast() }
        return result
    }

    /// Waits until `ready` holds for the value, then runs `body` with it
    /// before letting the lock go, and wakes the other waiters unless `wake`
    /// is false.
    @inlinable
    public func wait<Result>(
        until ready: (inout sending Value) -> Bool, wake: Bool = true, then body: (inout sending Value) -> sending Result
    ) -> sending Result {
        condition.lock()
        defer {
            if wake { condition.broadcast() }
            condition.unlock()
        }
        while !ready(&value) { condition.wait() }
        return body(&value)
    }

    /// `wait(until:wake:then:)` that gives up at `deadline`: nil when the
    /// deadline passed first (and `body` did not run).
    @inlinable
    public func wait<Result>(
        until ready: (inout sending Value) -> Bool, deadline: Condition.Deadline, wake: Bool = true,
        then body: (inout sending Value) -> sending Result
    ) -> sending Result? {
        condition.lock()
        defer {
            if wake { condition.broadcast() }
            condition.unlock()
        }
        while !ready(&value) {
            if !condition.wait(until: deadline), !ready(&value) { return nil }
        }
        return body(&value)
    }
}
