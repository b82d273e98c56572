/// The transfer engine's rate limits: a `RateLimiter` over its transfers,
/// on the monotonic clock. The engine changes it between turns of libcurl;
/// transfers ask it, from their write callbacks, whether a piece of body
/// may arrive now. Confined to the engine's thread.
final class Throttle {
    /// Seconds of a monotonic clock: `MonotonicClock.now`, or a test's.
    private let clock: () -> Double
    private var limiter: RateLimiter<ObjectIdentifier>

    init(clock: @escaping () -> Double = MonotonicClock.now) {
        self.clock = clock
        limiter = RateLimiter(now: clock())
    }

    /// A transfer that begins, at its own rate, and taking no share while
    /// the client has it suspended.
    func add(_ transfer: Transfer) {
        let now = clock()
        limiter.add(ObjectIdentifier(transfer), rate: transfer.maxRate, now: now)
        if transfer.isSuspended { limiter.suspend(ObjectIdentifier(transfer), now: now) }
    }

    func remove(_ transfer: Transfer) {
        limiter.remove(ObjectIdentifier(transfer))
    }

    func setRate(_ rate: Int64?, of transfer: Transfer) {
        limiter.setRate(rate, of: ObjectIdentifier(transfer), now: clock())
    }

    func setTotalRate(_ rate: Int64?) {
        limiter.setTotalRate(rate, now: clock())
    }

    func suspend(_ transfer: Transfer) {
        limiter.suspend(ObjectIdentifier(transfer), now: clock())
    }

    func resume(_ transfer: Transfer) {
        limiter.resume(ObjectIdentifier(transfer), now: clock())
    }

    /// Whether `transfer` may take `bytes` of body now; when not, it waits
    /// (its write callback pauses it) until `refill` names it. Costs one
    /// test while no limit is set.
    func admit(_ transfer: Transfer, bytes: Int) -> Bool {
        guard limiter.isLimiting else { return true }
        return limiter.admit(ObjectIdentifier(transfer), bytes: bytes)
    }

    /// Hands out the credit due now; the waiting transfers that may go on.
    func refill() -> [ObjectIdentifier] {
        guard limiter.isEngaged else { return [] }
        return limiter.refill(now: clock())
    }

    /// Bytes `transfer` may take before it waits (below zero: what it
    /// owes); nil when it is not counted.
    func credit(of transfer: Transfer) -> Double? {
        limiter.credit(of: ObjectIdentifier(transfer))
    }

    /// Milliseconds until the next refill is due, while a transfer waits.
    var millisecondsToRefill: Int? {
        limiter.nextRefill.map { Int((($0 - clock()) * 1000).rounded(.up)) }
    }
}

@available(*, unavailable) extension Throttle: Sendable {}
