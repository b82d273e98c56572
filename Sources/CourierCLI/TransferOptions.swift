import ArgumentParser
import Courier

/// How each transfer runs and what it may do, shared by serving and `get`.
struct TransferOptions: ParsableArguments {
    private static let defaults = TransferSettings()

    @Option(help: "A URL scheme to allow beyond http and https (repeatable).")
    var allowScheme: [String] = defaults.allowScheme

    @Flag(help: "Let a redirect lead from https down to http (refused by default with insecure_redirect).")
    var allowInsecureRedirects = defaults.allowInsecureRedirects

    @Option(help: "Largest body a download may have (default: no limit).", transform: parseSize)
    var maxBytes: Int64?

    @Option(help: "Seconds a whole transfer may take.")
    var timeout: Double = defaults.timeout

    @Option(help: "Seconds a connection may take to open.")
    var connectTimeout: Double = defaults.connectTimeout

    @Option(help: "Bytes per second below which a transfer that lasts --low-speed-time fails as timed out (default: 1KiB; 0: off).", transform: parseSize)
    var lowSpeedLimit: Int64 = defaults.lowSpeedLimit

    @Option(help: "Seconds a transfer may stay below --low-speed-limit (0: off).")
    var lowSpeedTime: Int = defaults.lowSpeedTime

    @Option(help: "File of extra trusted CA certificates (PEM).", completion: .file())
    var caFile: String?

    @Option(help: "Proxy for every transfer (overrides http_proxy, https_proxy and no_proxy).")
    var proxy: String?

    func validate() throws {
        if let problem = settings.problem { throw ValidationError(problem) }
    }

    var settings: TransferSettings {
        TransferSettings(
            allowScheme: allowScheme, allowInsecureRedirects: allowInsecureRedirects, maxBytes: maxBytes,
            timeout: timeout, connectTimeout: connectTimeout, lowSpeedLimit: lowSpeedLimit,
            lowSpeedTime: lowSpeedTime, caFile: caFile, proxy: proxy)
    }
}
