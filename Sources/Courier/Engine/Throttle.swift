/// The transfer engine's rate limits: a `RateLimiter` over its transfers,
/// on the monotonic clock. The engine changes it between turns of libcurl;
/// transfers ask it, from their write callbacks, whether a piece of body
/// may arrive now. Confined to the engine's thread.
///
/// While no limit is set, a transfer that begins is not counted at all: it
/// costs no clock read and no look-up when it begins, takes body or ends.
/// Setting a limit counts the transfers that run from then on, which is why
/// the engine names them.
final class Throttle {
    /// Seconds of a monotonic clock: `MonotonicClock.now`, or a test's.
    private let clock: () -> Double
    /// Not checked for exclusive access at run time: it changes on the
    /// engine's thread alone, and nothing its changes call reaches it.
    @exclusivity(unchecked) private var limiter: RateLimiter<TransferID>

    init(clock: @escaping () -> Double = MonotonicClock.now) {
        self.clock = clock
        limiter = RateLimiter(now: clock())
    }

    /// A transfer that begins, at its own rate, and taking no share while
    /// the client has it suspended. Not counted while no limit applies to it.
    func add(_ transfer: Transfer) {
        guard limiter.isLimiting || transfer.maxRate != nil else { return }
        count(transfer, now: clock())
    }

    func remove(_ transfer: Transfer) {
        guard limiter.isCounting else { return }
        limiter.remove(transfer.id)
    }

    /// Changes `transfer`'s own rate; one that `isRunning` uncounted is
    /// counted from now on.
    func setRate(_ rate: Int64?, of transfer: Transfer, isRunning: Bool) {
        let key = transfer.id
        if limiter.counts(key) {
            limiter.setRate(rate, of: key, now: clock())
        } else if isRunning, rate != nil || limiter.totalRate != nil {
            count(transfer, now: clock())
        }
    }

    /// Changes the rate of all transfers together; the `running` ones not
    /// counted yet are counted from now on.
    func setTotalRate(_ rate: Int64?, running: some Sequence<Transfer>) {
        let now = clock()
        limiter.setTotalRate(rate, now: now)
        guard limiter.totalRate != nil else { return }
        for transfer in running where !limiter.counts(transfer.id) { count(transfer, now: now) }
    }

    func suspend(_ transfer: Transfer) {
        guard limiter.counts(transfer.id) else { return }
        limiter.suspend(transfer.id, now: clock())
    }

    func resume(_ transfer: Transfer) {
        guard limiter.counts(transfer.id) else { return }
        limiter.resume(transfer.id, now: clock())
    }

    /// Whether `transfer` may take `bytes` of body now; when not, it waits
    /// (its write callback pauses it) until `refill` names it. Costs one
    /// test while no limit is set.
    func admit(_ transfer: Transfer, bytes: Int) -> Bool {
        guard limiter.isLimiting else { return true }
        return limiter.admit(transfer.id, bytes: bytes)
    }

    /// Hands out the credit due now; the waiting transfers that may go on.
    func refill() -> [TransferID] {
        guard limiter.isEngaged else { return [] }
        return limiter.refill(now: clock())
    }

    /// Bytes `transfer` may take before it waits (below zero: what it
    /// owes); nil when it is not counted.
    func credit(of transfer: Transfer) -> Double? {
        limiter.credit(of: transfer.id)
    }

    /// Milliseconds until the next refill is due, while a transfer waits.
    var millisecondsToRefill: Int? {
        limiter.nextRefill.map { Int((($0 - clock()) * 1000).rounded(.up)) }
    }

    private func count(_ transfer: Transfer, now: Double) {
        let key = transfer.id
        limiter.add(key, rate: transfer.maxRate, now: now)
        if transfer.isSuspended { limiter.suspend(key, now: now) }
    }
}

@available(*, unavailable) extension Throttle: Sendable {}
