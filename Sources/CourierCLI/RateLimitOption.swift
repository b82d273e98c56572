import ArgumentParser
import Courier

/// A rate limit on the command line: bytes per second, written as sizes
/// are (`8MiB` is 8 MiB/s), 0 for none. Serving takes it as
/// `--max-download-rate`; `courier get` as `--limit-rate`, curl's name.
enum RateLimitOption {
    /// `--max-download-rate`'s help.
    static let serverHelp = "Bytes per second all downloads together may take, shared fairly among those running, written as a size: 512KiB, 8MiB (default: 0, no limit)."
    /// `courier get --limit-rate`'s help: unlike curl's, the limit is for
    /// the whole run, so that more jobs never take more of the link.
    static let getHelp = "Bytes per second all downloads of the run together may take, shared fairly among those running, written as a size: 512KiB, 8MiB (default: 0, no limit)."

    /// The rate `text` names, or nil when it is no size or more than
    /// `Configuration.rateRange` allows.
    static func rate(_ text: String) -> Int64? {
        ByteSize.parse(text).flatMap { Configuration.rateRange.contains($0) ? $0 : nil }
    }
}

/// `RateLimitOption.rate` for ArgumentParser: a usage error when `text` is
/// no rate.
func parseRate(_ text: String) throws -> Int64 {
    guard let bytes = ByteSize.parse(text) else {
        throw ValidationError("'\(text)' is not a rate in bytes per second (examples: 512KiB, 8MiB, 0 for no limit)")
    }
    guard let rate = RateLimitOption.rate(text) else {
        throw ValidationError("a rate of \(bytes) bytes per second is more than 1TiB per second")
    }
    return rate
}
