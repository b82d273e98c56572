import ArgumentParser
import Courier

/// How each transfer runs and what it may do, shared by serving and `get`.
struct TransferOptions: ParsableArguments {
    @Option(help: "A URL scheme to allow beyond http and https (repeatable).")
    var allowScheme: [String] = []

    @Flag(help: "Let a redirect lead from https down to http (refused by default with insecure_redirect).")
    var allowInsecureRedirects = false

    @Option(help: "Largest body a download may have (default: no limit).", transform: parseSize)
    var maxBytes: Int64?

    @Option(help: "Seconds a whole transfer may take.")
    var timeout: Double = 300

    @Option(help: "Seconds a connection may take to open.")
    var connectTimeout: Double = 30

    @Option(help: "Bytes per second below which a transfer that lasts --low-speed-time fails as timed out (default: 1KiB; 0: off).", transform: parseSize)
    var lowSpeedLimit: Int64 = 1024

    @Option(help: "Seconds a transfer may stay below --low-speed-limit (0: off).")
    var lowSpeedTime: Int = 30

    @Option(help: "File of extra trusted CA certificates (PEM).")
    var caFile: String?

    @Option(help: "Proxy for every transfer (overrides http_proxy, https_proxy and no_proxy).")
    var proxy: String?

    func validate() throws {
        guard Configuration.timeoutRange.contains(timeout), Configuration.timeoutRange.contains(connectTimeout) else {
            throw ValidationError("time-outs must be 0.001 to 31536000 seconds")
        }
        guard Configuration.lowSpeedTimeRange.contains(Int64(lowSpeedTime)) else {
            throw ValidationError("--low-speed-time must be 0 to 86400 seconds")
        }
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
