import ArgumentParser
import Courier
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSONRPC
import Locking
import Logging

@main
struct CourierCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "courier",
        abstract: "A download orchestrator driven with JSON-RPC 2.0 over stdin and stdout.",
        usage: """
            courier [<options>]
            courier get [<options>] <url> ...
            """,
        discussion: """
            courier reads JSON-RPC messages on stdin (LSP Content-Length framing or one message \
            a line, detected from the first bytes) and answers on stdout. Logs go to stderr, which \
            stays empty on a run where nothing goes wrong. End of stdin means no more requests: the \
            downloads under way finish and their answers are written, then courier exits. \
            `rpc.discover` returns the OpenRPC document of the protocol, which `man courier` and \
            protocol/README.md describe. Sizes take units: 512KiB, 100MiB, 2GiB, 10MB. \
            `courier get URL...` downloads files for a person at a terminal instead (see `courier get --help`).
            """,
        version: Configuration.version,
        subcommands: [GetCommand.self])

    /// Blocks the termination signals before any thread starts, so that
    /// every thread inherits the mask: they wait for the signal sources of
    /// `run` instead of killing the process in the middle of a write; then
    /// serves with the command line `ServerCommandLine` reads, or runs the
    /// command ArgumentParser reads from anything else.
    static func main() {
        SignalWatch.blockTerminationSignals()
        if let settings = ServerCommandLine.parse(ServerCommandLine.processArguments) {
            do {
                try serve(settings)
            } catch {
                exit(withError: error)
            }
        } else {
            do {
                var command = try parseAsRoot(nil)
                do {
                    try command.run()
                } catch let error as ValidationError where command is GetCommand {
                    GetCommand.exit(withUsageError: error.message)
                }
            } catch {
                exit(withError: error)
            }
        }
    }

    private static let defaults = ServerSettings()

    @OptionGroup var cache: CacheOptions

    @Option(help: "Transfers running at once.")
    var maxActive: Int = defaults.maxActive

    @Option(help: "Order of queued tasks of equal priority: fifo or lifo.", completion: .list(["fifo", "lifo"]))
    var prioritization: String = defaults.prioritization

    @Option(help: "Seconds of activity before the network activity indicator shows.")
    var activationDelay: Double = defaults.activationDelay

    @Option(help: "Seconds without activity before the indicator hides.")
    var completionDelay: Double = defaults.completionDelay

    @Flag(help: "Start with the network activity indicator disabled.")
    var noIndicator = defaults.noIndicator

    @Option(help: "Least seconds between two download/progress notifications of one task.")
    var progressInterval: Double = defaults.progressInterval

    @Option(help: "Directory that every download destination must lie inside.", completion: .directory)
    var downloadRoot: String?

    @OptionGroup var transfers: TransferOptions

    @OptionGroup var retry: RetryOptions

    @Option(help: ArgumentHelp(RateLimitOption.serverHelp), transform: parseRate)
    var maxDownloadRate: Int64 = defaults.maxDownloadRate

    @Option(help: "Largest body held in memory for a text or base64 outcome, in decoded bytes (default: 64MiB).", transform: parseSize)
    var maxMemoryBody: Int64 = defaults.maxMemoryBody

    @Option(
        help: "Bytes of partial bodies kept in the cache directory for resuming, all together; 0 keeps none (default: 1GiB).",
        transform: parseSize)
    var partialCapacity: Int64 = defaults.partialCapacity

    @Option(help: "Message framing: auto, lsp or ndjson.", completion: .list(["auto", "lsp", "ndjson"]))
    var framing: String = defaults.framing

    @Option(help: "Largest message accepted from the client (default: 16MiB).", transform: parseSize)
    var maxMessageBytes: Int64 = defaults.maxMessageBytes

    @Option(
        help: "Log level on stderr: trace, debug, info, notice, warning, error or critical.",
        completion: .list(Logger.Level.allCases.map(\.rawValue)))
    var logLevel: String = defaults.logLevel

    func validate() throws {
        if let problem = settings.problem { throw ValidationError(problem) }
    }

    var settings: ServerSettings {
        ServerSettings(
            cache: cache.settings, transfers: transfers.settings, retry: retry.settings, maxActive: maxActive,
            prioritization: prioritization,
            activationDelay: activationDelay, completionDelay: completionDelay, noIndicator: noIndicator,
            progressInterval: progressInterval, downloadRoot: downloadRoot, maxMemoryBody: maxMemoryBody,
            partialCapacity: partialCapacity, framing: framing, maxMessageBytes: maxMessageBytes, logLevel: logLevel,
            maxDownloadRate: maxDownloadRate)
    }

    func run() throws {
        try Self.serve(settings)
    }

    /// Serves on stdin and stdout until the session ends, which exits the
    /// process: returns only by throwing when the server cannot start.
    static func serve(_ settings: ServerSettings) throws {
        // The first request's check reads the OpenRPC document: parsed on a
        // thread of its own, it is ready by then without holding up the
        // server's set-up, which waits for libcurl meanwhile.
        OpenRPCDocument.parseInBackground()

        let config = settings.configuration
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

        if isatty(STDIN_FILENO) == 1 {
            // A person who typed `courier` gets told what it waits for.
            let hint = "courier: reading JSON-RPC 2.0 requests on stdin (see courier --help); to download files yourself, run: courier get URL\n"
            _ = hint.withCString { write(STDERR_FILENO, $0, strlen($0)) }
        }
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
                startThread(named: "courier.shutdown") { server.shutDownAndExit() }
            },
            again: { signal in logger.notice("\(SignalWatch.name(of: signal)) again: exiting at once") })
        withExtendedLifetime(signals) {
            while true { pause() }
        }
    }
}
