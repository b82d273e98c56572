import ArgumentParser
import Courier
import Foundation
import JSONRPC
import Logging

@main
struct CourierCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "courier",
        abstract: "A download orchestrator driven with JSON-RPC 2.0 over stdin and stdout.",
        usage: """
            courier [<options>]
            courier get [<options>] <urls> ...
            """,
        discussion: """
            courier reads JSON-RPC messages on stdin (LSP Content-Length framing or one message \
            a line, detected from the first bytes) and answers on stdout. Logs go to stderr. \
            The protocol reference is protocol/README.md; `rpc.discover` returns its OpenRPC document. \
            Sizes take units: 512KiB, 100MiB, 2GiB, 10MB. \
            `courier get URL...` downloads files for a person at a terminal instead (see `courier get --help`).
            """,
        version: Configuration.version,
        subcommands: [GetCommand.self])

    /// Blocks the termination signals before any thread starts, so that
    /// every thread inherits the mask: they wait for the signal sources of
    /// `run` instead of killing the process in the middle of a write; then
    /// runs the command.
    static func main() {
        SignalWatch.blockTerminationSignals()
        main(nil)
    }

    @OptionGroup var cache: CacheOptions

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

    @Option(help: "Directory that every download destination must lie inside.")
    var downloadRoot: String?

    @OptionGroup var transfers: TransferOptions

    @Option(help: "Largest body held in memory for a text or base64 outcome, in decoded bytes (default: 64MiB).", transform: parseSize)
    var maxMemoryBody: Int64 = 64 << 20

    @Option(help: "Message framing: auto, lsp or ndjson.")
    var framing: String = "auto"

    @Option(help: "Largest message accepted from the client (default: 16MiB).", transform: parseSize)
    var maxMessageBytes: Int64 = 16 << 20

    @Option(help: "Log level on stderr: trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    func validate() throws {
        guard FramingMode(rawValue: framing) != nil else { throw ValidationError("--framing must be auto, lsp or ndjson") }
        guard Prioritization(rawValue: prioritization) != nil else { throw ValidationError("--prioritization must be fifo or lifo") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
        guard (1...10_000).contains(maxActive) else { throw ValidationError("--max-active must be 1 to 10000") }
        guard [activationDelay, completionDelay, progressInterval].allSatisfy((0...3600).contains) else {
            throw ValidationError("delays must be 0 to 3600 seconds")
        }
        if let downloadRoot, !downloadRoot.isAbsolutePath { throw ValidationError("--download-root must be an absolute path") }
    }

    func run() throws {
        // The first request's check reads the OpenRPC document: parsed on a
        // thread of its own, it is ready by then without holding up the
        // server's set-up, which waits for libcurl meanwhile.
        OpenRPCDocument.parseInBackground()

        var config = cache.configuration
        transfers.apply(to: &config)
        config.maxActive = maxActive
        config.prioritization = Prioritization(rawValue: prioritization)!
        config.activationDelay = activationDelay
        config.completionDelay = completionDelay
        config.indicatorEnabled = !noIndicator
        config.progressInterval = progressInterval
        config.downloadRoot = downloadRoot.map(Configuration.absolutePath)
        config.maxMemoryBody = maxMemoryBody
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
        // A termination signal ends the session the way `shutdown` and `exit`
        // do: every unfinished receipt ends with `shutdown`, the output is
        // flushed, and the exit code is 0. A second one while that runs (a
        // client that does not read its output can hold it up) ends courier
        // at once.
        let signals = SignalWatch(
            first: { signal in
                logger.notice("\(SignalWatch.name(of: signal)): shutting down (a second signal ends courier at once)")
                let thread = Thread { server.shutDownAndExit() }
                thread.name = "courier.shutdown"
                thread.start()
            },
            again: { signal in logger.notice("\(SignalWatch.name(of: signal)) again: exiting at once") })
        withExtendedLifetime(signals) {
            while true { pause() }
        }
    }
}
