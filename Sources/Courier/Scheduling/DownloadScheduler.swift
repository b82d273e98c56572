import Curl

/// What the scheduler follows from the configuration.
struct SchedulerSettings: Sendable {
    var maxActive = 4
    var prioritization = Prioritization.fifo
    var progressInterval = 0.1
    /// `--max-memory-body`: the limit of receipts asking for `text` or `base64`.
    var maxMemoryBody: Int64 = 64 << 20
    var allowedSchemes: Set<String> = ["http", "https"] {
        didSet { allowsWebSchemes = Self.webSchemes(in: allowedSchemes) }
    }
    /// Whether `allowedSchemes` holds `http`, and `https`: nearly every
    /// request names one of them, told apart by its bytes rather than by
    /// hashing it into the set.
    private var allowsWebSchemes = (http: true, https: true)
    /// `--retry-delay`, `--retry-max-delay`, `--retry-max-time`.
    var retry = RetryPolicy()

    init() {}

    init(_ configuration: Configuration) {
        maxActive = configuration.maxActive
        prioritization = configuration.prioritization
        progressInterval = configuration.progressInterval
        maxMemoryBody = configuration.maxMemoryBody
        allowedSchemes = configuration.allowedSchemes
        allowsWebSchemes = Self.webSchemes(in: allowedSchemes)
        retry = RetryPolicy(
            delay: configuration.retryDelay, maxDelay: configuration.retryMaxDelay, maxTime: configuration.retryMaxTime)
    }

    /// Whether a request of `scheme` may run (`allowedSchemes`).
    func allows(scheme: String) -> Bool {
        if scheme.isExactly("https") { return allowsWebSchemes.https }
        if scheme.isExactly("http") { return allowsWebSchemes.http }
        return allowedSchemes.contains(scheme)
    }

    private static func webSchemes(in schemes: Set<String>) -> (http: Bool, https: Bool) {
        (schemes.contains("http"), schemes.contains("https"))
    }
}

/// What the cache tiers hold for a new request.
enum CacheAnswer: Sendable {
    /// A tier answers it as it is.
    case hit(OutcomeSource)
    /// A stored response to validate with the origin: boxed, so that the
    /// answer of every request is a reference wide.
    indirect case stale(ResponseCache.Stale)
    case miss
}

/// What became of a `download`.
enum Admission: Equatable, Sendable {
    /// The slot's unfinished receipt for the same URL answers it.
    case reused
    /// It finished at once with a failure.
    case refused
    /// A cache tier answers receipt `receipt`: its outcome is to be
    /// delivered from the stored response.
    case served(receipt: ReceiptID)
    /// It joined a task that was already queued or running.
    case joined
    /// A new task was queued for it.
    case queued
}

/// Which receipts `cancel` ends.
enum CancelTarget: Sendable {
    case receipt(ReceiptID)
    case slot(String)
    case all
}

/// What `suspend`, `resume` and `bind` name.
enum TaskTarget: Sendable {
    case task(TaskID)
    case receipt(ReceiptID)
}

/// AFImageDownloader's bookkeeping as a value: receipts, coalescing of
/// identical requests into tasks, slots, a bounded run queue with
/// priorities, suspend and resume, retries, progress, the history of
/// finished receipts, and the views bound to tasks.
///
/// It does no I/O and keeps no time of its own: each event names the moment
/// it happened (`now`, in seconds of a monotonic clock), and what the world
/// must do about it — answers, notifications, transfers to start or stop,
/// bodies to deliver, a wake-up when a wait ends — piles up as actions that
/// `takeActions()` hands over in the order they happened. Every receipt
/// ends with exactly one `download/finished`. `Waiter` is whatever answers
/// a request.
struct DownloadScheduler<Waiter> {
    var settings: SchedulerSettings
    private(set) var tasks: [TaskID: TaskRecord] = [:]
    private var tasksByKey: [TaskKey: TaskID] = [:]
    /// Receipts without their `download/finished` yet.
    private(set) var receipts: [ReceiptID: ReceiptRecord<Waiter>] = [:]
    /// By slot name, compared as bytes.
    private var slots: [ExactString: ReceiptID] = [:]
    private(set) var history = FinishedHistory(limit: 10_000)
    private var queue = RunQueue()
    /// Tasks handed to the engine and not yet ended, suspended ones included.
    private(set) var running = 0
    private var counter = 0
    private(set) var isShutDown = false
    private(set) var bindings = ViewBindings()
    /// Tasks whose body is complete and is being checked against their
    /// receipts' `integrity`: their bound views hear that they finished
    /// once it is known that no receipt waits for another attempt.
    private var verifying: Set<TaskID> = []
    private var actions: [SchedulerAction<Waiter>] = []
    /// The random factor of each wait before a retry, in 0.5...1.
    private let random: @Sendable () -> Double

    init(
        settings: SchedulerSettings = SchedulerSettings(), random: @escaping @Sendable () -> Double = { .random(in: 0.5...1) }
    ) {
        self.settings = settings
        self.random = random
    }

    /// What the events since the last call ask for, oldest first.
    mutating func takeActions() -> [SchedulerAction<Waiter>] {
        var taken: [SchedulerAction<Waiter>] = []
        takeActions(into: &taken)
        return taken
    }

    /// Appends what the events since the last call ask for to `list`,
    /// oldest first. An empty `list` trades storage with the scheduler's
    /// own, so a step's actions are neither copied nor allocated anew.
    mutating func takeActions(into list: inout [SchedulerAction<Waiter>]) {
        if list.isEmpty {
            swap(&list, &actions)
        } else {
            list.append(contentsOf: actions)
            actions.removeAll(keepingCapacity: true)
        }
    }

    /// Makes room in the maps of tasks and receipts for `count` more
    /// requests that will queue, so a burst of them (a batch of thousands)
    /// grows each map once, rather than doubling it over and over: each
    /// doubling moves every entry to a new table on fresh memory.
    mutating func reserveCapacity(forQueuing count: Int) {
        guard count > 1 else { return }
        receipts.reserveCapacity(receipts.count + count)
        tasks.reserveCapacity(tasks.count + count)
        tasksByKey.reserveCapacity(tasksByKey.count + count)
    }

    mutating func update(settings newSettings: SchedulerSettings, now: Double) {
        settings = newSettings
        pump(now: now)
    }

    /// Nothing is left to do but what waits on the client: every unfinished
    /// receipt belongs to a suspended task.
    var isSettled: Bool {
        receipts.values.allSatisfy { receipt in
            guard receipt.isJoined, case .suspended? = tasks[receipt.taskID]?.state else { return false }
            return true
        }
    }

    // MARK: - Requests

    /// A `download`. `refusal` is why it may not run (its destination was
    /// refused); `cache` what the cache tiers hold for it.
    @discardableResult
    mutating func download(
        _ request: DownloadRequest, refusal: TransferFailure? = nil, cache: CacheAnswer = .miss, waiter: Waiter, now: Double
    ) -> Admission {
        download(request, refusal: refusal, cache: cache, waiter: waiter, now: now) { _ in nil }
    }

    /// A `download` whose receipt, when a cache tier answers it, `serve`
    /// may finish at once: given the receipt, it returns the outcome and
    /// the moment it was made, and the receipt finishes with it as
    /// `delivered` would, never kept among the unfinished ones. When it
    /// returns nil, the outcome is to be delivered later, as for
    /// `download(_:refusal:cache:waiter:now:)`.
    @discardableResult
    mutating func download(
        _ request: DownloadRequest, refusal: TransferFailure? = nil, cache: CacheAnswer = .miss, waiter: Waiter, now: Double,
        serve: (ReceiptID) -> (outcome: Outcome, now: Double)?
    ) -> Admission {
        if let slot = request.slot, let currentID = slots[ExactString(slot)], let current = receipts[currentID],
            current.isJoined
        {
            if current.request.url.isExactly(request.url) {
                if request.wait {
                    receipts[currentID]?.waiters.append((waiter, true))
                } else {
                    answer(waiter, .download(reply(receipt: current.id, task: current.taskID, reused: true)))
                }
                return .reused
            }
            cancel(receipt: currentID, now: now)
        }
        counter += 1
        let receiptID = ReceiptID(counter)
        // Made only when a task may have it, or one is made: a request a
        // cache tier answers while nothing is queued or running needs none.
        let known = tasksByKey.isEmpty ? nil : TaskKey(request)
        let existing = known.flatMap { tasksByKey[$0] }
        let taskID = existing ?? TaskID(counter)
        // A receipt a cache tier answers, or one refused, never joins its task.
        var receipt = ReceiptRecord<Waiter>(
            id: receiptID, taskID: taskID, request: request, createdAt: now, phase: .completing(final: nil))
        if request.wait { receipt.waiters.append((waiter, false)) }
        if let slot = request.slot { slots[ExactString(slot)] = receiptID }

        var refusal = refusal
        if !settings.allows(scheme: request.scheme) {
            refusal = TransferFailure(code: .schemeNotAllowed, message: "the scheme '\(request.scheme)' is not allowed")
        } else if refusal == nil, case .hit(let source) = cache {
            if !request.wait {
                let reply = DownloadReply(receipt: receiptID, task: taskID, state: .finished, reused: false, source: source)
                answer(waiter, .download(reply))
            }
            if let served = serve(receiptID) {
                finish(receipt, served.outcome, now: served.now)
            } else {
                receipts[receiptID] = receipt
            }
            return .served(receipt: receiptID)
        } else if refusal == nil, request.cachePolicy == .cacheOnly {
            refusal = TransferFailure(code: .notCached, message: "no cached response for \(request.url)")
        }
        if let refusal {
            if !request.wait {
                answer(waiter, .download(DownloadReply(receipt: receiptID, task: taskID, state: .finished, reused: false)))
            }
            finish(receipt, Outcome(url: request.url, failure: refusal), now: now)
            return .refused
        }

        let admission: Admission
        receipt.phase = .joined
        if let existing, var task = tasks[existing] {
            if request.priority > task.priority {
                task.priority = request.priority
                if case .queued = task.state { enqueue(&task) }
            }
            task.receipts.append(receiptID)
            if let attempt = task.startedAttempt { receipt.countAttempt(url: attempt.url, now: now) }
            tasks[existing] = task
            receipts[receiptID] = receipt
            updateRateLimit(of: taskID)
            admission = .joined
        } else {
            // Made whole before it is stored: a new task has no attempt
            // under way, nor a rate to change.
            let key = known ?? TaskKey(request)
            var task = TaskRecord(id: taskID, request: request, key: key)
            if case .stale(let stale) = cache { task.revalidating = Revalidation(stale) }
            task.receipts.append(receiptID)
            enqueue(&task)
            tasks[taskID] = task
            tasksByKey[key] = taskID
            receipts[receiptID] = receipt
            admission = .queued
        }
        pump(now: now)
        if !request.wait { answer(waiter, .download(reply(receipt: receiptID, task: taskID))) }
        return admission
    }

    mutating func cancel(_ target: CancelTarget, waiter: Waiter, now: Double) throws(SchedulerError) {
        var count = 0
        switch target {
        case .receipt(let id):
            if receipts[id] != nil {
                count = cancel(receipt: id, now: now) ? 1 : 0
            } else if history[id] == nil {
                throw .unknownReceipt(id)
            }
        case .slot(let slot):
            if let id = slots[ExactString(slot)] { count = cancel(receipt: id, now: now) ? 1 : 0 }
        case .all:
            for id in receipts.keys.sorted() where cancel(receipt: id, now: now) {
                count += 1
            }
        }
        answer(waiter, .cancelled(count: count))
    }

    mutating func suspend(_ target: TaskTarget, waiter: Waiter, now: Double) throws(SchedulerError) {
        guard var task = try resolve(target, waiter: waiter) else { return }
        switch task.state {
        case .running(let running):
            // What arrived before the suspension is told now, not during it.
            if running.progressDueAt != nil { emitProgress(of: &task, now: now) }
            task.figures.activeSeconds += now - running.since
            task.state = .suspended(.paused(running.attempt, held: nil))
            actions.append(.pause(task.transferID))
            actions.append(.transferStopped(task: task.id))
            views { $0.taskStateChanged(task: task.id, running: false) }
        case .queued(let failed):
            task.state = .suspended(.unstarted(after: failed))
        case .retrying(_, let failed):
            // Its wait is dropped: resumed, it goes back to the run queue.
            task.state = .suspended(.unstarted(after: failed))
            views { $0.taskStateChanged(task: task.id, running: false) }
        case .suspended:
            break
        }
        tasks[task.id] = task
        answer(waiter, .task(id: task.id, state: task.state.replyState))
    }

    mutating func resume(_ target: TaskTarget, waiter: Waiter, now: Double) throws(SchedulerError) {
        guard var task = try resolve(target, waiter: waiter) else { return }
        switch task.state {
        case .suspended(.paused(_, let held?)):
            ended(task.id, held, now: now)
        case .suspended(.paused(let attempt, nil)):
            task.state = .running(TaskRecord.Running(attempt: attempt, since: now))
            tasks[task.id] = task
            actions.append(.resume(task.transferID))
            actions.append(.transferStarted(task: task.id))
            views { $0.taskStateChanged(task: task.id, running: true) }
        case .suspended(.unstarted(let failed)):
            task.state = .queued(after: failed)
            enqueue(&task)
            tasks[task.id] = task
            pump(now: now)
        case .queued, .running, .retrying:
            break
        }
        answer(waiter, .task(id: task.id, state: tasks[task.id]?.state.replyState ?? .finished))
    }

    /// `progress`: every task, or one receipt (finished ones from the history).
    mutating func progress(receipt id: ReceiptID?, waiter: Waiter, now: Double) throws(SchedulerError) {
        guard let id else {
            let list = tasks.values.sorted { $0.id < $1.id }.map {
                TaskReport(figures: $0.progress(now: now), receipts: $0.receipts, state: $0.state.replyState)
            }
            answer(waiter, .tasks(list))
            return
        }
        if let receipt = receipts[id] {
            let figures: TaskProgress
            let state: ReplyState
            if receipt.isJoined, let task = tasks[receipt.taskID] {
                figures = task.progress(now: now)
                state = task.state.replyState
            } else if case .completing(let final?) = receipt.phase {
                figures = final
                state = .running
            } else {
                figures = .none(task: receipt.taskID)
                state = .queued
            }
            answer(waiter, .receipt(ReceiptProgress(receipt: id, figures: figures, state: state)))
        } else if let finished = history[id] {
            answer(waiter, .receipt(finished))
        } else {
            throw .unknownReceipt(id)
        }
    }

    /// `bind`: the answer comes first, then the view's current state. A nil
    /// target unbinds the view.
    mutating func bind(view: String, to target: TaskTarget?, kind: BindingKind, waiter: Waiter) throws(SchedulerError) {
        guard let target else {
            views { $0.unbind(view: view) }
            answer(waiter, .bound(view: view, false))
            return
        }
        let task: TaskRecord?
        let id: TaskID
        switch target {
        case .receipt(let receiptID):
            if let receipt = receipts[receiptID] {
                task = receipt.isJoined ? tasks[receipt.taskID] : nil
                id = receipt.taskID
            } else if let finished = history[receiptID] {
                task = nil
                id = finished.figures.task
            } else {
                throw .unknownReceipt(receiptID)
            }
        case .task(let taskID):
            id = taskID
            task = tasks[taskID]
            if task == nil, !hasEnded(task: taskID) { throw .unknownTask(taskID) }
        }
        let snapshot = task.map {
            TaskSnapshot(running: $0.state.isAnimating, received: $0.figures.received, expected: $0.figures.expected)
        }
        answer(waiter, .bound(view: view, snapshot != nil))
        views { $0.bind(view: view, task: id, kind: kind, snapshot: snapshot) }
    }

    /// Ends every unfinished receipt with `shutdown` and stops every
    /// transfer. Receipts whose outcome is being prepared end when it is.
    mutating func shutdown(now: Double) {
        guard !isShutDown else { return }
        isShutDown = true
        for receipt in receipts.values.sorted(by: { $0.id < $1.id }) where receipt.isJoined {
            finish(receipt.id, Outcome(url: receipt.request.url, failure: Self.shutdownFailure), now: now)
        }
        for id in tasks.keys.sorted() { detach(id, completed: false, now: now) }
        queue.removeAll()
    }

    static var shutdownFailure: TransferFailure { TransferFailure(code: .shutdown, message: "courier shut down") }

    // MARK: - Transfer events

    /// The final response's headers are in: receipts that cannot take it end
    /// now, unless its status is one to retry, the task is not suspended, and
    /// the retry policy lets them wait for another attempt. `length` is the
    /// response's `announcedLength`, which the transfer has read already;
    /// `retryAfter` is what its `Retry-After` asks for
    /// (`RetryAfter.seconds`). False when none is left, or all wait, and
    /// the transfer should stop.
    mutating func responseArrived(
        _ transfer: TransferID, _ response: ResponseHead, length: Int64?, retryAfter: Int64? = nil, now: Double
    ) -> Bool {
        guard let index = index(of: transfer) else { return false }
        let (revalidates, taskReceipts, isRunning) = withTask(at: index) { task in
            var isRunning = false
            if case .running = task.state { isRunning = true }
            return (task.revalidating != nil, task.receipts, isRunning)
        }
        if response.status == 304, revalidates { return true }
        withTask(at: index) { task in
            task.figures.expected = length
            task.figures.contentType = response.contentType
        }
        var refused = taskReceipts.compactMap { id -> (ReceiptID, Outcome)? in
            guard let request = withReceipt(id, { $0.request }),
                let failure = request.refusal(of: response, size: length, memoryBodyLimit: settings.maxMemoryBody)
            else { return nil }
            var outcome = Outcome(url: request.url, response: response)
            outcome.error = failure
            return (id, outcome)
        }
        // A status outside 200–299 refuses every receipt alike.
        if isRunning, let failure = refused.first?.1.error, failure.code == .httpStatus {
            let task = tasks.values[index]
            let plan = retryPlan(for: task, after: failure, status: response.status, retryAfter: retryAfter, now: now)
            let retryAfters = Dictionary(plan.ending.map { ($0.receipt, $0.retryAfter) }, uniquingKeysWith: { first, _ in first })
            refused = refused.compactMap { id, outcome in
                guard let retryAfter = retryAfters[id] else { return nil }
                var outcome = outcome
                outcome.retryAfter = retryAfter
                return (id, outcome)
            }
            if !plan.waiting.isEmpty {
                for (id, outcome) in refused { finish(id, outcome, now: now) }
                waitToRetry(task.id, plan, after: failure, response: response, now: now)
                return false
            }
        }
        return end(refused, of: transfer.task, now: now)
    }

    /// Where task `transfer.task` is in `tasks`, while `transfer` is its
    /// attempt.
    private mutating func index(of transfer: TransferID) -> [TaskID: TaskRecord].Index? {
        guard let index = tasks.index(forKey: transfer.task), withTask(at: index, { $0.attempt }) == transfer.attempt else {
            return nil
        }
        return index
    }

    /// Runs `body` on the task record at `index` where it is stored: a
    /// record read through `tasks.values[index]` is copied whole, every
    /// field of it, once per read, and transfer events read several.
    private mutating func withTask<Result>(at index: [TaskID: TaskRecord].Index, _ body: (inout TaskRecord) -> Result) -> Result {
        body(&tasks.values[index])
    }

    /// Runs `body` on receipt `id`'s record where it is stored, nil when
    /// there is none: as with `withTask`, `receipts[id]` read copies the
    /// whole record, and changed through it moves the record out and back.
    private mutating func withReceipt<Result>(_ id: ReceiptID, _ body: (inout ReceiptRecord<Waiter>) -> Result) -> Result? {
        guard let index = receipts.index(forKey: id) else { return nil }
        return body(&receipts.values[index])
    }

    /// `received` bytes of body have arrived, which take `textLength` bytes
    /// as a JSON string when read as UTF-8 (when the transfer counts it):
    /// receipts whose limits they pass end, and progress is told at most
    /// once per `progressInterval`. False when the transfer should stop.
    mutating func dataArrived(
        _ transfer: TransferID, received: Int64, textLength: Int64? = nil, expected: Int64?, now: Double
    ) -> Bool {
        guard let index = index(of: transfer) else { return false }
        // A running task with nothing held back yet waits for the interval's end.
        let (figures, taskReceipts, startsWait) = withTask(at: index) { task in
            task.figures.received = received
            if expected != nil { task.figures.expected = expected }
            var startsWait = false
            if case .running(let running) = task.state { startsWait = running.progressDueAt == nil }
            return (task.figures, task.receipts, startsWait)
        }
        var tooLarge: [(ReceiptID, Outcome)] = []
        for id in taskReceipts {
            guard let request = withReceipt(id, { $0.request }) else { continue }
            // Other charsets may take fewer bytes than UTF-8 read as it is;
            // only a `text` receipt's limit counts what its text takes.
            let decodesAsUTF8 = textLength != nil && request.body == .text
                && TextDecoding.isUTF8(request.textCharset(contentType: figures.contentType))
            let failure = request.limitRefusal(
                received: received, textLength: decodesAsUTF8 ? textLength : nil, memoryBodyLimit: settings.maxMemoryBody)
            if let failure { tooLarge.append((id, Outcome(url: request.url, failure: failure))) }
        }
        if !tooLarge.isEmpty, !end(tooLarge, of: transfer.task, now: now) { return false }
        if now - figures.lastProgressAt >= settings.progressInterval {
            emitProgress(transfer.task, now: now)
        } else if startsWait {
            let due = figures.lastProgressAt + settings.progressInterval
            if let index = tasks.index(forKey: transfer.task) { withTask(at: index) { $0.progressDueAt = due } }
            actions.append(.wake(at: due))
        }
        return true
    }

    /// The transfer ended: its receipts wait for their outcomes, which the
    /// `deliver` action prepares. A running task's transient failure is
    /// retried for the receipts the retry policy lets wait. A suspended
    /// task's body that was complete before the engine paused it is held
    /// until the task is resumed; a failure (its `timeout`) ends it at once.
    /// Only the task's state is read where the record is stored: the whole
    /// record is copied for a failed attempt alone, and `result` moves on
    /// into the delivery order.
    mutating func transferEnded(_ transfer: TransferID, _ result: consuming TransferResult, now: Double) {
        guard let index = index(of: transfer) else {
            if let path = result.bodyPath { actions.append(.discard(path: path)) }
            return
        }
        switch withTask(at: index, { $0.state }) {
        case .suspended(.paused(let attempt, _)) where result.failure == nil:
            tasks.values[index].state = .suspended(.paused(attempt, held: result))
            return
        case .running:
            guard let failure = result.failure else { break }
            let task = tasks.values[index]
            attemptContinued(task, from: result.resumedFrom)
            let response = result.response
            let plan = retryPlan(for: task, after: failure, status: response?.status, now: now)
            guard !plan.waiting.isEmpty else { break }
            let ending = Set(plan.ending.map(\.receipt))
            if !ending.isEmpty {
                let order = DeliveryOrder(
                    id: transfer, request: task.request, revalidating: task.revalidating,
                    receipts: claim(ending, of: task.id, now: now), result: result)
                actions.append(.deliver(order))
            }
            waitToRetry(task.id, plan, after: failure, response: response, now: now)
            return
        case .queued, .suspended, .retrying:
            break
        }
        ended(transfer.task, result, now: now)
    }

    /// Task `id`'s transfer ended with `result`: every receipt it has
    /// waits for its outcome, which the `deliver` action prepares. The
    /// record is read where it is stored, its receipts' requests too, and
    /// `result` moves into the order.
    private mutating func ended(_ id: TaskID, _ result: consuming TransferResult, now: Double) {
        guard let index = tasks.index(forKey: id) else { return }
        let (transferID, request, revalidating, taskReceipts, untold) = withTask(at: index) { task in
            (task.transferID, task.request, task.revalidating, task.receipts, task.figures.received != task.figures.lastProgressReceived)
        }
        let succeeded = result.failure == nil
        if succeeded, untold { emitProgress(id, now: now) }
        var claimed: [(id: ReceiptID, request: DownloadRequest)] = []
        claimed.reserveCapacity(taskReceipts.count)
        for receiptID in taskReceipts {
            if let request = withReceipt(receiptID, { $0.request }) { claimed.append((receiptID, request)) }
        }
        let checksIntegrity = succeeded && revalidating == nil && claimed.contains { $0.request.integrity != nil }
        if checksIntegrity { verifying.insert(id) }
        detach(id, completed: succeeded, keepingViews: checksIntegrity, now: now)
        pump(now: now)
        let order = DeliveryOrder(id: transferID, request: request, revalidating: revalidating, receipts: claimed, result: result)
        actions.append(.deliver(order))
    }

    /// The outcomes of receipts whose task ended or a cache tier answered.
    mutating func delivered(_ outcomes: [(receipt: ReceiptID, outcome: Outcome)], now: Double) {
        for (id, outcome) in outcomes { finish(id, outcome, now: now) }
    }

    /// The outcomes of the receipts of `order`, a finished transfer. A
    /// receipt that the body from the network failed with
    /// `integrity_mismatch` for the first time (a body corrupted in flight)
    /// does not finish when the retry policy lets it wait: with the others
    /// the body failed, it waits on the task, which keeps its id and fetches
    /// the body anew for them alone (a complete body is never kept to be
    /// continued). Every other receipt finishes. Views bound to the task
    /// hear that it finished only when no receipt waits.
    mutating func delivered(_ outcomes: [(receipt: ReceiptID, outcome: Outcome)], of order: DeliveryOrder, now: Double) {
        var plan = RetryPlan()
        var failure: TransferFailure?
        // Drawn only for a body that failed its integrity: each draw is a
        // system call, which every other body would pay for nothing.
        var random: Double?
        for (id, outcome) in outcomes {
            guard !isShutDown, let error = outcome.error, error.code == .integrityMismatch, var receipt = receipts[id],
                case .completing = receipt.phase
            else { continue }
            let factor = random ?? self.random()
            random = factor
            let attempt = AttemptFailure(
                code: .integrityMismatch, fromNetwork: outcome.source == .network,
                followsIntegrityMismatch: receipt.hadIntegrityMismatch)
            receipt.retryWindow.attemptContinued(from: order.result.resumedFrom)
            receipts[id] = receipt
            let budget = receipt.retryWindow.budget(retries: receipt.request.retries, now: now)
            if case .retry(let delay) = settings.retry.decision(after: attempt, budget: budget, random: factor) {
                plan.delay = max(plan.delay, delay)
                plan.waiting.append(id)
                failure = failure ?? error
            }
        }
        let waiting = Set(plan.waiting)
        for (id, outcome) in outcomes where !waiting.contains(id) { finish(id, outcome, now: now) }
        if let failure {
            waitAgain(order, plan, after: failure, now: now)
        } else if verifying.remove(order.id.task) != nil {
            views { $0.taskFinished(task: order.id.task, received: order.result.size, expected: order.result.size) }
        }
    }

    /// Receipts of `order` the body failed wait `plan.delay` seconds on
    /// its task, brought back under its id for another attempt.
    private mutating func waitAgain(_ order: DeliveryOrder, _ plan: RetryPlan, after failure: TransferFailure, now: Double) {
        let id = order.id.task
        var again = TaskRecord(id: id, attempt: order.id.attempt + 1, request: order.request)
        let until = now + plan.delay
        again.state = .retrying(until: until, after: TaskRecord.FailedAttempt(failure: failure, response: order.result.response))
        for receiptID in plan.waiting where receipts[receiptID] != nil {
            receipts[receiptID]?.phase = .joined
            receipts[receiptID]?.hadIntegrityMismatch = true
            again.receipts.append(receiptID)
        }
        tasks[id] = again
        if tasksByKey[again.key] == nil { tasksByKey[again.key] = id }
        if verifying.remove(id) == nil { views { $0.taskStateChanged(task: id, running: true) } }
        let notice = RetryNotice(task: id, receipts: again.receipts, attempt: again.attempt, delay: plan.delay, error: failure)
        actions.append(.notify(.retrying(notice)))
        actions.append(.wake(at: until))
    }

    /// The origin answered a revalidation with a 304 that no stored body
    /// fits any more: fetch again, without conditions, for the same receipts.
    mutating func retry(_ order: DeliveryOrder, now: Double) {
        guard !isShutDown else {
            for (id, request) in order.receipts {
                finish(id, Outcome(url: request.url, failure: Self.shutdownFailure), now: now)
            }
            return
        }
        var again = TaskRecord(id: order.id.task, attempt: order.id.attempt + 1, request: order.request)
        for (id, _) in order.receipts where receipts[id]?.isJoined == false {
            receipts[id]?.phase = .joined
            again.receipts.append(id)
        }
        guard !again.receipts.isEmpty else { return }
        enqueue(&again)
        tasks[again.id] = again
        if tasksByKey[again.key] == nil { tasksByKey[again.key] = again.id }
        pump(now: now)
    }

    // MARK: - Retries

    /// The clock has reached a moment asked for with `wake(at:)`: bytes
    /// held back by `progressInterval` are told (so a transfer that stalls
    /// does not leave its last figures untold), and tasks whose wait has
    /// ended go back to the run queue, before the tasks of their priority
    /// that never started.
    mutating func tick(now: Double) {
        let progressDue = tasks.values.filter { task in task.progressDueAt.map { $0 <= now } ?? false }.map(\.id)
        for id in progressDue.sorted() { emitProgress(id, now: now) }
        let due = tasks.values.compactMap { task -> (until: Double, id: TaskID, failed: TaskRecord.FailedAttempt)? in
            guard case .retrying(let until, let failed) = task.state, until <= now else { return nil }
            return (until, task.id, failed)
        }
        for (_, id, failed) in due.sorted(by: { ($0.until, $0.id) < ($1.until, $1.id) }) {
            guard var task = tasks[id] else { continue }
            task.state = .queued(after: failed)
            enqueue(&task)
            tasks[id] = task
        }
        pump(now: now)
        if let next = tasks.values.compactMap({ task -> Double? in
            if case .retrying(let until, _) = task.state { until } else { task.progressDueAt }
        }).min() {
            actions.append(.wake(at: next))
        }
    }

    /// What the retry policy makes of a failed attempt of a task for each
    /// of its receipts.
    private struct RetryPlan {
        /// The wait before the next attempt: the longest any waiting receipt
        /// asks (the one whose budget has counted the most attempts).
        var delay = 0.0
        var waiting: [ReceiptID] = []
        /// Receipts that end now, each with the `Retry-After` its outcome names.
        var ending: [(receipt: ReceiptID, retryAfter: Int64?)] = []
    }

    private func retryPlan(
        for task: TaskRecord, after failure: TransferFailure, status: Int?, retryAfter: Int64? = nil, now: Double
    ) -> RetryPlan {
        let attempt = AttemptFailure(code: failure.code, httpStatus: status, retryAfter: retryAfter)
        var plan = RetryPlan()
        guard RetryPolicy.isTransient(attempt) else {
            plan.ending = task.receipts.map { ($0, nil) }
            return plan
        }
        let random = self.random()
        for receiptID in task.receipts {
            guard let receipt = receipts[receiptID] else { continue }
            let budget = receipt.retryWindow.budget(retries: receipt.request.retries, now: now)
            switch settings.retry.decision(after: attempt, budget: budget, random: random) {
            case .retry(let delay):
                plan.delay = max(plan.delay, delay)
                plan.waiting.append(receiptID)
            case .fail(let retryAfter):
                plan.ending.append((receiptID, retryAfter))
            }
        }
        return plan
    }

    /// Running task `id`'s attempt failed with `failure` and `plan.waiting`
    /// are its receipts now: it lets its transfer and its run-queue place go
    /// and waits `plan.delay` seconds, its bound views still animating.
    private mutating func waitToRetry(
        _ id: TaskID, _ plan: RetryPlan, after failure: TransferFailure, response: ResponseHead?, now: Double
    ) {
        guard var task = tasks[id], case .running(let running) = task.state else { return }
        let failed = task.transferID
        let until = now + plan.delay
        task.figures.activeSeconds += now - running.since
        task.attempt += 1
        task.state = .retrying(until: until, after: TaskRecord.FailedAttempt(failure: failure, response: response))
        tasks[id] = task
        self.running -= 1
        actions.append(.stop(failed))
        actions.append(.transferStopped(task: id))
        let notice = RetryNotice(
            task: id, receipts: task.receipts, attempt: task.attempt, delay: plan.delay, error: failure,
            httpStatus: failure.code == .httpStatus ? response?.status : nil)
        actions.append(.notify(.retrying(notice)))
        actions.append(.wake(at: until))
        pump(now: now)
    }

    /// `task`'s attempt that failed continued the kept body from byte
    /// `offset` (nil when it did not continue one): each of its receipts'
    /// retry budget starts again with it when that is further than any of
    /// their attempts before.
    private mutating func attemptContinued(_ task: TaskRecord, from offset: Int64?) {
        for receiptID in task.receipts {
            receipts[receiptID]?.retryWindow.attemptContinued(from: offset)
        }
    }

    /// Takes `ending` off task `id`: their outcomes are being prepared from
    /// the task's last figures.
    private mutating func claim(
        _ ending: Set<ReceiptID>, of id: TaskID, now: Double
    ) -> [(id: ReceiptID, request: DownloadRequest)] {
        guard let figures = tasks[id]?.progress(now: now) else { return [] }
        tasks[id]?.receipts.removeAll { ending.contains($0) }
        var claimed: [(id: ReceiptID, request: DownloadRequest)] = []
        for receiptID in ending.sorted() {
            guard let request = receipts[receiptID]?.request else { continue }
            receipts[receiptID]?.phase = .completing(final: figures)
            claimed.append((receiptID, request))
        }
        return claimed
    }

    /// Before `task`, a retry, starts again: its receipts past
    /// `--retry-max-time` (from the first attempt of their budget) end with
    /// the last attempt's failure, since no attempt starts after it. False
    /// when none is left and the task has ended.
    private mutating func endExpiredRetries(of task: TaskRecord, now: Double) -> Bool {
        guard case .queued(let failed?) = task.state else { return true }
        let expired = task.receipts.compactMap { receiptID -> (ReceiptID, Outcome)? in
            guard let receipt = receipts[receiptID], receipt.retryWindow.elapsed(now: now) > settings.retry.maxTime else {
                return nil
            }
            let result = TransferResult(response: failed.response, size: 0, bodyPath: nil, failure: failed.failure)
            return (receiptID, Delivery.failures(of: result, for: [receipt.request])[0])
        }
        guard !expired.isEmpty else { return true }
        let none = expired.count == task.receipts.count
        if none { detach(task.id, completed: false, now: now) }
        for (receiptID, outcome) in expired { finish(receiptID, outcome, now: now) }
        return !none
    }

    /// Where attempt `attempt` of a task goes: its `url`, then each of
    /// `mirrors`, those its receipts name (in the order they were given,
    /// each once), in turn.
    private func url(ofAttempt attempt: Int, from url: String, mirrors: [String]) -> String {
        guard !mirrors.isEmpty else { return url }
        var seen: Set<ExactString> = [ExactString(url)]
        let urls = [url] + mirrors.filter { seen.insert(ExactString($0)).inserted }
        return urls[(attempt - 1) % urls.count]
    }

    // MARK: - Rate limits

    /// The rate a transfer for receipts `ids` (a task's) may take: the
    /// largest `maxRate` of them; none when any of them has none.
    private mutating func maxRate(for ids: [ReceiptID]) -> Int64? {
        var largest: Int64?
        for id in ids {
            guard let rate = withReceipt(id, { $0.request.maxRate }) ?? nil else { return nil }
            largest = max(largest ?? rate, rate)
        }
        return largest
    }

    /// After receipts joined or left task `id`: its started transfer hears
    /// of a change in its rate limit.
    private mutating func updateRateLimit(of id: TaskID) {
        guard let task = tasks[id], let attempt = task.startedAttempt, !task.receipts.isEmpty else { return }
        let rate = maxRate(for: task.receipts)
        guard rate != attempt.maxRate else { return }
        tasks[id]?.limitRate(to: rate)
        actions.append(.limit(task.transferID, maxRate: rate))
    }

    // MARK: - Bookkeeping

    private mutating func answer(_ waiter: Waiter, _ answer: Answer) {
        actions.append(.answer(waiter, answer))
    }

    /// Changes the bindings, with what their views are told next in line.
    private mutating func views(_ change: (inout ViewBindings) -> Void) {
        change(&bindings)
        for notice in bindings.takeNotices() { actions.append(.notify(.view(notice))) }
    }

    /// Gives `task` a new place in the run queue; its older places are
    /// skipped when they come up.
    private mutating func enqueue(_ task: inout TaskRecord) {
        task.queueGeneration += 1
        queue.enqueue(task.id, priority: task.priority, generation: task.queueGeneration, ranBefore: task.attempt > 1)
    }

    /// Starts queued tasks while fewer than `maxActive` run.
    private mutating func pump(now: Double) {
        guard !isShutDown else { return }
        while running < settings.maxActive {
            let next: TaskID?
            do {
                // Read through a second reference to the map, so the queue
                // is taken from in place; it goes before `start` changes
                // the map, which would otherwise copy it whole.
                let tasks = self.tasks
                next = queue.next(settings.prioritization) { id, generation in
                    guard let task = tasks[id], case .queued = task.state else { return false }
                    return task.queueGeneration == generation
                }
            }
            guard let id = next, let index = tasks.index(forKey: id) else { return }
            // Only a retry's record is copied, for its receipts' windows.
            let isRetry = withTask(at: index) { task in
                if case .queued(_?) = task.state { true } else { false }
            }
            if !isRetry || endExpiredRetries(of: tasks.values[index], now: now) { start(id, now: now) }
        }
    }

    private mutating func start(_ id: TaskID, now: Double) {
        guard let index = tasks.index(forKey: id) else { return }
        let (attempt, request, revalidating, taskReceipts) = withTask(at: index) { task in
            (task.attempt, task.request, task.revalidating, task.receipts)
        }
        // What the transfer takes from its receipts' requests, gathered in
        // one pass: the first one's destination, whether any counts text,
        // the digests they check, the mirrors they name.
        var destination: String?
        var countsText = false
        var digestAlgorithms: Set<HashAlgorithm> = []
        var mirrors: [String] = []
        for (position, receipt) in taskReceipts.enumerated() {
            guard let request = withReceipt(receipt, { $0.request }) else { continue }
            if position == 0 { destination = request.destination }
            if request.body == .text { countsText = true }
            if let algorithm = request.integrity?.algorithm { digestAlgorithms.insert(algorithm) }
            if !request.mirrors.isEmpty { mirrors.append(contentsOf: request.mirrors) }
        }
        let url = url(ofAttempt: attempt, from: request.url, mirrors: mirrors)
        let maxRate = maxRate(for: taskReceipts)
        let transferID = withTask(at: index) { task in
            task.queueGeneration += 1
            task.begin(TaskRecord.StartedAttempt(url: url, maxRate: maxRate), now: now)
            return task.transferID
        }
        running += 1
        for receipt in taskReceipts { withReceipt(receipt) { $0.countAttempt(url: url, now: now) } }
        actions.append(
            .start(
                TransferOrder(
                    id: transferID, request: request, url: url, revalidating: revalidating,
                    destination: destination, countsText: countsText, digestAlgorithms: digestAlgorithms,
                    maxRate: maxRate)))
        actions.append(.transferStarted(task: id))
        views { $0.taskStateChanged(task: id, running: true) }
    }

    /// Removes a task from every map and stops its transfer; `completed`
    /// when its body is complete and about to be delivered. Its receipts
    /// keep its final figures. Its bound views hear that it finished unless
    /// `keepingViews` (its delivery tells them).
    private mutating func detach(_ id: TaskID, completed: Bool, keepingViews: Bool = false, now: Double) {
        guard let task = tasks.removeValue(forKey: id) else { return }
        let figures = task.progress(now: now)
        for receipt in task.receipts { withReceipt(receipt) { $0.phase = .completing(final: figures) } }
        if case .running = task.state, !keepingViews { views { $0.taskStateChanged(task: id, running: false) } }
        if task.startedAttempt != nil {
            running -= 1
            if !completed {
                actions.append(.stop(task.transferID))
                // A body that was complete when the task was suspended has
                // no transfer left to stop: its file goes here.
                if case .suspended(.paused(_, let held?)) = task.state, let path = held.bodyPath {
                    actions.append(.discard(path: path))
                }
            }
        }
        if let index = tasksByKey.index(forKey: task.key), tasksByKey.values[index] == id { tasksByKey.remove(at: index) }
        actions.append(.transferStopped(task: id))
        if !keepingViews {
            let received = completed ? task.figures.received : nil
            views { $0.taskFinished(task: id, received: received, expected: received) }
        }
    }

    /// Ends the receipts a transfer can no longer satisfy and says whether
    /// the transfer goes on. When none is left, the task is detached first,
    /// so the activity count drops before their `download/finished`.
    private mutating func end(_ ended: [(ReceiptID, Outcome)], of id: TaskID, now: Double) -> Bool {
        guard !ended.isEmpty else { return true }
        let none = ended.count == tasks[id]?.receipts.count
        if none { detach(id, completed: false, now: now) }
        for (receipt, outcome) in ended { finish(receipt, outcome, now: now) }
        if none { pump(now: now) }
        return !none
    }

    @discardableResult
    private mutating func cancel(receipt id: ReceiptID, now: Double) -> Bool {
        guard let receipt = receipts[id], receipt.isJoined else { return false }
        finish(id, Outcome(url: receipt.request.url, failure: TransferFailure(code: .cancelled, message: "cancelled")), now: now)
        if let task = tasks[receipt.taskID], task.receipts.isEmpty {
            detach(task.id, completed: false, now: now)
            pump(now: now)
        }
        return true
    }

    private mutating func finish(_ id: ReceiptID, _ outcome: consuming Outcome, now: Double) {
        guard let receipt = receipts.removeValue(forKey: id) else { return }
        finish(receipt, outcome, now: now)
    }

    /// Tells `receipt`'s outcome, taken out of the unfinished receipts, and
    /// keeps its figures in the history. The outcome moves into the notice
    /// when no waiter needs a copy.
    private mutating func finish(_ receipt: ReceiptRecord<Waiter>, _ outcome: consuming Outcome, now: Double) {
        let id = receipt.id
        if let slot = receipt.request.slot.map(ExactString.init), slots[slot] == id { slots[slot] = nil }
        var figures = TaskProgress.none(task: receipt.taskID)
        if case .completing(let final?) = receipt.phase {
            figures = final
        } else if receipt.isJoined, let task = tasks[receipt.taskID] {
            figures = task.progress(now: now)
            tasks[receipt.taskID]?.receipts.removeAll { $0 == id }
            updateRateLimit(of: receipt.taskID)
        }
        outcome.durationMs = (now - receipt.createdAt) * 1000
        outcome.attempts = receipt.attempts
        if !outcome.ok, outcome.status == nil, let url = receipt.attemptURL { outcome.finalURL = url }
        if outcome.ok { figures.received = outcome.size }
        // A failure says how far the body got: a receipt ended here
        // (cancelled, shut down, too large) by what its task had received.
        if !outcome.ok, outcome.size == 0 { outcome.size = figures.received }
        history.add(ReceiptProgress(receipt: id, figures: figures, state: .finished))

        guard !receipt.waiters.isEmpty else {
            actions.append(.notify(.finished(receipt: id, task: receipt.taskID, outcome: consume outcome)))
            return
        }
        actions.append(.notify(.finished(receipt: id, task: receipt.taskID, outcome: outcome)))
        let source = outcome.source == .memory || outcome.source == .disk ? outcome.source : nil
        for (waiter, reused) in receipt.waiters {
            let reply = DownloadReply(
                receipt: id, task: receipt.taskID, state: .finished, reused: reused, source: source, outcome: outcome)
            answer(waiter, .download(reply))
        }
    }

    /// Tells task `id`'s progress, when bytes arrived since it was last told.
    /// The record changes in place (`withTask`): this runs for every
    /// download.
    private mutating func emitProgress(_ id: TaskID, now: Double) {
        guard let index = tasks.index(forKey: id), let told = withTask(at: index, { $0.takeProgress(now: now) }) else { return }
        tell(told.progress, to: told.receipts)
    }

    private mutating func emitProgress(of task: inout TaskRecord, now: Double) {
        guard let told = task.takeProgress(now: now) else { return }
        tell(told.progress, to: told.receipts)
    }

    private mutating func tell(_ progress: TaskProgress, to receipts: [ReceiptID]) {
        actions.append(.notify(.progress(progress, receipts: receipts)))
        views { $0.taskProgress(task: progress.task, received: progress.received, expected: progress.expected) }
    }

    /// Resolves `suspend`/`resume`'s target to a live task, or answers for
    /// one that has finished.
    private mutating func resolve(_ target: TaskTarget, waiter: Waiter) throws(SchedulerError) -> TaskRecord? {
        switch target {
        case .receipt(let id):
            if let receipt = receipts[id] {
                if receipt.isJoined, let task = tasks[receipt.taskID] { return task }
                answer(waiter, .task(id: receipt.taskID, state: .finished))
                return nil
            }
            guard let finished = history[id] else { throw .unknownReceipt(id) }
            answer(waiter, .task(id: finished.figures.task, state: .finished))
            return nil
        case .task(let id):
            if let task = tasks[id] { return task }
            guard hasEnded(task: id) else { throw .unknownTask(id) }
            answer(waiter, .task(id: id, state: .finished))
            return nil
        }
    }

    /// Whether `task` was issued and has ended: its receipts are finished
    /// (and remembered) or their outcomes are being prepared.
    private func hasEnded(task id: TaskID) -> Bool {
        history.hasTask(id) || receipts.values.contains { $0.taskID == id }
    }

    /// The answer to a `download` that made or reused `receipt`: its task's
    /// state, `finished` once the receipt no longer waits on a live task.
    private func reply(receipt: ReceiptID, task: TaskID, reused: Bool = false) -> DownloadReply {
        var state = ReplyState.finished
        if receipts[receipt]?.isJoined == true, let record = tasks[task] {
            state = record.startedAttempt != nil ? .running : .queued
        }
        return DownloadReply(receipt: receipt, task: task, state: state, reused: reused)
    }
}

extension DownloadScheduler: Sendable where Waiter: Sendable {}
