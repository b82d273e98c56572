import Curl
import Logging

/// libcurl's multi handle and every transfer on it: the one map of
/// transfers, by id, from the moment a transfer is made until it ends or is
/// stopped. Confined to the thread that makes it (the engine's thread),
/// which calls `turn()` and then `poll(until:)` over and over; other threads
/// reach it only through what that thread takes from its inbox, and wake it
/// with `waker`.
final class TransferEngine {
    /// Transfers made and not yet ended or stopped: those that wait to
    /// begin (while the partial store looks for a body they may continue),
    /// those that run, and those whose body file the body writer closes.
    /// Not checked for exclusive access at run time: it changes on this
    /// thread alone, and no transfer's callbacks reach it.
    @exclusivity(unchecked) private var transfers: [TransferID: Transfer] = [:]
    private let multi: MultiHandle
    private let throttle = Throttle()
    private let writer = BodyWriter()
    /// Hears, on the body writer's thread, that a transfer's file is closed:
    /// the engine's thread then calls `flushed(_:failure:checksum:)`.
    private let onFlushed: @Sendable (TransferID, TransferFailure?, UInt64) -> Void
    private let logger: Logger
    /// `stopAll` has run: the body writer's thread has ended.
    private var isStopped = false

    /// Makes the multi handle on the calling thread (libcurl's global
    /// set-up, OpenSSL's included, happens there), woken through `waker`.
    init(
        waker: MultiHandle.Waker = MultiHandle.Waker(), logger: Logger,
        flushed: @escaping @Sendable (TransferID, TransferFailure?, UInt64) -> Void
    ) {
        multi = MultiHandle(maxHostConnections: 0, maxTotalConnections: 0, waker: waker)
        self.logger = logger
        onFlushed = flushed
    }

    var waker: MultiHandle.Waker { multi.waker }

    /// Takes `transfer` in, without beginning it.
    func add(_ transfer: Transfer) {
        transfers[transfer.id] = transfer
    }

    /// No transfer waits to begin, runs, or has its file closed.
    var isIdle: Bool { transfers.isEmpty }

    /// The transfer `id` names, while it has not ended or been stopped.
    func transfer(_ id: TransferID) -> Transfer? { transfers[id] }

    /// Begins a transfer `add` took in: it begins paused, or not, and takes
    /// its share of the rate limits, or none, as it was told while it waited.
    func begin(_ id: TransferID) {
        guard let transfer = transfers[id], !transfer.hasBegun else { return }
        throttle.add(transfer)
        transfer.begin(on: multi, writer: writer, throttle: throttle)
    }

    /// Adds `transfer` and begins it.
    func start(_ transfer: Transfer) {
        add(transfer)
        begin(transfer.id)
    }

    /// Stops a transfer without reporting it; its body file goes (or stays
    /// in the partial store, when it may).
    func cancel(_ id: TransferID) {
        guard let transfer = transfers.removeValue(forKey: id) else { return }
        throttle.remove(transfer)
        if transfer.hasBegun {
            transfer.abandon(on: multi)
        }
    }

    func pause(_ id: TransferID) {
        guard let transfer = transfers[id] else { return }
        throttle.suspend(transfer)
        transfer.pause()
    }

    func resume(_ id: TransferID) {
        guard let transfer = transfers[id] else { return }
        throttle.resume(transfer)
        transfer.resume()
    }

    /// Changes a transfer's own rate, begun or not.
    func limit(_ id: TransferID, to maxRate: Int64?) {
        guard let transfer = transfers[id] else { return }
        transfer.maxRate = maxRate
        throttle.setRate(maxRate, of: transfer, isRunning: transfer.hasBegun)
    }

    /// Changes the rate of all transfers together (nil: none); running ones
    /// feel it at once.
    func limitTotal(to rate: Int64?) {
        throttle.setTotalRate(rate, running: transfers.values.filter(\.hasBegun))
    }

    /// The body writer has closed the transfer's file: the transfer ends.
    func flushed(_ id: TransferID, failure: TransferFailure?, checksum: UInt64) {
        guard let transfer = transfers.removeValue(forKey: id) else { return }
        // A limit set while its file closed may have counted it.
        throttle.remove(transfer)
        transfer.finish(writeFailure: failure, checksum: checksum)
    }

    /// Lets libcurl do the work that is ready, if any (a turn woken only by
    /// the inbox leaves it none), tells each transfer's observer of the
    /// bytes that arrived, and ends the transfers libcurl has finished.
    func turn() {
        for id in throttle.refill() { transfers[id]?.unthrottle() }
        multi.performIfDue()
        for transfer in transfers.values { transfer.reportData() }
        for (handle, code) in multi.completed() {
            guard let transfer = handle.delegate as? Transfer, transfers[transfer.id] === transfer else { continue }
            switch transfer.complete(code: code, on: multi) {
            case .redirected:
                break
            case .ended:
                transfers[transfer.id] = nil
                throttle.remove(transfer)
            case .flushing(let stream):
                throttle.remove(transfer)
                let (id, flushed) = (transfer.id, onFlushed)
                writer.close(stream) { failure, checksum in flushed(id, failure, checksum) }
            }
        }
    }

    /// Waits for libcurl's sockets, a wake-up, libcurl's or the rate
    /// limiter's next moment, or `deadline` (monotonic seconds), whichever
    /// comes first, and at most a second. When one of those moments has
    /// come already (libcurl's, for one, right after a transfer starts),
    /// it returns at once without asking the system, as the next turn has
    /// work either way: false then.
    @discardableResult
    func poll(until deadline: Double? = nil) -> Bool {
        var timeout = min(multi.timeoutMilliseconds ?? 1000, throttle.millisecondsToRefill ?? 1000, 1000)
        if let deadline, timeout > 0 { timeout = min(timeout, Int(((deadline - MonotonicClock.now()) * 1000).rounded(.up))) }
        guard timeout > 0 else { return false }
        multi.poll(timeoutMilliseconds: timeout)
        return true
    }

    /// Stops every transfer and waits up to `timeout` seconds for the body
    /// writer to finish what it was given.
    func stopAll(waiting timeout: Double) {
        guard !isStopped else { return }
        isStopped = true
        for id in Array(transfers.keys) { cancel(id) }
        writer.stop(waiting: timeout)
    }

    /// Stops every transfer and frees libcurl's handles; the engine is not
    /// used again.
    func cleanup() {
        stopAll(waiting: 5)
        multi.cleanup()
        logger.debug("transfer engine stopped")
    }
}

@available(*, unavailable) extension TransferEngine: Sendable {}
