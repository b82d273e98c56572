import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Termination signals (SIGTERM, SIGINT, SIGHUP) read by dispatch signal
/// sources, so that what they do runs on an ordinary thread, never in a C
/// handler. The first one received runs `first`; any later one runs `again`
/// and then ends the process at once with 128 + its number: 143 for
/// SIGTERM, 130 for SIGINT, 129 for SIGHUP.
///
/// The signals must be blocked in every thread (`blockTerminationSignals`,
/// before any thread starts), or they would kill the process instead.
final class SignalWatch {
    static let signals: [Int32] = [SIGTERM, SIGINT, SIGHUP]

    /// Termination signals received so far.
    private final class Count: Sendable {
        let value = Atomic<Int>(0)
    }

    private let sources: [any DispatchSourceSignal]

    static func blockTerminationSignals() {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    init(first: @escaping @Sendable (Int32) -> Void, again: @escaping @Sendable (Int32) -> Void = { _ in }) {
        let queue = DispatchQueue(label: "courier.signals")
        let received = Count()
        sources = Self.signals.map { signal in
            let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
            source.setEventHandler {
                if received.value.add(1, ordering: .relaxed).oldValue == 0 {
                    first(signal)
                } else {
                    again(signal)
                    _exit(128 + signal)
                }
            }
            source.resume()
            return source
        }
    }

    static func name(of signal: Int32) -> String {
        switch signal {
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        default: "signal \(signal)"
        }
    }
}
