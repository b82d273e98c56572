import ArgumentParser
import Courier

/// How downloads are retried after transient failures.
struct RetryOptions: ParsableArguments {
    private static let defaults = RetrySettings()

    @Option(help: "Attempts that may follow a download's first after a transient failure, counted again after an attempt that moved the body on (0: no retries).")
    var retries: Int = defaults.retries

    @Option(help: "Seconds before the second attempt, doubling for each attempt after it (scaled by a random 0.5 to 1).")
    var retryDelay: Double = defaults.retryDelay

    @Option(help: "Longest wait before an attempt, in seconds; a Retry-After beyond it fails the download at once.")
    var retryMaxDelay: Double = defaults.retryMaxDelay

    @Option(help: "Seconds after a download's first attempt, or the first after the last one that moved the body on, past which no attempt starts.")
    var retryMaxTime: Double = defaults.retryMaxTime

    func validate() throws {
        if let problem = settings.problem { throw ValidationError(problem) }
    }

    var settings: RetrySettings {
        RetrySettings(retries: retries, retryDelay: retryDelay, retryMaxDelay: retryMaxDelay, retryMaxTime: retryMaxTime)
    }
}
