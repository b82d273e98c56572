import Curl
import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import Locking

/// The one thread that owns libcurl's multi handle and drives every
/// transfer. Other threads hand it work through a locked inbox and wake it
/// with `curl_multi_wakeup`; it never blocks on anything but
/// `curl_multi_poll`.
final class TransferEngine: Sendable {
    enum Command {
        case start(Transfer)
        case cancel(Transfer)
        case pause(Transfer)
        case resume(Transfer)
        /// Changes a transfer's own rate, begun or not.
        case limit(Transfer, maxRate: Int64?)
        /// Changes the rate of all transfers together (nil: none).
        case limitTotal(Int64?)
        /// The body writer has closed the transfer's file.
        case flushed(Transfer, TransferFailure?, checksum: UInt64)
        case shutdown
    }

    /// The multi handle, for waking the loop from other threads: made on
    /// the engine's thread (libcurl's global set-up, OpenSSL's included,
    /// happens there, not on the thread that starts courier), nil again once
    /// it is torn down.
    private let wakeable = Locked<MultiHandle?>(nil)
    private let inbox = Locked<[Command]>([])
    private let writer = BodyWriter()
    private let stopped = DispatchSemaphore(value: 0)
    private let logger: Logger
    /// Runs one turn of the loop with the notifications it causes sent as
    /// one burst.
    private let batch: @Sendable (() -> Void) -> Void

    init(logger: Logger, batch: @escaping @Sendable (() -> Void) -> Void = { $0() }) {
        self.logger = logger
        self.batch = batch
        startThread(named: "courier.transfers") { [self] in run() }
    }

    func start(_ transfer: Transfer) { send(.start(transfer)) }
    func cancel(_ transfer: Transfer) { send(.cancel(transfer)) }
    func pause(_ transfer: Transfer) { send(.pause(transfer)) }
    func resume(_ transfer: Transfer) { send(.resume(transfer)) }
    func limit(_ transfer: Transfer, to maxRate: Int64?) { send(.limit(transfer, maxRate: maxRate)) }
    /// Running transfers feel the change at the engine's next turn.
    func limitTotal(to rate: Int64?) { send(.limitTotal(rate)) }

    /// Stops every transfer, tears libcurl down on its own thread, and waits
    /// up to `timeout` seconds for that to be done.
    func shutdown(timeout: Double) {
        send(.shutdown)
        _ = stopped.wait(timeout: .now() + timeout)
    }

    private func send(_ command: Command) {
        let wasEmpty = inbox.withLock { inbox in
            inbox.append(command)
            return inbox.count == 1
        }
        if wasEmpty { wakeable.withLock { $0?.wakeup() } }
    }

    private func run() {
        // Owned by this thread alone; commands sent before it exists wait in
        // the inbox for the first turn.
        let multi = MultiHandle(maxHostConnections: 0, maxTotalConnections: 0)
        wakeable.withLock { $0 = multi }
        var active: [ObjectIdentifier: Transfer] = [:]
        let throttle = Throttle()
        var running = true
        while running {
            batch {
                running = turn(&active, multi, throttle)
            }
            if running {
                // The poll's timeout also serves the rate limiter's next refill.
                let timeout = min(multi.timeoutMilliseconds ?? 1000, throttle.millisecondsToRefill ?? 1000, 1000)
                multi.poll(timeoutMilliseconds: max(0, timeout))
            }
        }
    }

    /// Takes the inbox's commands, lets libcurl work, and reports finished
    /// transfers; false once the engine has shut down.
    private func turn(_ active: inout [ObjectIdentifier: Transfer], _ multi: MultiHandle, _ throttle: Throttle) -> Bool {
        for command in inbox.withLock({ inbox in defer { inbox = [] }; return inbox }) {
            switch command {
            case .start(let transfer):
                active[ObjectIdentifier(transfer)] = transfer
                throttle.add(transfer)
                transfer.begin(on: multi, writer: writer, throttle: throttle)
            case .cancel(let transfer):
                if active.removeValue(forKey: ObjectIdentifier(transfer)) != nil {
                    throttle.remove(transfer)
                    transfer.abandon(on: multi)
                }
            // Also for a transfer not started yet (the downloader starts one
            // once the partial store has looked for a body it kept): it
            // begins paused, or not, and takes its share, or none.
            case .pause(let transfer):
                throttle.suspend(transfer)
                transfer.pause()
            case .resume(let transfer):
                throttle.resume(transfer)
                transfer.resume()
            case .limit(let transfer, let maxRate):
                transfer.maxRate = maxRate
                throttle.setRate(maxRate, of: transfer, isRunning: active[ObjectIdentifier(transfer)] != nil)
            case .limitTotal(let rate):
                throttle.setTotalRate(rate, running: active.values)
            case .flushed(let transfer, let failure, let checksum):
                if active.removeValue(forKey: ObjectIdentifier(transfer)) != nil {
                    // A limit set while its file closed may have counted it.
                    throttle.remove(transfer)
                    transfer.finish(writeFailure: failure, checksum: checksum)
                }
            case .shutdown:
                for transfer in active.values { transfer.abandon(on: multi) }
                writer.stop(waiting: 5)
                wakeable.withLock { $0 = nil }
                multi.cleanup()
                logger.debug("transfer engine stopped")
                stopped.signal()
                return false
            }
        }
        for id in throttle.refill() { active[id]?.unthrottle() }
        multi.perform()
        for transfer in active.values { transfer.reportData() }
        for (handle, code) in multi.completed() {
            guard let transfer = handle.delegate as? Transfer, active[ObjectIdentifier(transfer)] != nil else { continue }
            switch transfer.complete(code: code, on: multi) {
            case .redirected:
                break
            case .ended:
                active[ObjectIdentifier(transfer)] = nil
                throttle.remove(transfer)
            case .flushing(let stream):
                throttle.remove(transfer)
                writer.close(stream) { [self] failure, checksum in send(.flushed(transfer, failure, checksum: checksum)) }
            }
        }
        return true
    }
}
