/// What courier does after an attempt fails: which failures may pass with
/// time, and how long to wait before asking again. As curl does it:
/// doubling waits with a cap, and a `Retry-After` honoured but bounded (one
/// of a day must not stall a client for a day).
///
/// A value without a clock or randomness of its own: the caller passes the
/// time since a receipt's first attempt and a random factor, so every
/// decision is a function of its inputs.
struct RetryPolicy: Hashable, Sendable {
    /// `--retry-delay`: seconds before the second attempt, doubling for each
    /// attempt after it.
    var delay = 0.5
    /// `--retry-max-delay`: no wait is longer. A `Retry-After` beyond it is
    /// not waited for.
    var maxDelay = 30.0
    /// `--retry-max-time`: no attempt starts later than this many seconds
    /// after a receipt's first.
    var maxTime = 60.0

    /// Statuses that say "not now" rather than "no": a timeout, too many
    /// requests, a server error or overload, a gateway that could not reach
    /// its upstream (Cloudflare's 522 and 524 among them).
    static let transientStatuses: Set<Int> = [408, 429, 500, 502, 503, 504, 522, 524]

    /// Whether another attempt might succeed where `failure` failed:
    /// `timeout`, `connect_failed`, `network` (a reset, a body shorter than
    /// announced), `http_status` with a transient status, and the first
    /// `integrity_mismatch` of a body from the network (a body corrupted in
    /// flight; a second one means the origin serves another body).
    static func isTransient(_ failure: AttemptFailure) -> Bool {
        switch failure.code {
        case .timeout, .connectFailed, .network:
            true
        case .httpStatus:
            failure.httpStatus.map(transientStatuses.contains) ?? false
        case .integrityMismatch:
            failure.fromNetwork && !failure.followsIntegrityMismatch
        default:
            false
        }
    }

    /// The wait after attempt `attempt` (1 for the first) failed, before any
    /// `Retry-After`: `delay` × 2^(attempt−1) × `random` (clamped to
    /// 0.5...1), at most `maxDelay`.
    func backoff(after attempt: Int, random: Double) -> Double {
        let doublings = min(max(attempt, 1), 65) - 1
        let factor = min(max(random, 0.5), 1)
        return min(delay * Double(sign: .plus, exponent: doublings, significand: factor), maxDelay)
    }

    /// What a receipt does after `failure`: wait and try again, or end now.
    /// It ends when the failure is not transient, when its budget is spent,
    /// when the origin's `Retry-After` is beyond `maxDelay`, or when the next
    /// attempt would start more than `maxTime` after its first; in the last
    /// two cases, when `Retry-After` is what makes the wait too long, the
    /// decision carries it so the client can decide for itself.
    func decision(after failure: AttemptFailure, budget: RetryBudget, random: Double) -> RetryDecision {
        guard Self.isTransient(failure), budget.attempts <= budget.retries else { return .fail(retryAfter: nil) }
        let asked = failure.retryAfter
        if let asked, Double(asked) > maxDelay { return .fail(retryAfter: asked) }
        let wait = max(backoff(after: failure.attempt, random: random), Double(asked ?? 0))
        guard budget.elapsed + wait <= maxTime else {
            let askedTooLong = asked.map { budget.elapsed + Double($0) > maxTime } ?? false
            return .fail(retryAfter: askedTooLong ? asked : nil)
        }
        return .retry(after: wait)
    }
}

/// A failed attempt, as the retry policy reads it.
struct AttemptFailure: Hashable, Sendable {
    var code: OutcomeErrorCode
    /// The response's status, for `http_status`.
    var httpStatus: Int?
    /// The number of the attempt that failed, 1 for the first.
    var attempt: Int
    /// What the response's `Retry-After` asked for, in seconds
    /// (`RetryAfter.seconds`).
    var retryAfter: Int64?
    /// The body came from the network in this attempt, not from a cache tier.
    var fromNetwork = true
    /// An earlier attempt of the same task failed `integrity_mismatch`.
    var followsIntegrityMismatch = false
}

/// What one receipt may still spend on retries.
struct RetryBudget: Hashable, Sendable {
    /// Its `retries`: how many attempts may follow its first.
    var retries: Int
    /// Attempts made for it so far, the failed one included.
    var attempts: Int
    /// Seconds since its first attempt began.
    var elapsed: Double
}

/// The retry policy's answer for one receipt.
enum RetryDecision: Hashable, Sendable {
    /// Wait this many seconds, then start the next attempt.
    case retry(after: Double)
    /// End with the failure now; `retryAfter` is the origin's `Retry-After`
    /// when waiting for it is why not.
    case fail(retryAfter: Int64?)
}
