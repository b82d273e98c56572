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
        var running = true
        while running {
            batch {
                running = turn(&active, multi)
            }
            if running {
                multi.poll(timeoutMilliseconds: min(multi.timeoutMilliseconds ?? 1000, 1000))
            }
        }
    }

    /// Takes the inbox's commands, lets libcurl work, and reports finished
    /// transfers; false once the engine has shut down.
    private func turn(_ active: inout [ObjectIdentifier: Transfer], _ multi: MultiHandle) -> Bool {
        for command in inbox.withLock({ inbox in defer { inbox = [] }; return inbox }) {
            switch command {
            case .start(let transfer):
                active[ObjectIdentifier(transfer)] = transfer
                transfer.begin(on: multi, writer: writer)
            case .cancel(let transfer):
                if active.removeValue(forKey: ObjectIdentifier(transfer)) != nil {
                    transfer.abandon(on: multi)
                }
            // Also for a transfer not started yet (the downloader starts one
            // once the partial store has looked for a body it kept): it
            // begins paused, or not.
            case .pause(let transfer):
                transfer.pause()
            case .resume(let transfer):
                transfer.resume()
            case .flushed(let transfer, let failure, let checksum):
                if active.removeValue(forKey: ObjectIdentifier(transfer)) != nil {
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
        multi.perform()
        for transfer in active.values { transfer.reportData() }
        for (handle, code) in multi.completed() {
            guard let transfer = handle.delegate as? Transfer, active[ObjectIdentifier(transfer)] != nil else { continue }
            switch transfer.complete(code: code, on: multi) {
            case .redirected:
                break
            case .ended:
                active[ObjectIdentifier(transfer)] = nil
            case .flushing(let stream):
                writer.close(stream) { [self] failure, checksum in send(.flushed(transfer, failure, checksum: checksum)) }
            }
        }
        return true
    }
}
