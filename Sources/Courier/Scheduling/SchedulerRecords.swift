/// What makes two requests the same task: only fields that change what the
/// origin is asked.
struct TaskKey: Hashable, Sendable {
    var method: String
    /// As the client sent it, compared as bytes.
    var url: ExactString
    /// `name: value` lines, names in lower case, sorted, compared as bytes.
    var headers: [ExactString]
    var timeout: Double

    init(_ request: DownloadRequest) {
        method = "GET"
        url = ExactString(request.url)
        headers = request.headers.map { "\($0.name.lowercased()): \($0.value)" }
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            .map(ExactString.init)
        timeout = request.timeout
    }
}

/// One attempt at a task's transfer: a task retried after a transient
/// failure, or fetched again after a 304 that no stored body fits, keeps
/// its id and gets a new attempt, so events of the old transfer are told
/// apart.
struct TransferID: Hashable, Sendable {
    var task: String
    var attempt: Int
}

/// One transfer from the origin, shared by every receipt that asked for it.
struct TaskRecord: Sendable {
    enum State: Hashable, Sendable {
        case queued
        case running
        case suspended
        /// An attempt failed and the next waits until `until` (seconds of
        /// the scheduler's clock): no transfer and no run-queue place, but
        /// bound views keep animating.
        case retrying(until: Double)

        /// As `progress` reports it.
        var name: String {
            switch self {
            case .queued: "queued"
            case .running: "running"
            case .suspended: "suspended"
            case .retrying: "retrying"
            }
        }

        /// Bound views animate: the task transfers, or waits to try again.
        var isAnimating: Bool {
            switch self {
            case .running, .retrying: true
            case .queued, .suspended: false
            }
        }
    }

    let id: String
    /// The number of the attempt under way or to come, 1 for the first.
    var attempt: Int
    let key: TaskKey
    let request: DownloadRequest
    /// Receipt ids, oldest first.
    var receipts: [String] = []
    var state = State.queued
    /// Whether the transfer has been handed to the engine.
    var started = false
    var priority: Priority
    /// Bumped whenever the task's place in the run queue changes, so older
    /// queue entries are skipped.
    var queueGeneration = 0
    /// The stored response this task asks the origin to validate.
    var revalidation: ResponseCache.Stale?
    /// The transfer's result when its last bytes arrived as it was being
    /// suspended: the task stays suspended and finishes when resumed.
    var held: TransferResult?
    /// How the last attempt failed, while the next one waits: a receipt
    /// past `--retry-max-time` when it would start ends with it.
    var lastFailure: (failure: TransferFailure, response: ResponseHead?)?
    /// The URL the attempt under way asks.
    var attemptURL: String?
    /// Bytes per second its started transfer was told it may take: the
    /// largest `maxRate` of its receipts, nil when any has none.
    var maxRate: Int64?

    var received: Int64 = 0
    var expected: Int64?
    /// The final response's Content-Type once its headers are in, for the
    /// charset its `text` receipts decode from.
    var contentType: String?
    /// Seconds spent running (not suspended) before `runningSince`.
    var activeSeconds = 0.0
    var runningSince: Double?
    var lastProgressAt = -Double.infinity
    var lastProgressReceived: Int64 = -1
    /// When bytes that arrived within `progressInterval` of the last
    /// `download/progress` are told, should no more arrive before then.
    var progressDueAt: Double?

    init(id: String, attempt: Int = 1, request: DownloadRequest) {
        self.id = id
        self.attempt = attempt
        self.key = TaskKey(request)
        self.request = request
        self.priority = request.priority
    }

    var transferID: TransferID { TransferID(task: id, attempt: attempt) }

    /// Its transfer starts, asking `url`: the figures start again from
    /// nothing (what a continued body already holds comes with its first
    /// bytes).
    mutating func beginAttempt(url: String, now: Double) {
        started = true
        state = .running
        runningSince = now
        attemptURL = url
        lastFailure = nil
        received = 0
        expected = nil
        contentType = nil
        activeSeconds = 0
        lastProgressAt = -.infinity
        lastProgressReceived = -1
        progressDueAt = nil
    }

    func bytesPerSecond(now: Double) -> Double {
        let seconds = activeSeconds + (runningSince.map { now - $0 } ?? 0)
        return seconds > 0 ? Double(received) / seconds : 0
    }

    func progress(now: Double) -> TaskProgress {
        TaskProgress(
            task: id, received: received, expected: expected,
            bytesPerSecond: bytesPerSecond(now: now).rounded())
    }
}

/// One client's claim on a task's result: it ends with exactly one
/// `download/finished`.
struct ReceiptRecord<Waiter> {
    enum Phase {
        case active
        /// Its task has ended (or a cache tier answers it) and its outcome
        /// is being prepared.
        case completing
    }

    let id: String
    let taskID: String
    let request: DownloadRequest
    let createdAt: Double
    var phase = Phase.active
    /// Joined to the live task `taskID`.
    var attached = false
    /// The task's figures when it ended, kept while the outcome is prepared.
    var finalProgress: TaskProgress?
    /// The `download`s with `wait: true` that made or reused this receipt:
    /// each is answered with the outcome when it finishes.
    var waiters: [(waiter: Waiter, reused: Bool)] = []
    /// Requests to origins made for it: its outcome's `attempts`.
    var attempts = 0
    /// What its retry budget counts: its attempts from its first (its
    /// task's, or the one it joined), or from the last that continued the
    /// body further than any before.
    var retryWindow = RetryWindow()
    /// The URL of its last attempt: a failed outcome without a response
    /// names it as `finalUrl`.
    var attemptURL: String?
    /// A body from the network failed its `integrity`: another that does
    /// is not retried.
    var hadIntegrityMismatch = false

    /// An attempt asking `url` began for it.
    mutating func countAttempt(url: String, now: Double) {
        attempts += 1
        retryWindow.attemptBegan(now: now)
        attemptURL = url
    }
}

extension ReceiptRecord: Sendable where Waiter: Sendable {}
