/// What courier does after an attempt fails: which failures may pass with
/// time, and how long to wait before asking again. As curl does it:
/// doubling waits with a cap, and a `Retry-After` honoured but bounded (one
/// of a day must not stall a client for a day).
///
/// A value without a clock or randomness of its own: the caller passes a
/// receipt's budget (`RetryWindow`) and a random factor, so every decision
/// is a function of its inputs.
struct RetryPolicy: Hashable, Sendable {
    /// `--retry-delay`: seconds before the second attempt of a budget,
    /// doubling for each attempt after it.
    var delay = 0.5
    /// `--retry-max-delay`: no wait is longer. A `Retry-After` beyond it is
    /// not waited for.
    var maxDelay = 30.0
    /// `--retry-max-time`: no attempt starts later than this many seconds
    /// after the first attempt of a receipt's budget.
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

    /// The wait after attempt `attempt` of a budget (1 for its first)
    /// failed, before any `Retry-After`: `delay` × 2^(attempt−1) × `random`
    /// (clamped to 0.5...1), at most `maxDelay`.
    func backoff(after attempt: Int, random: Double) -> Double {
        let doublings = min(max(attempt, 1), 65) - 1
        let factor = min(max(random, 0.5), 1)
        return min(delay * Double(sign: .plus, exponent: doublings, significand: factor), maxDelay)
    }

    /// What a receipt does after `failure`: wait and try again, or end now.
    /// It ends when the failure is not transient, when its budget is spent,
    /// when the origin's `Retry-After` is beyond `maxDelay`, or when the next
    /// attempt would start more than `maxTime` after the budget's first; in
    /// the last two cases, when `Retry-After` is what makes the wait too
    /// long, the decision carries it so the client can decide for itself.
    /// The wait doubles with the budget's attempts.
    func decision(after failure: AttemptFailure, budget: RetryBudget, random: Double) -> RetryDecision {
        guard Self.isTransient(failure), budget.attempts <= budget.retries else { return .fail(retryAfter: nil) }
        let asked = failure.retryAfter
        if let asked, Double(asked) > maxDelay { return .fail(retryAfter: asked) }
        let wait = max(backoff(after: budget.attempts, random: random), Double(asked ?? 0))
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
    /// What the response's `Retry-After` asked for, in seconds
    /// (`RetryAfter.seconds`).
    var retryAfter: Int64?
    /// The body came from the network in this attempt, not from a cache tier.
    var fromNetwork = true
    /// An earlier attempt of the same task failed `integrity_mismatch`.
    var followsIntegrityMismatch = false
}

/// What one receipt may still spend on retries, counted from the first
/// attempt of its `RetryWindow`.
struct RetryBudget: Hashable, Sendable {
    /// Its `retries`: how many attempts may follow the budget's first.
    var retries: Int
    /// Attempts the budget counts, the failed one included.
    var attempts: Int
    /// Seconds since the budget's first attempt began.
    var elapsed: Double
}

/// Where a receipt's retry budget counts from: its first attempt, or the
/// last attempt that continued the kept body from further than any earlier
/// attempt of the receipt continued from. A download that moves on is not
/// failing: such an attempt shows that the one before it moved the body on,
/// and the budget (`retries`, the doubling of the wait, `--retry-max-time`)
/// counts again from it, as from a first. Only a continuation the origin
/// agreed to (a `206` from the offset asked, of the same version) counts,
/// so a body that starts anew each time (no validator, an origin that
/// ignores ranges) never does; and the furthest offset only grows and stays
/// within the body, so a body cut again and again still comes to an end.
struct RetryWindow: Hashable, Sendable {
    /// Attempts since the window began, the one it began with included.
    private(set) var attempts = 0
    /// When the attempt the window began with began.
    private(set) var startedAt: Double?
    /// When the latest attempt began.
    private var latestStartedAt: Double?
    /// The furthest byte an attempt continued the body from, 0 when none did.
    private(set) var furthestResume: Int64 = 0

    /// An attempt began at `now`.
    mutating func attemptBegan(now: Double) {
        attempts += 1
        startedAt = startedAt ?? now
        latestStartedAt = now
    }

    /// The latest attempt continued the kept body from byte `offset` (nil
    /// when it did not continue one): when that is further than any attempt
    /// before it, the window begins again with it.
    mutating func attemptContinued(from offset: Int64?) {
        guard let offset, offset > furthestResume else { return }
        furthestResume = offset
        attempts = 1
        startedAt = latestStartedAt
    }

    /// Seconds at `now` since the window's first attempt began.
    func elapsed(now: Double) -> Double {
        now - (startedAt ?? now)
    }

    /// The budget of a receipt with `retries` at `now`.
    func budget(retries: Int, now: Double) -> RetryBudget {
        RetryBudget(retries: retries, attempts: attempts, elapsed: elapsed(now: now))
    }
}

/// The retry policy's answer for one receipt.
enum RetryDecision: Hashable, Sendable {
    /// Wait this many seconds, then start the next attempt.
    case retry(after: Double)
    /// End with the failure now; `retryAfter` is the origin's `Retry-After`
    /// when waiting for it is why not.
    case fail(retryAfter: Int64?)
}
