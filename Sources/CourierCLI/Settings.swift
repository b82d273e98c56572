import Courier
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSONRPC
import Logging

// The command line's values as plain structs, apart from ArgumentParser's
// property wrappers: serving takes them from `ServerCommandLine` or from
// ArgumentParser alike, and both check them with the same rules.

/// The cache's settings, shared by serving and `get`.
struct CacheSettings: Sendable {
    var cacheDir: String?
    var memoryCapacity: Int64 = 100 << 20
    var memoryAfterPurge: Int64?
    var diskCapacity: Int64 = 512 << 20

    /// What is wrong with these values together, as the command line says it.
    var problem: String? {
        (memoryAfterPurge ?? 0) <= memoryCapacity ? nil : "--memory-after-purge must not exceed --memory-capacity"
    }

    /// A configuration with these cache settings and defaults for the rest.
    var configuration: Configuration {
        // Absolute, so the directory stays the same whatever courier's
        // working directory is when it opens files there.
        var config = Configuration(cacheDir: cacheDir.map(Configuration.absolutePath))
        config.memoryCapacity = Int(memoryCapacity)
        config.memoryAfterPurge = Int(memoryAfterPurge ?? min(60 << 20, memoryCapacity * 3 / 5))
        config.diskCapacity = Int(diskCapacity)
        return config
    }
}

/// How each transfer runs and what it may do, shared by serving and `get`.
struct TransferSettings: Sendable {
    var allowScheme: [String] = []
    var allowInsecureRedirects = false
    var maxBytes: Int64?
    var timeout: Double = 300
    var connectTimeout: Double = 30
    var lowSpeedLimit: Int64 = 1024
    var lowSpeedTime = 30
    var caFile: String?
    var proxy: String?

    var problem: String? {
        guard Configuration.timeoutRange.contains(timeout), Configuration.timeoutRange.contains(connectTimeout) else {
            return "time-outs must be 0.001 to 31536000 seconds"
        }
        guard Configuration.lowSpeedTimeRange.contains(Int64(lowSpeedTime)) else {
            return "--low-speed-time must be 0 to 86400 seconds"
        }
        return nil
    }

    func apply(to config: inout Configuration) {
        config.allowScheme = allowScheme
        config.allowInsecureRedirects = allowInsecureRedirects
        config.maxBytes = maxBytes
        config.timeout = timeout
        config.connectTimeout = connectTimeout
        config.lowSpeedLimit = lowSpeedLimit
        config.lowSpeedTime = lowSpeedTime
        config.caFile = caFile
        config.proxy = proxy
    }
}

/// How downloads are retried after transient failures.
struct RetrySettings: Sendable {
    var retries = Configuration.defaultRetries
    var retryDelay = 0.5
    var retryMaxDelay = 30.0
    var retryMaxTime = 60.0

    var problem: String? {
        guard Configuration.retriesRange.contains(Int64(retries)) else { return "--retries must be 0 to 1000" }
        guard Configuration.retryDelayRange.contains(retryDelay) else { return "--retry-delay must be 0 to 3600 seconds" }
        guard Configuration.retryMaxDelayRange.contains(retryMaxDelay) else {
            return "--retry-max-delay must be 0 to 86400 seconds"
        }
        guard Configuration.retryMaxTimeRange.contains(retryMaxTime) else {
            return "--retry-max-time must be 0 to 31536000 seconds"
        }
        return nil
    }

    func apply(to config: inout Configuration) {
        config.retries = retries
        config.retryDelay = retryDelay
        config.retryMaxDelay = retryMaxDelay
        config.retryMaxTime = retryMaxTime
    }
}

/// Every setting of the server's command line (`courier [<options>]`).
struct ServerSettings: Sendable {
    var cache = CacheSettings()
    var transfers = TransferSettings()
    var retry = RetrySettings()
    var maxActive = 4
    var prioritization = "fifo"
    var activationDelay = 1.0
    var completionDelay = 0.17
    var noIndicator = false
    var progressInterval = 0.1
    var downloadRoot: String?
    var maxMemoryBody: Int64 = 64 << 20
    var partialCapacity: Int64 = 1 << 30
    var framing = "auto"
    var maxMessageBytes: Int64 = 16 << 20
    var logLevel = "warning"
    /// Bytes per second for all transfers together; 0 for no limit.
    var maxDownloadRate: Int64 = 0

    /// What is wrong with the server's own values (the cache's and the
    /// transfers' are checked apart), as the command line says it.
    var problem: String? {
        guard FramingMode(rawValue: framing) != nil else { return "--framing must be auto, lsp or ndjson" }
        guard Prioritization(rawValue: prioritization) != nil else { return "--prioritization must be fifo or lifo" }
        guard Logger.Level(rawValue: logLevel) != nil else { return "unknown --log-level '\(logLevel)'" }
        guard (1...10_000).contains(maxActive) else { return "--max-active must be 1 to 10000" }
        guard [activationDelay, completionDelay, progressInterval].allSatisfy((0...3600).contains) else {
            return "delays must be 0 to 3600 seconds"
        }
        if let downloadRoot, !downloadRoot.isAbsolutePath { return "--download-root must be an absolute path" }
        return nil
    }

    /// True when nothing at all is wrong.
    var isValid: Bool { problem == nil && cache.problem == nil && transfers.problem == nil && retry.problem == nil }

    /// The configuration to serve with; the settings must be valid.
    var configuration: Configuration {
        var config = cache.configuration
        transfers.apply(to: &config)
        retry.apply(to: &config)
        config.maxActive = maxActive
        config.prioritization = Prioritization(rawValue: prioritization)!
        config.activationDelay = activationDelay
        config.completionDelay = completionDelay
        config.indicatorEnabled = !noIndicator
        config.progressInterval = progressInterval
        config.downloadRoot = downloadRoot.map(Configuration.absolutePath)
        config.maxMemoryBody = maxMemoryBody
        config.partialCapacity = partialCapacity
        config.framing = FramingMode(rawValue: framing)!
        config.maxMessageBytes = Int(maxMessageBytes)
        config.logLevel = Logger.Level(rawValue: logLevel)!
        config.maxDownloadRate = maxDownloadRate
        return config
    }
}
