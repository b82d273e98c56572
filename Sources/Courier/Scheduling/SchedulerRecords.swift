/// What makes two requests the same task: only fields that change what the
/// origin is asked.
struct TaskKey: Hashable, Sendable {
    let method: String
    /// As the client sent it, compared as bytes.
    let url: ExactString
    /// `name: value` lines, names in lower case, sorted, compared as bytes.
    let headers: [ExactString]
    let timeout: Double
    /// The hash of the fields, taken once: a task's key is looked up,
    /// stored and removed again, and each would hash the URL anew.
    private let fieldsHash: Int

    init(_ request: DownloadRequest) {
        method = "GET"
        url = ExactString(request.url)
        // Most requests have no headers of their own: no list is sorted for them.
        headers =
            request.headers.isEmpty
            ? []
            : request.headers.map { "\($0.name.lowercased()): \($0.value)" }
                .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
                .map(ExactString.init)
        timeout = request.timeout
        // The method is always the same, and most requests have no headers:
        // neither is hashed then (equality still compares every field).
        var hasher = Hasher()
        hasher.combine(url)
        if !headers.isEmpty { hasher.combine(headers) }
        hasher.combine(timeout)
        fieldsHash = hasher.finalize()
    }

    static func == (lhs: TaskKey, rhs: TaskKey) -> Bool {
        lhs.fieldsHash == rhs.fieldsHash && lhs.url == rhs.url && lhs.timeout == rhs.timeout && lhs.headers == rhs.headers
            && lhs.method == rhs.method
    }

    func hash(into hasher: inout Hasher) { hasher.combine(fieldsHash) }

    /// Where a hash table puts the key: the hash of its fields, taken once,
    /// mixed with the table's seed (see `NumberHash`).
    func _rawHashValue(seed: Int) -> Int { NumberHash.mix(fieldsHash, seed: seed) }
}

/// One attempt at a task's transfer: a task retried after a transient
/// failure, or fetched again after a 304 that no stored body fits, keeps
/// its id and gets a new attempt, so events of the old transfer are told
/// apart.
struct TransferID: Hashable, Sendable {
    var task: TaskID
    var attempt: Int

    /// Where a hash table puts the id: its task's number and attempt mixed
    /// with the table's seed (see `NumberHash`).
    func _rawHashValue(seed: Int) -> Int { NumberHash.mix(task.number, seed: NumberHash.mix(attempt, seed: seed)) }
}

/// One transfer from the origin, shared by every receipt that asked for it.
struct TaskRecord: Sendable {
    /// Where the task stands, with what only that state knows. Its rare
    /// states hold what they know by reference (a suspension in a box of its
    /// own, a failed attempt as a class): the state is read, matched and
    /// stored again at every event of a task, and held inline a suspended
    /// transfer's whole result made every copy of it hundreds of bytes.
    enum State: Sendable {
        /// Waiting for a place in the run queue. `after` is how the last
        /// attempt failed when the next one is a retry: a receipt past
        /// `--retry-max-time` when it would start ends with it.
        case queued(after: FailedAttempt?)
        /// Its transfer runs.
        case running(Running)
        indirect case suspended(Suspension)
        /// An attempt failed and the next waits until `until` (seconds of
        /// the scheduler's clock): no transfer and no run-queue place, but
        /// bound views keep animating. `after` as for `queued`.
        case retrying(until: Double, after: FailedAttempt)

        /// As `progress`, `suspend` and `resume` tell it.
        var replyState: ReplyState {
            switch self {
            case .queued: .queued
            case .running: .running
            case .suspended: .suspended
            case .retrying: .retrying
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

    /// How an attempt failed, kept until the next one starts.
    final class FailedAttempt: Sendable {
        let failure: TransferFailure
        let response: ResponseHead?

        init(failure: TransferFailure, response: ResponseHead?) {
            self.failure = failure
            self.response = response
        }
    }

    /// An attempt whose transfer the engine has, running or paused.
    struct StartedAttempt: Sendable {
        /// The URL it asks.
        let url: String
        /// Bytes per second its transfer was told it may take: the largest
        /// `maxRate` of the task's receipts, nil when any has none.
        var maxRate: Int64?
    }

    /// A running task's transfer.
    struct Running: Sendable {
        var attempt: StartedAttempt
        /// When it started or was last resumed, in seconds of the
        /// scheduler's clock.
        var since: Double
        /// When bytes that arrived within `progressInterval` of the last
        /// `download/progress` are told, should no more arrive before then.
        var progressDueAt: Double?
    }

    /// What a suspended task leaves to do when resumed.
    enum Suspension: Sendable {
        /// Its attempt had not started (it was queued or waiting to try
        /// again): it goes back to the run queue. `after` as for `queued`.
        case unstarted(after: FailedAttempt?)
        /// The engine holds its transfer paused. `held` is the transfer's
        /// result when its last bytes arrived as it was being suspended:
        /// the task finishes with it.
        case paused(StartedAttempt, held: TransferResult?)
    }

    /// What an attempt has received, for progress: kept when it stops, and
    /// started again from nothing by the next.
    struct Figures: Sendable {
        var received: Int64 = 0
        var expected: Int64?
        /// The final response's Content-Type once its headers are in, for
        /// the charset its `text` receipts decode from.
        var contentType: String?
        /// Seconds spent running (not suspended) before `Running.since`.
        var activeSeconds = 0.0
        var lastProgressAt = -Double.infinity
        var lastProgressReceived: Int64 = -1
    }

    let id: TaskID
    /// The number of the attempt under way or to come, 1 for the first.
    var attempt: Int
    let key: TaskKey
    let request: DownloadRequest
    /// Receipt ids, oldest first.
    var receipts: [ReceiptID] = []
    var state = State.queued(after: nil)
    var priority: Priority
    /// Bumped whenever the task's place in the run queue changes, so older
    /// queue entries are skipped.
    var queueGeneration = 0
    /// The stored response this task asks the origin to validate.
    var revalidating: Revalidation?
    var figures = Figures()

    /// `key` is `request`'s, when the caller has made it already.
    init(id: TaskID, attempt: Int = 1, request: DownloadRequest, key: TaskKey? = nil) {
        self.id = id
        self.attempt = attempt
        self.key = key ?? TaskKey(request)
        self.request = request
        self.priority = request.priority
    }

    var transferID: TransferID { TransferID(task: id, attempt: attempt) }

    /// Its attempt, while the engine has its transfer.
    var startedAttempt: StartedAttempt? {
        switch state {
        case .running(let running): running.attempt
        case .suspended(.paused(let attempt, _)): attempt
        case .queued, .retrying, .suspended(.unstarted): nil
        }
    }

    /// When bytes held back are due to be told; only a running task holds
    /// any back, so setting it in another state changes nothing.
    var progressDueAt: Double? {
        get {
            guard case .running(let running) = state else { return nil }
            return running.progressDueAt
        }
        set {
            // Left as it is when unchanged (as it mostly is when progress is
            // told): storing the state again would destroy the old one.
            guard case .running(var running) = state, running.progressDueAt != newValue else { return }
            running.progressDueAt = newValue
            state = .running(running)
        }
    }

    /// Its transfer starts: the figures start again from nothing (what a
    /// continued body already holds comes with its first bytes).
    mutating func begin(_ attempt: StartedAttempt, now: Double) {
        state = .running(Running(attempt: attempt, since: now))
        figures = Figures()
    }

    /// Its started transfer was told it may take `maxRate` bytes per second.
    mutating func limitRate(to maxRate: Int64?) {
        switch state {
        case .running(var running):
            running.attempt.maxRate = maxRate
            state = .running(running)
        case .suspended(.paused(var attempt, let held)):
            attempt.maxRate = maxRate
            state = .suspended(.paused(attempt, held: held))
        case .queued, .retrying, .suspended(.unstarted):
            break
        }
    }

    /// Marks what has arrived as told, and gives the progress to tell with
    /// the receipts to tell it to: nil when nothing arrived since it was
    /// last told, or no receipt is left. Nothing is due any more either way.
    mutating func takeProgress(now: Double) -> (progress: TaskProgress, receipts: [ReceiptID])? {
        progressDueAt = nil
        guard !receipts.isEmpty, figures.received > figures.lastProgressReceived else { return nil }
        figures.lastProgressAt = now
        figures.lastProgressReceived = figures.received
        return (progress(now: now), receipts)
    }

    func bytesPerSecond(now: Double) -> Double {
        var seconds = figures.activeSeconds
        if case .running(let running) = state { seconds += now - running.since }
        return seconds > 0 ? Double(figures.received) / seconds : 0
    }

    func progress(now: Double) -> TaskProgress {
        TaskProgress(
            task: id, received: figures.received, expected: figures.expected,
            bytesPerSecond: bytesPerSecond(now: now).rounded())
    }
}

/// One client's claim on a task's result: it ends with exactly one
/// `download/finished`.
struct ReceiptRecord<Waiter> {
    enum Phase {
        /// Joined to its task, which is live and reports its figures.
        case joined
        /// Its task has ended (or a cache tier answers it) and its outcome
        /// is being prepared. `final` is its task's figures when it ended,
        /// nil when it never joined one.
        case completing(final: TaskProgress?)
    }

    let id: ReceiptID
    let taskID: TaskID
    let request: DownloadRequest
    let createdAt: Double
    var phase: Phase
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

    /// Joined to its live task: not yet completing.
    var isJoined: Bool {
        if case .joined = phase { true } else { false }
    }

    /// An attempt asking `url` began for it.
    mutating func countAttempt(url: String, now: Double) {
        attempts += 1
        retryWindow.attemptBegan(now: now)
        attemptURL = url
    }
}

extension ReceiptRecord: Sendable where Waiter: Sendable {}
