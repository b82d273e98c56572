import ArgumentParser
import Courier
import Foundation
import JSONRPC
import Logging
import Synchronization

@main
struct CourierCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "courier",
        abstract: "A download orchestrator driven with JSON-RPC 2.0 over stdin and stdout.",
        discussion: """
            courier reads JSON-RPC messages on stdin (LSP Content-Length framing or one message \
            a line, detected from the first bytes) and answers on stdout. Logs go to stderr. \
            The protocol reference is protocol/README.md; `rpc.discover` returns its OpenRPC document. \
            Sizes take units: 512KiB, 100MiB, 2GiB, 10MB.
            """,
        version: Configuration.version)

    @Option(help: "Cache directory (default: $XDG_CACHE_HOME/courier, else ~/.cache/courier).")
    var cacheDir: String?

    @Option(help: "Memory cache capacity (default: 100MiB).", transform: size)
    var memoryCapacity: Int64 = 100 << 20

    @Option(help: "Memory cache usage a purge brings it down to (default: 60MiB, or 60% of a smaller capacity).", transform: size)
    var memoryAfterPurge: Int64?

    @Option(help: "Disk cache capacity (default: 512MiB).", transform: size)
    var diskCapacity: Int64 = 512 << 20

    @Option(help: "Transfers running at once.")
    var maxActive: Int = 4

    @Option(help: "Order of queued tasks of equal priority: fifo or lifo.")
    var prioritization: String = "fifo"

    @Option(help: "Seconds of activity before the network activity indicator shows.")
    var activationDelay: Double = 1.0

    @Option(help: "Seconds without activity before the indicator hides.")
    var completionDelay: Double = 0.17

    @Flag(help: "Start with the network activity indicator disabled.")
    var noIndicator = false

    @Option(help: "Least seconds between two download/progress notifications of one task.")
    var progressInterval: Double = 0.1

    @Option(help: "A URL scheme to allow beyond http and https (repeatable).")
    var allowScheme: [String] = []

    @Flag(help: "Let a redirect lead from https down to http (refused by default with insecure_redirect).")
    var allowInsecureRedirects = false

    @Option(help: "Directory that every download destination must lie inside.")
    var downloadRoot: String?

    @Option(help: "Largest body a download may have (default: no limit).", transform: size)
    var maxBytes: Int64?

    @Option(help: "Seconds a whole transfer may take.")
    var timeout: Double = 300

    @Option(help: "Seconds a connection may take to open.")
    var connectTimeout: Double = 30

    @Option(help: "Bytes per second below which a transfer that lasts --low-speed-time fails as timed out (default: 1KiB; 0: off).", transform: size)
    var lowSpeedLimit: Int64 = 1024

    @Option(help: "Seconds a transfer may stay below --low-speed-limit (0: off).")
    var lowSpeedTime: Int = 30

    @Option(help: "Largest body held in memory for a text or base64 outcome, in decoded bytes (default: 64MiB).", transform: size)
    var maxMemoryBody: Int64 = 64 << 20

    @Option(help: "File of extra trusted CA certificates (PEM).")
    var caFile: String?

    @Option(help: "Proxy for every transfer (overrides http_proxy, https_proxy and no_proxy).")
    var proxy: String?

    @Option(help: "Message framing: auto, lsp or ndjson.")
    var framing: String = "auto"

    @Option(help: "Largest message accepted from the client (default: 16MiB).", transform: size)
    var maxMessageBytes: Int64 = 16 << 20

    @Option(help: "Log level on stderr: trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    private static func size(_ text: String) throws -> Int64 {
        guard let bytes = ByteSize.parse(text) else {
            throw ValidationError("'\(text)' is not a size (examples: 1048576, 512KiB, 100MiB, 2GiB)")
        }
        return bytes
    }

    func validate() throws {
        guard FramingMode(rawValue: framing) != nil else { throw ValidationError("--framing must be auto, lsp or ndjson") }
        guard Prioritization(rawValue: prioritization) != nil else { throw ValidationError("--prioritization must be fifo or lifo") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
        guard (1...10_000).contains(maxActive) else { throw ValidationError("--max-active must be 1 to 10000") }
        guard (memoryAfterPurge ?? 0) <= memoryCapacity else { throw ValidationError("--memory-after-purge must not exceed --memory-capacity") }
        guard Configuration.timeoutRange.contains(timeout), Configuration.timeoutRange.contains(connectTimeout) else {
            throw ValidationError("time-outs must be 0.001 to 31536000 seconds")
        }
        guard [activationDelay, completionDelay, progressInterval].allSatisfy((0...3600).contains) else {
            throw ValidationError("delays must be 0 to 3600 seconds")
        }
        guard Configuration.lowSpeedTimeRange.contains(Int64(lowSpeedTime)) else {
            throw ValidationError("--low-speed-time must be 0 to 86400 seconds")
        }
        if let downloadRoot, !downloadRoot.hasPrefix("/") { throw ValidationError("--download-root must be an absolute path") }
    }

    func run() throws {
        // Before any thread starts, so that every thread inherits the mask:
        // the termination signals wait for the signal sources below instead
        // of killing the process in the middle of a write.
        SignalWatch.blockTerminationSignals()

        var config = Configuration(cacheDir: cacheDir)
        config.memoryCapacity = Int(memoryCapacity)
        config.memoryAfterPurge = Int(memoryAfterPurge ?? min(60 << 20, memoryCapacity * 3 / 5))
        config.diskCapacity = Int(diskCapacity)
        config.maxActive = maxActive
        config.prioritization = Prioritization(rawValue: prioritization)!
        config.activationDelay = activationDelay
        config.completionDelay = completionDelay
        config.indicatorEnabled = !noIndicator
        config.progressInterval = progressInterval
        config.allowScheme = allowScheme
        config.allowInsecureRedirects = allowInsecureRedirects
        config.downloadRoot = downloadRoot.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        config.maxBytes = maxBytes
        config.timeout = timeout
        config.connectTimeout = connectTimeout
        config.lowSpeedLimit = lowSpeedLimit
        config.lowSpeedTime = lowSpeedTime
        config.maxMemoryBody = maxMemoryBody
        config.caFile = caFile
        config.proxy = proxy
        config.framing = FramingMode(rawValue: framing)!
        config.maxMessageBytes = Int(maxMessageBytes)
        config.logLevel = Logger.Level(rawValue: logLevel)!

        let logLevels = config.logLevels
        LoggingSystem.bootstrap { label in
            LiveLevelLogHandler(RedactingLogHandler(StreamLogHandler.standardError(label: label)), level: logLevels)
        }
        let logger = Logger(label: "courier")

        // stdout carries protocol messages only: the protocol keeps a copy of
        // the real stdout, and fd 1 points at stderr so a stray print cannot
        // reach the client.
        signal(SIGPIPE, SIG_IGN)
        let protocolOutput = dup(STDOUT_FILENO)
        dup2(STDERR_FILENO, STDOUT_FILENO)

        let connection = Connection(
            input: STDIN_FILENO, output: protocolOutput, mode: config.framing,
            maxMessageBytes: config.maxMessageBytes, logger: logger)
        let server = try CourierServer(configuration: config, connection: connection, logger: logger)
        server.start()
        let signals = SignalWatch(server: server, logger: logger)
        withExtendedLifetime(signals) {
            while true { pause() }
        }
    }
}

/// SIGTERM, SIGINT and SIGHUP (a closing terminal) end courier the way
/// `shutdown` and `exit` do: every unfinished receipt ends with `shutdown`,
/// the output is flushed, and the exit code is 0. A second one while that
/// runs (a client that does not read its output can hold it up) ends the
/// process at once with 128 + the signal's number: 143 for SIGTERM, 130 for
/// SIGINT, 129 for SIGHUP.
///
/// The signals are blocked in every thread and read by dispatch signal
/// sources, so the work runs on an ordinary thread, never in a C handler.
private final class SignalWatch {
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

    init(server: CourierServer, logger: Logger) {
        let queue = DispatchQueue(label: "courier.signals")
        let received = Count()
        sources = Self.signals.map { signal in
            let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
            source.setEventHandler {
                let name = Self.name(of: signal)
                if received.value.add(1, ordering: .relaxed).oldValue == 0 {
                    logger.notice("\(name): shutting down (a second signal ends courier at once)")
                    let thread = Thread { server.shutDownAndExit() }
                    thread.name = "courier.shutdown"
                    thread.start()
                } else {
                    logger.notice("\(name) again: exiting at once")
                    _exit(128 + signal)
                }
            }
            source.resume()
            return source
        }
    }

    private static func name(of signal: Int32) -> String {
        switch signal {
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        default: "signal \(signal)"
        }
    }
}
