import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import enum JSONRPC.FramingMode
import Logging
import Synchronization

/// The prioritization of queued tasks of equal priority.
public enum Prioritization: String, Sendable, CaseIterable {
    case fifo
    case lifo
}

/// Every setting of courier, from its command line and `initialize` options.
public struct Configuration: Sendable {
    public static let version = "0.1.0"
    public static let protocolVersion = "1.0"

    public var cacheDir: String
    public var memoryCapacity = 100 << 20
    public var memoryAfterPurge = 60 << 20
    public var diskCapacity = 512 << 20
    public var maxActive = 4
    public var prioritization = Prioritization.fifo
    public var activationDelay = 1.0
    public var completionDelay = 0.17
    public var progressInterval = 0.1
    public var allowScheme: [String] = []
    public var allowInsecureRedirects = false
    public var downloadRoot: String?
    public var maxBytes: Int64?
    public var timeout = 300.0
    public var connectTimeout = 30.0
    /// A transfer slower than `lowSpeedLimit` bytes per second for
    /// `lowSpeedTime` seconds fails `timeout` (curl's `--speed-limit` and
    /// `--speed-time`); 0 turns the check off.
    public var lowSpeedLimit: Int64 = 1024
    public var lowSpeedTime = 30
    /// Bodies held in memory (`text`, `base64`) larger than this, in decoded
    /// bytes, fail `too_large`.
    public var maxMemoryBody: Int64 = 64 << 20
    /// The bytes of partial bodies kept in the cache directory for
    /// resuming, all together (`--partial-capacity`); 0 keeps none.
    public var partialCapacity: Int64 = 1 << 30
    public var caFile: String?
    public var proxy: String?
    public var framing = FramingMode.auto
    /// Least severity logged. Setting it also sets `logLevels`, which the
    /// log handlers made by `LiveLevelLogHandler` follow.
    public var logLevel = Logger.Level.warning {
        didSet { logLevels.level = logLevel }
    }
    /// The level in effect for the log handlers, shared by every copy of
    /// this configuration: `initialize` changes it while courier runs.
    public let logLevels = LogLevelSetting(.warning)
    public var maxMessageBytes = 16 << 20
    public var indicatorEnabled = true
    /// How many attempts may follow a download's first after transient
    /// failures, unless its `retries` says otherwise; 0 turns retrying off.
    public var retries = Configuration.defaultRetries
    /// Seconds before the second attempt, doubling for each one after it.
    public var retryDelay = 0.5
    /// The longest wait before an attempt; a `Retry-After` beyond it is not
    /// waited for.
    public var retryMaxDelay = 30.0
    /// No attempt starts later than this many seconds after a receipt's first.
    public var retryMaxTime = 60.0
    /// Bytes per second all transfers together may take, shared fairly
    /// among those running; 0 for no limit.
    public var maxDownloadRate: Int64 = 0

    public init(cacheDir: String? = nil) {
        self.cacheDir = cacheDir ?? Configuration.defaultCacheDir()
    }

    /// `$XDG_CACHE_HOME/courier`, else `~/.cache/courier`.
    public static func defaultCacheDir(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let xdg = environment["XDG_CACHE_HOME"], xdg.isAbsolutePath {
            return xdg + "/courier"
        }
        let home = environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path
        return home + "/.cache/courier"
    }

    /// `path` made absolute against the working directory and standardized
    /// as `URL(fileURLWithPath:).standardizedFileURL.path` does it, without
    /// the cost of Foundation's URL on the way to the first request: a
    /// leading `~` or `~user` names that user's home directory (from the
    /// password database), and `.`, `..` and empty components go, lexically
    /// (symbolic links are not followed).
    public static func absolutePath(_ path: String) -> String {
        let slash = UInt8(ascii: "/")
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "~") {
            let end = bytes.firstIndex(of: slash) ?? bytes.endIndex
            let name = String(decoding: bytes[1..<end], as: UTF8.self)
            if let entry = name.isEmpty ? getpwuid(getuid()) : getpwnam(name), let home = entry.pointee.pw_dir {
                bytes = Array(String(cString: home).utf8) + bytes[end...]
            }
        }
        if bytes.first != slash {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let directory = getcwd(&buffer, buffer.count).map { String(cString: $0) } ?? "/"
            bytes = Array(directory.utf8) + [slash] + bytes
        }
        var components: [ArraySlice<UInt8>] = []
        for component in bytes.split(separator: slash) {
            if component.elementsEqual([UInt8(ascii: ".")]) { continue }
            if component.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) {
                _ = components.popLast()
                continue
            }
            components.append(component)
        }
        // Appended one by one: `joined` would instantiate generic metadata,
        // which costs a scan of every protocol conformance at start-up.
        var absolute: [UInt8] = []
        absolute.reserveCapacity(bytes.count + 1)
        for component in components {
            absolute.append(slash)
            absolute.append(contentsOf: component)
        }
        return absolute.isEmpty ? "/" : String(decoding: absolute, as: UTF8.self)
    }

    /// Schemes a download may use.
    public var allowedSchemes: Set<String> { Set(["http", "https"] + allowScheme.map { $0.lowercased() }) }

    /// Applies `changes` in order, all or none. A setting fixed at start-up
    /// may be given only the value it has, which changes nothing; the first
    /// change that would give one another value is refused, and then no
    /// setting changes.
    mutating func apply(_ changes: [Change]) throws(ConfigurationError) {
        if let refused = changes.first(where: { $0.fixedAtStartup && !$0.keepsValue }) {
            throw .fixedAtStartup(setting: refused.setting)
        }
        var next = self
        for change in changes where !change.fixedAtStartup { change.assign(&next) }
        self = next
    }

    /// One setting given a value, as `initialize` gives it.
    struct Change: Sendable {
        /// The setting's name.
        var setting: String
        /// Whether the setting shapes resources made at start-up, so that
        /// only the command line sets it.
        var fixedAtStartup: Bool
        /// Whether the value given is the one the setting has.
        var keepsValue: Bool
        /// Gives the setting its value.
        var assign: @Sendable (inout Configuration) -> Void
    }
}

/// Why a configuration refuses a change.
enum ConfigurationError: Error, Hashable, Sendable {
    /// `setting` shapes resources made at start-up (the cache, the framing,
    /// the transfers' TLS and proxy): only the command line sets it.
    case fixedAtStartup(setting: String)
}

extension Configuration {
    /// Seconds a `timeout` or `connectTimeout` may be: from a millisecond
    /// (libcurl counts milliseconds, and 0 would mean none) to a year.
    public static let timeoutRange: ClosedRange<Double> = 0.001...31_536_000
    /// Seconds `lowSpeedTime` may be: none (0, no check) to a day.
    public static let lowSpeedTimeRange: ClosedRange<Int64> = 0...86_400

    /// `retries` by default.
    public static let defaultRetries = 3
    /// What `retries` may be: none to a thousand.
    public static let retriesRange: ClosedRange<Int64> = 0...1000
    /// Seconds `retryDelay` may be: none to an hour.
    public static let retryDelayRange: ClosedRange<Double> = 0...3600
    /// Seconds `retryMaxDelay` may be: none to a day.
    public static let retryMaxDelayRange: ClosedRange<Double> = 0...86_400
    /// Seconds `retryMaxTime` may be: none to a year.
    public static let retryMaxTimeRange: ClosedRange<Double> = 0...31_536_000

    /// Bytes per second `maxDownloadRate` and a download's `maxRate` may
    /// be: 0 (no limit) to 1 TiB/s; more is a mistake of units, not a limit.
    public static let rateRange: ClosedRange<Int64> = 0...(1 << 40)
}

/// The least severity courier logs, one for the whole process: the
/// command line sets it, `initialize` may change it while courier runs, and
/// every `LiveLevelLogHandler` reads it at each message.
public final class LogLevelSetting: Sendable {
    private let index: Atomic<Int>

    public init(_ level: Logger.Level) {
        index = Atomic(Self.levels.firstIndex(of: level) ?? 0)
    }

    private static let levels = Logger.Level.allCases

    public var level: Logger.Level {
        get { Self.levels[index.load(ordering: .relaxed)] }
        set { index.store(Self.levels.firstIndex(of: newValue) ?? 0, ordering: .relaxed) }
    }
}

/// A log handler in front of another whose level is a `LogLevelSetting`,
/// read at each message, so that a change reaches every logger at once.
/// Setting `logLevel` sets it for the whole process.
public struct LiveLevelLogHandler: LogHandler {
    private var base: any LogHandler
    private let setting: LogLevelSetting

    public init(_ base: any LogHandler, level setting: LogLevelSetting) {
        self.base = base
        self.setting = setting
    }

    public func log(event: LogEvent) { base.log(event: event) }

    public var logLevel: Logger.Level {
        get { setting.level }
        nonmutating set { setting.level = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { base.metadataProvider }
        set { base.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    public var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }
}

/// Sizes with units, as the command line takes them: `1048576`, `512KiB`,
/// `100MiB`, `2GiB`, `10MB` (decimal), `1k`.
public enum ByteSize {
    public static func parse(_ text: String) -> Int64? {
        let trimmed = text.trimmingHorizontalSpace
        let digits = trimmed.prefix(while: { $0.isNumber || $0 == "." })
        guard !digits.isEmpty, let number = Double(digits) else { return nil }
        let unit = trimmed.dropFirst(digits.count).trimmingHorizontalSpace.lowercased()
        let multipliers: [String: Double] = [
            "": 1, "b": 1,
            "k": 1024, "kib": 1024, "kb": 1000,
            "m": Double(1 << 20), "mib": Double(1 << 20), "mb": 1e6,
            "g": Double(1 << 30), "gib": Double(1 << 30), "gb": 1e9,
            "t": Double(1 << 40), "tib": Double(1 << 40), "tb": 1e12,
        ]
        guard let multiplier = multipliers[unit] else { return nil }
        let bytes = (number * multiplier).rounded()
        guard bytes >= 0, bytes < 9.2e18 else { return nil }
        return Int64(bytes)
    }
}
