import ArgumentParser
import Courier
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import Synchronization

/// `courier get URL...`: downloads files into a directory for a person at a
/// terminal, with the engine and cache that serving uses, in-process.
struct GetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Download URLs into a directory, with progress on a terminal.",
        discussion: """
            Each file is named after its URL's last path component; a name already taken, in the \
            directory, by an earlier URL or by a file that appears there while the download runs (one \
            of another run, say), gets a numeric suffix (name-1.ext), so nothing is overwritten. On a \
            terminal, a line per running download and a total show bytes, rate and ETA; otherwise each \
            finished download prints one line. Failures go to stderr as `URL: error_code: message`, \
            and the exit status is 1 if any download failed. Ctrl-C cancels every download, leaves no \
            partial file and exits with 130; a second Ctrl-C exits at once.
            """)

    @Argument(help: "The http or https URLs to download.")
    var urls: [String]

    @Option(name: [.customShort("o"), .long], help: "Directory the files go into (created if missing; default: the current directory).")
    var outputDir: String?

    @Option(name: [.customShort("j"), .long], help: "Downloads running at once.")
    var jobs: Int = 4

    @Flag(help: "Print each outcome as a JSON line instead of text and progress.")
    var json = false

    @OptionGroup var cache: CacheOptions

    @OptionGroup var transfers: TransferOptions

    @Option(help: "Log level on stderr: trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "warning"

    func validate() throws {
        guard !urls.isEmpty else { throw ValidationError("give at least one URL") }
        guard (1...10_000).contains(jobs) else { throw ValidationError("--jobs must be 1 to 10000") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
    }

    func run() throws {
        signal(SIGPIPE, SIG_IGN)

        let directory = outputDir ?? "."
        if let failure = Self.makeDirectories(directory) {
            throw ValidationError("cannot create the output directory \(directory): \(String(cString: strerror(failure)))")
        }
        guard let root = realpath(directory, nil) else {
            throw ValidationError("cannot open the output directory \(directory): \(String(cString: strerror(errno)))")
        }
        let rootPath = String(cString: root)
        free(root)

        var config = cache.settings.configuration
        transfers.settings.apply(to: &config)
        config.maxActive = jobs
        // Every file lies in the output directory: no symbolic link inside
        // leads a download out of it.
        config.downloadRoot = rootPath
        config.logLevel = Logger.Level(rawValue: logLevel)!
        let logLevels = config.logLevels
        LoggingSystem.bootstrap { label in
            LiveLevelLogHandler(RedactingLogHandler(StreamLogHandler.standardError(label: label)), level: logLevels)
        }

        let output: OutputDirectory
        do throws(OutputDirectory.OpenFailure) {
            output = try OutputDirectory(path: rootPath)
        } catch {
            throw ValidationError(error.description)
        }
        // A file's name as the user wrote its directory.
        let shown: @Sendable (String) -> String = { name in outputDir.map { Self.joined($0, name) } ?? name }
        let style: ProgressReport.Style = json ? .json : isatty(STDOUT_FILENO) == 1 ? .terminal : .lines
        let report = ProgressReport(style: style, urls: urls)
        let downloads = try InProcessDownloads(configuration: config, logger: Logger(label: "courier")) { event in
            switch event {
            case .progress(let request, let progress): report.progress(request - 1, progress)
            case .finished(let request, let completion): report.finished(request - 1, completion, name: completion.name.map(shown))
            }
        }

        let interrupted = Interruption()
        let signals = SignalWatch(
            first: { signal in
                interrupted.signal.store(signal, ordering: .relaxed)
                report.interrupted()
                downloads.cancelAll()
            },
            again: { _ in report.abandon() })

        for (index, url) in urls.enumerated() {
            guard interrupted.signal.load(ordering: .relaxed) == 0 else { break }
            do throws(InProcessDownloads.RequestError) {
                let request = InProcessDownloads.Request(url: url, directory: output, name: InProcessDownloads.fileName(for: url))
                report.started(index, name: shown(try downloads.start(request).name))
            } catch {
                report.refused(index, error)
            }
        }
        report.startTicking()
        if interrupted.signal.load(ordering: .relaxed) != 0 { downloads.cancelAll() }
        downloads.waitUntilFinished()
        downloads.shutdown()
        report.end()
        withExtendedLifetime(signals) {}

        let signal = interrupted.signal.load(ordering: .relaxed)
        if signal != 0 { throw ExitCode(128 + signal) }
        if report.failures > 0 { throw ExitCode(1) }
    }

    private final class Interruption: Sendable {
        let signal = Atomic<Int32>(0)
    }

    /// `name` in `directory`, as the user wrote the directory, with one
    /// slash between them.
    static func joined(_ directory: String, _ name: String) -> String {
        var base = Substring(directory)
        while base.count > 1, base.hasSuffix("/") { base = base.dropLast() }
        return base.hasSuffix("/") ? base + name : base + "/" + name
    }

    /// Makes `path` and every missing directory above it, as `mkdir -p`
    /// does: nil when `path` is a directory at the end, else the `errno` of
    /// the step that failed.
    static func makeDirectories(_ path: String) -> Int32? {
        let bytes = Array(path.utf8)
        var ends = bytes.indices.filter { $0 > 0 && bytes[$0] == UInt8(ascii: "/") && bytes[$0 - 1] != UInt8(ascii: "/") }
        ends.append(bytes.count)
        for end in ends where mkdir(String(decoding: bytes[..<end], as: UTF8.self), 0o777) != 0 && errno != EEXIST {
            return errno
        }
        var status = stat()
        guard stat(path, &status) == 0 else { return errno }
        return status.st_mode & S_IFMT == S_IFDIR ? nil : ENOTDIR
    }
}
