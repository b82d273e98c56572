import Curl
import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSONRPC
import Locking
import Logging

/// Runs the scheduler against the world: the one owner of its state, the
/// libcurl engine that moves the bytes, the cache, and the delivery of
/// outcomes.
///
/// Every event — a request, a transfer's headers, data or end, a delivered
/// outcome — is one short step on the scheduler's state under `state`'s
/// lock, which appends the actions it returns to `outbox` in the order the
/// steps happened. The actions are then carried out after the lock is let
/// go, by whichever thread finds the outbox idle, one after another: so
/// answers and notifications leave in the order things happened, and
/// nothing that can block (file placement, cache writes, JSON encoding)
/// runs under a lock that transfers or request reading need.
final class Downloader<Waiter: Sendable>: TransferObserver, Sendable {
    typealias Action = SchedulerAction<Waiter>

    private struct Outbox {
        var actions: [Action] = []
        var draining = false
    }

    private let state: Locked<DownloadScheduler<Waiter>>
    private let outbox = Locked(Outbox())
    /// What `whenSettled` runs, until it has run.
    private let onSettled = Locked<(@Sendable () -> Void)?>(nil)
    /// Transfers handed to the engine, until they end or are stopped.
    private let transfers = Locked<[TransferID: Transfer]>([:])
    private let settings: Locked<Configuration>
    let engine: TransferEngine
    let cache: ResponseCache
    private let indicator: ActivityIndicator?
    private let onAnswer: @Sendable (Waiter, Answer) -> Void
    private let onNotice: @Sendable (Notice) -> Void
    private let batch: @Sendable (() -> Void) -> Void
    /// Blocks while the client leaves too much output unread.
    private let awaitOutputRoom: @Sendable () -> Void
    private let logger: Logger
    /// Set at start-up: every destination lies inside it.
    private let downloadRoot: String?
    private let redirectPolicy: RedirectPolicy
    /// This process's files outside the cache entries (bodies in transit in
    /// `tmp/`, `path` files in `downloads/<pid>`, partial files beside
    /// destinations), for removal after a crash.
    private let leftovers: Leftovers
    /// Bodies kept for resuming, in `<cache dir>/partials`; nil when
    /// `--partial-capacity` is 0 or the store cannot be made.
    private let partials: PartialStore?
    private let transferDefaults: EasyOptions
    /// Turns finished transfers into outcomes (file moves, cache writes, text
    /// decoding) off the engine's thread, so no transfer waits on that I/O.
    private let deliveries = DispatchQueue(label: "courier.deliveries")
    /// Makes the files of bodies held in memory ahead of their delivery,
    /// beside it.
    private let files = DispatchQueue(label: "courier.files")
    /// Ends the scheduler's waits before retries (its `wake(at:)`).
    private let retryTimer = WakeTimer(scheduler: DispatchIndicatorScheduler(label: "courier.retries"))
    /// Bodies up to this size are kept in memory as they stream, for the
    /// memory tier; for larger ones the memory tier names the disk tier's
    /// body file, read (and checked against the streamed checksum) on its
    /// first hit, or reads them back on the delivery queue when the disk
    /// tier did not store them, so copying a large body never holds up the
    /// engine's thread.
    static var streamCopyLimit: Int { 64 << 10 }

    /// Keeps its files under `root`. `answer` and `notify` receive what the
    /// scheduler says, in order; `batch` runs a turn of the transfer engine,
    /// or a run of actions, with the messages it causes sent as one burst;
    /// `awaitOutputRoom` blocks while the client leaves too much output
    /// unread, and is called before a body is made into text or base64, so
    /// outcomes that carry one (each up to `maxMemoryBody`) never pile up for
    /// a client that does not read.
    init(
        settings: Configuration, root: CacheRoot, cache: ResponseCache, indicator: ActivityIndicator? = nil,
        answer: @escaping @Sendable (Waiter, Answer) -> Void, notify: @escaping @Sendable (Notice) -> Void,
        batch: @escaping @Sendable (() -> Void) -> Void = { $0() }, awaitOutputRoom: @escaping @Sendable () -> Void = {},
        logger: Logger
    ) throws {
        self.settings = Locked(settings)
        self.state = Locked(DownloadScheduler(settings: SchedulerSettings(settings)))
        self.cache = cache
        self.indicator = indicator
        self.onAnswer = answer
        self.onNotice = notify
        self.batch = batch
        self.awaitOutputRoom = awaitOutputRoom
        self.logger = logger
        leftovers = try Leftovers(root: root)
        if settings.partialCapacity > 0 {
            do throws(Destination.Failure) {
                partials = try PartialStore(root: root, capacity: settings.partialCapacity, logger: logger)
            } catch {
                logger.warning("partial bodies cannot be kept in \(root.path): \(error)")
                partials = nil
            }
        } else {
            partials = nil
        }
        downloadRoot = settings.downloadRoot
        redirectPolicy = RedirectPolicy(allowsInsecure: settings.allowInsecureRedirects)
        var defaults = EasyOptions(url: "")
        defaults.protocols = settings.allowedSchemes.sorted().joined(separator: ",")
        defaults.caFile = settings.caFile
        defaults.proxy = settings.proxy
        defaults.userAgent = "courier/\(Configuration.version)"
        transferDefaults = defaults
        engine = TransferEngine(logger: logger, batch: batch)
        engine.limitTotal(to: settings.maxDownloadRate)
    }

    func update(settings newSettings: Configuration) {
        let previous = settings.withLock { current in defer { current = newSettings }; return current }
        if newSettings.maxDownloadRate != previous.maxDownloadRate { engine.limitTotal(to: newSettings.maxDownloadRate) }
        step { scheduler, now in scheduler.update(settings: SchedulerSettings(newSettings), now: now) }
    }

    var currentSettings: Configuration { settings.withLock { $0 } }

    // MARK: - Requests

    /// Starts a `download`; `waiter` hears the answer. Its destination is
    /// checked and the cache consulted before the scheduler sees it.
    func download(_ request: DownloadRequest, waiter: Waiter) {
        let refusal = request.destination.flatMap { path -> TransferFailure? in
            do throws(Destination.Failure) {
                try Destination(path, root: downloadRoot).check()
                return nil
            } catch {
                return error.transferFailure
            }
        }
        let lookup = refusal == nil ? cache.lookup(request) : .miss
        let answer: CacheAnswer
        switch lookup {
        case .hit(let hit): answer = .hit(hit.tier == .memory ? .memory : .disk)
        case .stale(let stale): answer = .stale(stale)
        case .miss: answer = .miss
        }
        let admission = step { scheduler, now in
            scheduler.download(request, refusal: refusal, cache: answer, waiter: waiter, now: now)
        }
        switch admission {
        case .served(let receipt):
            guard case .hit(let hit) = lookup else { return }
            cache.countHit()
            serve(hit, to: receipt, request: request)
        case .queued:
            if case .stale = answer { cache.countRevalidation() } else { cache.countMiss() }
        case .reused, .refused, .joined:
            break
        }
    }

    func cancel(_ target: CancelTarget, waiter: Waiter) throws(SchedulerError) {
        try step { scheduler, now throws(SchedulerError) in try scheduler.cancel(target, waiter: waiter, now: now) }
    }

    func suspend(_ target: TaskTarget, waiter: Waiter) throws(SchedulerError) {
        try step { scheduler, now throws(SchedulerError) in try scheduler.suspend(target, waiter: waiter, now: now) }
    }

    func resume(_ target: TaskTarget, waiter: Waiter) throws(SchedulerError) {
        try step { scheduler, now throws(SchedulerError) in try scheduler.resume(target, waiter: waiter, now: now) }
    }

    func progress(receipt: ReceiptID?, waiter: Waiter) throws(SchedulerError) {
        try step { scheduler, now throws(SchedulerError) in try scheduler.progress(receipt: receipt, waiter: waiter, now: now) }
    }

    func bind(view: String, to target: TaskTarget?, kind: BindingKind, waiter: Waiter) throws(SchedulerError) {
        try step { scheduler, _ throws(SchedulerError) in try scheduler.bind(view: view, to: target, kind: kind, waiter: waiter) }
    }

    /// Ends every unfinished receipt with `shutdown`, stops the engine, and
    /// waits for outcomes being prepared.
    func shutdown() {
        let first = step { scheduler, now in
            guard !scheduler.isShutDown else { return false }
            scheduler.shutdown(now: now)
            return true
        }
        guard first else { return }
        retryTimer.cancel()
        engine.shutdown(timeout: 5)
        deliveries.sync {}
        partials?.flush()
        leftovers.finish()
    }

    // MARK: - Transfer events, on the engine's thread

    // The engine calls these through `TransferObserver`, whose witnesses
    // for a generic class are the unspecialised code: every step of the
    // scheduler below them would then go through value witnesses for
    // `Waiter`. Each is made for the two waiters courier uses (the server's
    // `Reply`, `courier get`'s `Int`), which it runs when it is one of them.
    @_specialize(where Waiter == Reply)
    @_specialize(where Waiter == Int)
    func transferDidReceiveResponse(_ transfer: Transfer, _ response: ResponseHead) -> Bool {
        let retryAfter = response.header("retry-after").flatMap { RetryAfter.seconds($0, now: Date()) }
        return step { scheduler, now in scheduler.responseArrived(transfer.id, response, retryAfter: retryAfter, now: now) }
    }

    @_specialize(where Waiter == Reply)
    @_specialize(where Waiter == Int)
    func transferDidReceiveData(_ transfer: Transfer, received: Int64, textLength: Int64?, expected: Int64?) -> Bool {
        step { scheduler, now in
            scheduler.dataArrived(transfer.id, received: received, textLength: textLength, expected: expected, now: now)
        }
    }

    @_specialize(where Waiter == Reply)
    @_specialize(where Waiter == Int)
    func transferDidComplete(_ transfer: Transfer, _ result: TransferResult) {
        step { scheduler, now in scheduler.transferEnded(transfer.id, result, now: now) }
    }

    // MARK: - Steps and actions

    /// Applies one event to the scheduler and carries out what it asks.
    @discardableResult
    private func step<Result, Failure: Error>(
        _ event: (inout DownloadScheduler<Waiter>, Double) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let result = try state.withLock { scheduler throws(Failure) -> Result in
            defer {
                let actions = scheduler.takeActions()
                if !actions.isEmpty { outbox.withLock { $0.actions.append(contentsOf: actions) } }
            }
            return try event(&scheduler, MonotonicClock.now())
        }
        drain()
        return result
    }

    /// Carries out queued actions in order, unless another thread is.
    private func drain() {
        let claimed = outbox.withLock { outbox in
            guard !outbox.draining, !outbox.actions.isEmpty else { return false }
            outbox.draining = true
            return true
        }
        guard claimed else { return }
        while true {
            let actions = outbox.withLock { outbox in
                let actions = outbox.actions
                outbox.actions = []
                if actions.isEmpty { outbox.draining = false }
                return actions
            }
            if actions.isEmpty { break }
            batch { for action in actions { perform(action) } }
        }
        runIfSettled()
    }

    // MARK: - Settling

    /// Runs `body` once, as soon as no download runs, waits in the queue or
    /// has its outcome made (suspended ones may be left) and the answers and
    /// notifications that led there have been handed on; at once when that
    /// is so already. What end of input waits for: every request has come.
    func whenSettled(_ body: @escaping @Sendable () -> Void) {
        onSettled.withLock { $0 = body }
        runIfSettled()
    }

    /// Every step ends by draining the outbox, which calls this once the
    /// outbox is empty, so the last step that settles the scheduler is seen.
    private func runIfSettled() {
        guard onSettled.withLock({ $0 != nil }) else { return }
        let settled = state.withLock { $0.isSettled }
        guard settled, outbox.withLock({ !$0.draining && $0.actions.isEmpty }) else { return }
        let body = onSettled.withLock { body in
            defer { body = nil }
            return body
        }
        body?()
    }

    private func perform(_ action: Action) {
        switch action {
        case .answer(let waiter, let answer):
            onAnswer(waiter, answer)
        case .notify(let notice):
            onNotice(notice)
        case .start(let order):
            start(order)
        case .stop(let id, let discardBody):
            guard let transfer = transfers.withLock({ $0.removeValue(forKey: id) }) else { return }
            engine.cancel(transfer)
            // Its partial body goes now, not when the engine gets to it, so a
            // client told `cancelled` never sees it; writes still under way
            // land in the unlinked file.
            if discardBody {
                transfer.isAbandoned.store(true, ordering: .releasing)
                transfer.body.remove()
            }
        case .pause(let id):
            if let transfer = transfers.withLock({ $0[id] }) { engine.pause(transfer) }
        case .resume(let id):
            if let transfer = transfers.withLock({ $0[id] }) { engine.resume(transfer) }
        case .limit(let id, let maxRate):
            if let transfer = transfers.withLock({ $0[id] }) { engine.limit(transfer, to: maxRate) }
        case .deliver(let order):
            let transfer = transfers.withLock { $0.removeValue(forKey: order.id) }
            let requestDate = transfer?.requestDate ?? Date()
            if order.result.bodyIsInMemoryOnly, let target = order.result.body, let prepared = target.prepared {
                prepared.make(in: target.directory, mode: target.mode, on: files)
            }
            deliveries.async { [self] in
                batch { deliver(order, requestDate: requestDate) }
            }
        case .discard(let path):
            unlink(path)
        case .transferStarted(let task):
            indicator?.transferStarted(task.description)
        case .transferStopped(let task):
            indicator?.transferStopped(task.description)
        case .wake(let moment):
            retryTimer.wake(at: moment) { [weak self] in self?.step { scheduler, now in scheduler.tick(now: now) } }
        }
    }

    private func start(_ order: TransferOrder) {
        let settings = currentSettings
        var options = transferDefaults
        options.url = order.url
        options.headers = order.request.headers + (order.revalidation?.conditionalHeaders ?? [])
        options.timeoutMilliseconds = Int(order.request.timeout * 1000)
        options.connectTimeoutMilliseconds = Int(settings.connectTimeout * 1000)
        options.lowSpeedLimit = settings.lowSpeedLimit
        options.lowSpeedTime = settings.lowSpeedTime
        let body = bodyTarget(for: order)
        let plan = partialPlan(for: order, body: body)
        let transfer = Transfer(
            id: order.id, options: options, redirectPolicy: redirectPolicy,
            body: body, copyLimit: min(cache.memoryEntryLimit, Self.streamCopyLimit), countsText: order.countsText,
            partials: plan, digesting: order.digestAlgorithms, maxRate: order.maxRate, observer: self)
        transfers.withLock { $0[order.id] = transfer }
        guard let plan, order.revalidation == nil, plan.store.mayHoldBodies() else {
            engine.start(transfer)
            return
        }
        // The store verifies a kept body on its own queue; a transfer
        // stopped meanwhile is not started, and lets the body go.
        plan.store.take(key: plan.key, url: plan.url, proven: plan.proven) { [self] resume in
            transfers.withLock { transfers in
                guard transfers[order.id] === transfer else { return }
                transfer.prepare(resume: resume)
                engine.start(transfer)
            }
        }
    }

    /// What a task's transfer may do with the partial store: nothing for a
    /// request the cache would not apply to (credentials, validators or a
    /// range of the client's own), nor for a body that streams beside a
    /// destination on another file system than the cache directory (there
    /// its placement stays a rename, and a body kept would need a copy);
    /// else keep its body under the request's key, and continue what is
    /// kept there.
    private func partialPlan(for order: TransferOrder, body: BodyTarget) -> PartialPlan? {
        guard let partials, ResponseCache.applies(to: order.request) else { return nil }
        if body.destination != nil {
            var beside = stat()
            guard let device = partials.device, fstat(body.directory.fd, &beside) == 0, beside.st_dev == device else { return nil }
        }
        return PartialPlan(
            store: partials, key: PartialStore.key(for: order.request), url: order.url, requestHeaders: order.request.headers)
    }

    /// Where a task's body streams to: beside its first receipt's destination
    /// when that directory exists and may be written, so placing it there is
    /// a rename within one directory, else in the cache's temporary directory.
    private func bodyTarget(for order: TransferOrder) -> BodyTarget {
        if let path = order.destination {
            let destination = Destination(path, root: downloadRoot)
            if let (directory, name) = try? destination.openParent(create: false), faccessat(directory.fd, ".", W_OK, 0) == 0 {
                return BodyTarget(
                    directory: directory, name: Destination.temporaryName(for: name), mode: 0o666, destination: (path, name),
                    prepared: PreparedFile(), leftovers: leftovers)
            }
        }
        let name = "\(leftovers.owner)-\(order.id.task)-\(String(NameSuffix.next(), radix: 36)).part"
        return BodyTarget(directory: leftovers.temporary, name: name, mode: 0o600)
    }

    // MARK: - Delivery, on the delivery queue

    /// Answers a receipt from a cache tier: the body is placed and decoded
    /// on the calling thread, then the receipt finishes.
    private func serve(_ hit: ResponseCache.Hit, to receipt: ReceiptID, request: DownloadRequest) {
        if request.body != .none { awaitOutputRoom() }
        let outcome = Delivery(
            response: hit.response.head, size: hit.body.length, body: BodyFile(hit.body),
            source: hit.tier == .memory ? .memory : .disk, downloads: leftovers.downloads,
            downloadRoot: downloadRoot, leftovers: leftovers, memoryBodyLimit: settings.withLock { $0.maxMemoryBody }, logger: logger,
            sharedName: hit.sharedName, fileName: hit.response.fileName, headerObject: hit.response.headerObject
        ).deliver(to: [(receipt, request)])[0]
        step { scheduler, now in scheduler.delivered([(receipt, outcome)], now: now) }
    }

    /// The outcomes of a finished transfer for the receipts it had.
    private func deliver(_ order: DeliveryOrder, requestDate: Date) {
        if order.receipts.contains(where: { $0.request.body != .none }) { awaitOutputRoom() }
        let result = order.result
        let outcomes: [Outcome]
        if let response = result.response, let target = result.body, result.failure == nil {
            let responseDate = Date()
            if response.status == 304, let stale = order.revalidation {
                target.remove()
                guard let hit = cache.revalidated(stale, notModified: response, requestTime: requestDate, responseTime: responseDate)
                else {
                    cache.countMiss()
                    step { scheduler, now in scheduler.retry(order, now: now) }
                    return
                }
                // A stored body that some receipt's integrity refuses is not
                // served: the origin is asked for the body.
                let check = IntegrityCheck(order.receipts.map(\.request), taken: BodyDigests()) { hit.body.digests($0) }
                guard check.passed else {
                    cache.countMiss()
                    step { scheduler, now in scheduler.retry(order, now: now) }
                    return
                }
                outcomes = delivery(
                    response: hit.response.head, size: hit.body.length, body: BodyFile(hit.body), source: .revalidated
                ).deliver(to: order.receipts)
            } else {
                let keys = ResponseCache.storageKeys(
                    for: order.receipts.map(\.request), redirects: result.redirects, finalURL: response.finalURL)
                var bytes = result.bytes
                let check = IntegrityCheck(order.receipts.map(\.request), taken: result.digests) { missing in
                    result.bytes.map { BodyDigests.of($0, missing) }
                        ?? IntegrityCheck.digests(ofFile: target.name, in: target.directory, length: result.size, missing)
                }
                if (200...299).contains(response.status), check.passed {
                    let file = CacheBodyFile(
                        directory: target.directory, name: target.name, length: result.size, checksum: result.checksum,
                        bytes: result.bytes, digests: check.digests)
                    let stored = cache.store(
                        keys: keys, request: order.request, head: response, requestTime: requestDate,
                        responseTime: responseDate, body: file)
                    bytes = bytes ?? stored
                }
                outcomes = delivery(
                    response: response, size: result.size,
                    body: BodyFile(
                        target: target, length: result.size, firstBytes: result.head, bytes: bytes,
                        written: !result.bodyIsInMemoryOnly),
                    source: .network,
                    resumedFrom: result.resumedFrom
                ).deliver(to: order.receipts, failing: check.failures)
            }
        } else {
            outcomes = Delivery.failures(of: result, for: order.receipts.map(\.request))
        }
        let finished = zip(order.receipts, outcomes).map { (receipt: $0.0.id, outcome: $0.1) }
        step { scheduler, now in scheduler.delivered(finished, of: order, now: now) }
    }

    private func delivery(
        response: ResponseHead, size: Int64, body: BodyFile, source: OutcomeSource, sharedName: String? = nil,
        resumedFrom: Int64? = nil
    ) -> Delivery {
        Delivery(
            response: response, size: size, body: body, source: source, downloads: leftovers.downloads,
            downloadRoot: downloadRoot, leftovers: leftovers, memoryBodyLimit: currentSettings.maxMemoryBody, logger: logger,
            sharedName: sharedName, resumedFrom: resumedFrom)
    }
}
