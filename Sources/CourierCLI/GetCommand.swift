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

/// `courier get URL...`: downloads files for a person at a terminal, with
/// the engine and cache that serving uses, in-process; its flags are
/// curl's and aria2c's names for the same things.
struct GetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Download URLs into files, with progress on a terminal.",
        usage: """
            courier get [<options>] <url> ...
            courier get [<options>] -i <file>
            courier get [<options>] -o <file> <url>
            """,
        discussion: """
            Each file is named after its URL's last path segment, percent-decoded (my%20file.txt is \
            saved as 'my file.txt'), with '/', control characters and bidirectional marks made '_'; \
            a decoded name that is not UTF-8 keeps those bytes escaped (caf%E9.txt); a URL ending in \
            '/', or with a query alone, gives index.html. With --remote-header-name the response's \
            Content-Disposition filename, made safe the same way, comes first. A URL without a \
            scheme is taken as http://, as curl does.

            A file already at a download's name is never replaced or renamed around. By default \
            (-c, --continue) it is compared with the body the cache directory holds for its URL, \
            without asking the origin: the same bytes make the download 'already complete'; \
            anything else, or no stored body, fails it with file_exists. A file at a name only the \
            response gives (--remote-header-name), or that appears while the download runs, is \
            compared with the body fetched, the same way. --no-clobber skips such \
            a file instead, and --overwrite replaces it once the new body is complete. The body \
            streams into a hidden file, so no partial file ever has the name. Two URLs of one run \
            that come to one name: the second fails with file_exists.

            An interrupted download over 64 KiB (Ctrl-C, a kill, a failure) keeps what arrived in the cache \
            directory when its origin gives a validator (a strong ETag or Last-Modified) and the \
            output directory is on the cache directory's file system, and the same command run again \
            asks only for the rest (Range with If-Range), never splicing two versions. Transient \
            failures (timeouts, resets, HTTP 408, 429, 500, 502, 503, 504) are retried --retries \
            times (curl's --retry is read too) after a doubling wait, continuing the body (an attempt \
            that moves the body on gives the download its retries again); a Retry-After longer than \
            --retry-max-delay fails at once. A waiting download shows 'retry 1/3 in 0.5 s' on its \
            line. --integrity (SRI) or --checksum (aria2c's TYPE=HEX) names \
            what the body must hash to: a body that does not match fails integrity_mismatch, \
            printing both digests, and is not saved.

            Results go to stdout: `URL -> FILE (SIZE, TIME)` for each file saved (`from cache` when \
            the cache served it; the attempts when more than one; `resumed at SIZE` when kept bytes \
            were continued), `URL -> FILE (already complete)` and `URL -> FILE (exists, skipped)`, \
            or with --json each outcome as a JSON line. Progress and messages go to stderr: on a \
            terminal a line per running download and a total (bytes, rate, ETA) fitted to its width, \
            `URL: error_code: message` for each failure and each attempt to be retried, and a \
            closing summary (files ok, from cache, retried, already complete, skipped, failed; bytes \
            from the network with their time and rate, cache hits left out).

            Exit status: 0 when every URL was saved, skipped or already complete, 1 when any failed, \
            64 for a bad command line, 130 after Ctrl-C, which cancels every download and leaves no \
            partial file (a second Ctrl-C exits at once).

            Examples:
              courier get https://example.org/logo.png
              courier get -o logo.png example.org/logo.png
              courier get -d downloads -j 8 URL1 URL2 URL3
              courier get --limit-rate 1MiB -d downloads URL1 URL2
              courier get -i urls.txt -d downloads --no-clobber
              printf '%s\\n' URL1 URL2 | courier get -i - -d downloads
              courier get --json URL > outcomes.jsonl
              courier get --retries 10 --retry-max-time 600 https://example.org/big.iso
              courier get --checksum sha-256=HEX https://example.org/big.iso
              courier get -c https://example.org/big.iso    (again, after Ctrl-C: continues)
            """)

    @Argument(help: ArgumentHelp("URLs to download (http:// is assumed when there is no scheme).", valueName: "url"))
    var urls: [String] = []

    @Option(
        name: [.customShort("o"), .long],
        help: "Save the one URL as this file (inside --output-dir when relative).",
        completion: .file())
    var output: String?

    @Option(
        name: [.customShort("d"), .long],
        help: "Directory the files go into, made when missing (default: the current directory).",
        completion: .directory)
    var outputDir: String?

    @Option(
        name: [.customShort("i"), .long],
        help: "Read URLs from this file, one a line ('-': stdin; blank lines and lines starting with # are skipped).",
        completion: .file())
    var inputFile: String?

    @Flag(
        name: [.customShort("J"), .long],
        help: "Name each file after its response's Content-Disposition filename, when it has one.")
    var remoteHeaderName = false

    @Flag(
        name: [.customShort("c"), .customLong("continue")],
        help: "Continue an interrupted download from the bytes kept in the cache directory, and count a file that exists and holds the body the cache has for its URL as already complete (the default; aria2c's -c, curl's -C -).")
    var continueDownloads = false

    @Flag(help: "Skip a URL whose file exists (default: already complete when the cache holds that body, else fail with file_exists).")
    var noClobber = false

    @Flag(help: "Replace a file that exists once the new body is complete.")
    var overwrite = false

    @Option(
        help: ArgumentHelp(
            "What the one URL's body must hash to, in Subresource Integrity form: sha256-, sha384- or sha512-<base64> (default: none; in an -i file, an indented integrity=SRI line under a URL).",
            valueName: "sri"))
    var integrity: String?

    @Option(
        help: ArgumentHelp(
            "aria2c's form of --integrity: sha-256, sha-384 or sha-512=<hex> (default: none; in an -i file, an indented checksum=TYPE=HEX line under a URL).",
            valueName: "type=hex"))
    var checksum: String?

    @Option(name: [.customShort("j"), .long], help: "Downloads running at once.")
    var jobs: Int = 4

    @Option(help: ArgumentHelp(RateLimitOption.getHelp, valueName: "rate"), transform: parseRate)
    var limitRate: Int64 = 0

    @Flag(name: [.customShort("q"), .long], help: "No progress and no summary; failures are still printed.")
    var quiet = false

    @Flag(help: "Print each outcome as a JSON line on stdout instead of a result line.")
    var json = false

    @OptionGroup var cache: CacheOptions

    @OptionGroup var transfers: TransferOptions

    @OptionGroup var retry: RetryOptions

    /// curl's name for `--retries`.
    @Option(name: .customLong("retry"), help: .private)
    var curlRetry: Int?

    @Option(
        help: "Log level on stderr: trace, debug, info, notice, warning, error or critical.",
        completion: .list(Logger.Level.allCases.map(\.rawValue)))
    var logLevel: String = "warning"

    func validate() throws {
        guard !urls.isEmpty || inputFile != nil else { throw ValidationError("give a URL, or -i FILE with URLs") }
        guard (1...10_000).contains(jobs) else { throw ValidationError("--jobs must be 1 to 10000") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
        guard !(noClobber && overwrite) else { throw ValidationError("--no-clobber and --overwrite exclude each other") }
        guard !(continueDownloads && overwrite) else {
            throw ValidationError("--continue and --overwrite exclude each other")
        }
        if let curlRetry, !Configuration.retriesRange.contains(Int64(curlRetry)) {
            throw ValidationError("--retry must be 0 to 1000")
        }
        if integrity != nil || checksum != nil {
            guard integrity == nil || checksum == nil else {
                throw ValidationError("give --integrity or --checksum, not both")
            }
            guard urls.count == 1, inputFile == nil else {
                throw ValidationError("--integrity and --checksum are for one URL (in an -i file, give each URL its own)")
            }
            _ = try expectedDigest
        }
        if let output {
            guard urls.count == 1, inputFile == nil else {
                throw ValidationError("-o names one file: give one URL (-d DIR saves several)")
            }
            guard !remoteHeaderName else { throw ValidationError("-o names the file: --remote-header-name does not apply") }
            guard output != "-" else { throw ValidationError("-o - (stdout) is not supported: give a file name") }
            guard let name = Self.split(output).name, name != ".", name != ".." else {
                throw ValidationError("-o '\(output)' names a directory, not a file (-d DIR saves into a directory)")
            }
        }
    }

    /// `--integrity` or `--checksum` in Subresource Integrity form.
    private var expectedDigest: String? {
        get throws {
            do throws(ExpectedDigest.Malformed) {
                if let integrity { return try ExpectedDigest.integrity(integrity) }
                if let checksum { return try ExpectedDigest.checksum(checksum) }
                return nil
            } catch {
                throw ValidationError(error.message)
            }
        }
    }

    func run() throws {
        signal(SIGPIPE, SIG_IGN)

        var entries = try urls.map { URLList.Entry(url: $0, integrity: try expectedDigest) }
        if let inputFile {
            do throws(URLList.ReadFailure) {
                let name = inputFile == "-" ? "stdin" : inputFile
                entries += try URLList.entries(in: try URLList.read(inputFile), name: name)
            } catch {
                throw ValidationError(error.message)
            }
            guard !entries.isEmpty else { throw ValidationError("no URL in \(inputFile == "-" ? "stdin" : inputFile)") }
        }
        for index in entries.indices { entries[index].url = URLList.withScheme(entries[index].url) }
        let all = entries.map(\.url)

        // The directory as the user wrote it (for what is shown), and the
        // name -o gives.
        var directory = outputDir
        var fixedName: String?
        if let output {
            let (parent, name) = Self.split(output)
            fixedName = name
            if output.hasPrefix("/") {
                directory = parent
            } else if let parent {
                directory = directory.map { Self.joined($0, parent) } ?? parent
            }
        }
        let destination = try Self.open(directory ?? ".")

        var config = cache.settings.configuration
        transfers.settings.apply(to: &config)
        var retrySettings = retry.settings
        if let curlRetry { retrySettings.retries = curlRetry }
        retrySettings.apply(to: &config)
        config.maxActive = jobs
        config.maxDownloadRate = limitRate
        // Every file lies in the output directory: no symbolic link inside
        // leads a download out of it.
        config.downloadRoot = destination.path
        config.logLevel = Logger.Level(rawValue: logLevel)!
        let logLevels = config.logLevels
        LoggingSystem.bootstrap { label in
            LiveLevelLogHandler(RedactingLogHandler(StreamLogHandler.standardError(label: label)), level: logLevels)
        }

        let shownDirectory = directory
        let shown: @Sendable (String) -> String = { name in shownDirectory.map { Self.joined($0, name) } ?? name }
        let report = ProgressReport(urls: all, retries: retrySettings.retries, json: json, quiet: quiet, shown: shown)
        let downloads = try InProcessDownloads(configuration: config, logger: Logger(label: "courier")) { event in
            switch event {
            case .progress(let request, let progress): report.progress(request - 1, progress)
            case .retrying(let request, let retry): report.retrying(request - 1, retry)
            case .finished(let request, let completion): report.finished(request - 1, completion)
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

        let existing: ExistingFile = noClobber ? .skip : overwrite ? .replace : .refuse
        for (index, entry) in entries.enumerated() {
            guard interrupted.signal.load(ordering: .relaxed) == 0 else { break }
            let request = InProcessDownloads.Request(
                url: entry.url, directory: destination, name: fixedName ?? RemoteFileName.forURL(entry.url),
                nameFromResponse: remoteHeaderName, existing: existing, integrity: entry.integrity)
            do throws(InProcessDownloads.RequestError) {
                switch try downloads.start(request) {
                case .started(_, let name): report.started(index, name: shown(name))
                case .skipped(let name): report.skipped(index, name: name, path: destination.path + "/" + name)
                }
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

    /// Prints `message` as ArgumentParser prints a usage error, with `get`'s
    /// usage, and exits with 64: for what only running finds wrong with the
    /// command line (a directory that cannot be made, an `-i` file that
    /// cannot be read).
    static func exit(withUsageError message: String) -> Never {
        let usage = CourierCommand.usageString(for: GetCommand.self)
            .split(separator: "\n", omittingEmptySubsequences: false)
            .enumerated().map { $0.offset == 0 ? "Usage: " + $0.element : "       " + $0.element.drop { $0 == " " } }
            .joined(separator: "\n")
        let text = "Error: \(message)\n\(usage)\n  See 'courier get --help' for more information.\n"
        _ = text.withCString { Glibc.write(STDERR_FILENO, $0, strlen($0)) }
        Glibc.exit(64)
    }

    /// The output directory at `path`, made with its parents when missing,
    /// opened by its real path.
    private static func open(_ path: String) throws -> OutputDirectory {
        if let failure = makeDirectories(path) {
            throw ValidationError("cannot create the output directory \(path): \(String(cString: strerror(failure)))")
        }
        guard let real = realpath(path, nil) else {
            throw ValidationError("cannot open the output directory \(path): \(String(cString: strerror(errno)))")
        }
        defer { free(real) }
        do throws(OutputDirectory.OpenFailure) {
            return try OutputDirectory(path: String(cString: real))
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// `path`'s directory part (nil when it has none) and its last
    /// component (nil when it ends with `/` or is empty).
    static func split(_ path: String) -> (parent: String?, name: String?) {
        guard let slash = path.lastIndex(of: "/") else { return (nil, path.isEmpty ? nil : path) }
        let name = String(path[path.index(after: slash)...])
        let parent = slash == path.startIndex ? "/" : String(path[..<slash])
        return (parent, name.isEmpty ? nil : name)
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
