import Curl
import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSONRPC
import Logging

/// The one owner of the download scheduler's state and of every transfer,
/// on the engine's thread (`courier.transfers`), which it runs.
///
/// Requests, cancels, suspends, resumes, progress, bindings, settings,
/// delivered outcomes and `whenSettled` come as commands through the
/// engine's one inbox; transfer callbacks step the scheduler directly. The
/// actions a step returns are carried out on this thread right after it —
/// once libcurl's call has returned, since a transfer may not be stopped or
/// started from within a callback — so answers and notifications leave in
/// the order things happened. Nothing here blocks on another thread: what
/// can (file placement, cache writes, body encoding, waiting for the client
/// to read) goes to the delivery queue, a turn's worth as one batch. A
/// cache hit that needs none of that is served here, in the turn that
/// admits it.
final class DownloadOwner<Waiter: Sendable>: TransferObserver {
    typealias Action = SchedulerAction<Waiter>

    /// What other threads ask of the owner.
    enum Command: Sendable {
        /// A `download`: `refusal` is why its destination was refused,
        /// `lookup` what the cache holds for it.
        case download(DownloadRequest, refusal: TransferFailure?, lookup: ResponseCache.Lookup, waiter: Waiter)
        case cancel(CancelTarget, waiter: Waiter)
        case suspend(TaskTarget, waiter: Waiter)
        case resume(TaskTarget, waiter: Waiter)
        case progress(receipt: ReceiptID?, waiter: Waiter)
        case bind(view: String, to: TaskTarget?, kind: BindingKind, waiter: Waiter)
        case update(Configuration)
        /// The results of one batch of deliveries.
        case delivered([DeliveryResult])
        /// The partial store has looked for a body the transfer may
        /// continue: it begins now, unless it was stopped meanwhile.
        case resumeFound(TransferID, ResumePoint?)
        /// The body writer has closed a transfer's file.
        case flushed(TransferID, TransferFailure?, checksum: UInt64)
        /// Runs the closure once settled (see `Downloader.whenSettled`).
        case whenSettled(@Sendable () -> Void)
        /// Ends every unfinished receipt with `shutdown` and stops every
        /// transfer; signals once that is handed on.
        case shutdown(DispatchSemaphore)
        /// Signals once every command sent before it has been carried out
        /// and what it caused handed on.
        case sync(DispatchSemaphore)
        /// Ends the thread.
        case close
    }

    /// What the owner needs from the world, made before its thread starts.
    struct World: Sendable {
        var inbox: EngineInbox<Command>
        var settings: Configuration
        var delivery: TransferDelivery
        var indicator: ActivityIndicator?
        var answer: @Sendable (Waiter, Answer) -> Void
        /// Answers a request that names no receipt or task the scheduler knows.
        var refuse: @Sendable (Waiter, SchedulerError) -> Void
        var notify: @Sendable (Notice) -> Void
        /// Runs a turn with the messages it causes sent as one burst.
        var batch: @Sendable (() -> Void) -> Void
        var downloadRoot: String?
        var redirectPolicy: RedirectPolicy
        var leftovers: Leftovers
        var partials: PartialStore?
        var transferDefaults: EasyOptions
        var logger: Logger
    }

    /// Not checked for exclusive access at run time: every step and every
    /// take of its actions changes it, on this thread alone, and nothing a
    /// step calls back into reaches it.
    @exclusivity(unchecked) private var scheduler: DownloadScheduler<Waiter>
    private var settings: Configuration
    private let engine: TransferEngine
    private let inbox: EngineInbox<Command>
    private let delivery: TransferDelivery
    private var cache: ResponseCache { delivery.cache }
    private let indicator: ActivityIndicator?
    private let onAnswer: @Sendable (Waiter, Answer) -> Void
    private let onRefusal: @Sendable (Waiter, SchedulerError) -> Void
    private let onNotice: @Sendable (Notice) -> Void
    private let batch: @Sendable (() -> Void) -> Void
    /// Set at start-up: every destination lies inside it.
    private let downloadRoot: String?
    private let redirectPolicy: RedirectPolicy
    /// This process's files outside the cache entries, for removal after
    /// a crash.
    private let leftovers: Leftovers
    /// Bodies kept for resuming; nil when there is no partial store.
    private let partials: PartialStore?
    private let transferDefaults: EasyOptions
    /// `transferDefaults` with what the settings ask of every transfer
    /// (its connect timeout and low-speed check), made once per
    /// configuration rather than per transfer.
    private var transferTemplate: EasyOptions
    /// The directories destinations lay in lately, kept open.
    private let parents = DestinationParents()
    /// What the partial store's `mayHoldBodies` answered since libcurl last
    /// ran, nil until asked: a transfer makes its file there only while
    /// libcurl runs, so the starts between two runs share one look.
    @exclusivity(unchecked) private var partialsMayHoldBodies: Bool?

    /// An empty list whose storage `carryOutActions` trades with the
    /// scheduler's list of actions. Like the other state of a turn below,
    /// not checked for exclusive access at run time: it changes on this
    /// thread alone, and nothing its changes call reaches it.
    @exclusivity(unchecked) private var spare: [Action] = []
    /// Finished transfers and cache hits of this turn, for the delivery
    /// queue as one batch at its end.
    @exclusivity(unchecked) private var dueDeliveries: [DeliveryOrder] = []
    @exclusivity(unchecked) private var dueHits: [HitOrder] = []
    /// What the hits of this turn served at once found
    /// (`TransferDelivery.serveAtOnce`): a burst of hits of one response
    /// looks at its `path` file once, and makes its outcome once. Emptied
    /// once the turn's commands are carried out, so a file the client
    /// removed before sending a request is made again for it, and no hit
    /// is held while the engine waits.
    @exclusivity(unchecked) private var atOnce = TransferDelivery.AtOnce()
    /// Hits handed to the delivery queue whose outcomes have not come back:
    /// while there are any, a hit that could be served at once goes there
    /// too, so hits finish in the order they were admitted.
    @exclusivity(unchecked) private var hitsInDelivery = 0
    /// When the scheduler asked to be ticked (its `wake(at:)`): the earliest.
    @exclusivity(unchecked) private var wakeAt: Double?
    /// What `whenSettled` runs, until it has run.
    private var onSettled: (@Sendable () -> Void)?
    /// Signalled at the end of the turn, once what the commands that carry
    /// them caused is handed on.
    private var signals: [DispatchSemaphore] = []
    private var isOpen = true

    /// Bodies up to this size are kept in memory as they stream, whatever
    /// the memory tier takes: one announced within it is held there alone,
    /// and its file made and written on the delivery queue, so no file work
    /// for a small body holds up the engine's thread. For larger ones the
    /// memory tier names the disk tier's body file, read (and checked
    /// against the streamed checksum) on its first hit, or reads them back
    /// on the delivery queue when the disk tier did not store them, so
    /// copying a large body never holds up the engine's thread either.
    static var streamCopyLimit: Int { 64 << 10 }

    /// Makes the transfer engine: call it on the thread that will run it.
    init(_ world: World) {
        inbox = world.inbox
        settings = world.settings
        scheduler = DownloadScheduler(settings: SchedulerSettings(world.settings))
        delivery = world.delivery
        indicator = world.indicator
        onAnswer = world.answer
        onRefusal = world.refuse
        onNotice = world.notify
        batch = world.batch
        downloadRoot = world.downloadRoot
        redirectPolicy = world.redirectPolicy
        leftovers = world.leftovers
        partials = world.partials
        transferDefaults = world.transferDefaults
        transferTemplate = Self.template(world.transferDefaults, settings: world.settings)
        let inbox = world.inbox
        engine = TransferEngine(waker: inbox.waker, logger: world.logger) { id, failure, checksum in
            inbox.send(.flushed(id, failure, checksum: checksum))
        }
        engine.limitTotal(to: world.settings.maxDownloadRate)
    }

    /// Turns until `close`, then frees libcurl's handles.
    func run() {
        while isOpen {
            batch { turn() }
            for signal in signals { signal.signal() }
            signals = []
            runIfSettled()
            if isOpen { engine.poll(until: wakeAt) }
        }
        engine.cleanup()
    }

    /// Carries out the inbox's commands, the scheduler's wake-up when it is
    /// due and libcurl's work, then hands the deliveries that became due to
    /// the delivery queue.
    private func turn() {
        parents.checkAgain()
        partialsMayHoldBodies = nil
        var commands = inbox.take()
        // Room for every command taken, as if each were a `download` that
        // queues: most of a burst are. Telling them apart would copy each
        // command; a burst of cache hits leaves the room unused (the maps
        // keep it).
        scheduler.reserveCapacity(forQueuing: commands.count)
        for index in commands.indices {
            // Moved out of the list, an empty command left in its place: a
            // command may hold a whole batch of delivered results, which
            // iterating would copy and destroy twice.
            var command = Command.close
            swap(&command, &commands[index])
            handle(consume command)
            carryOutActions()
        }
        atOnce.removeAll()
        if let moment = wakeAt, moment <= MonotonicClock.now() {
            wakeAt = nil
            step { scheduler, now in scheduler.tick(now: now) }
            carryOutActions()
        }
        engine.turn()
        partialsMayHoldBodies = nil
        carryOutActions()
        if engine.isIdle { parents.closeAll() }
        guard !dueDeliveries.isEmpty || !dueHits.isEmpty else { return }
        hitsInDelivery += dueHits.count
        let inbox = inbox
        delivery.deliver(dueDeliveries, hits: dueHits, memoryBodyLimit: settings.maxMemoryBody) { results in
            inbox.send(.delivered(results))
        }
        dueDeliveries = []
        dueHits = []
    }

    private func handle(_ command: consuming Command) {
        switch consume command {
        case .download(let request, let refusal, let lookup, let waiter):
            admit(request, refusal: refusal, lookup: lookup, waiter: waiter)
        case .cancel(let target, let waiter):
            step(answering: waiter) { scheduler, now throws(SchedulerError) in try scheduler.cancel(target, waiter: waiter, now: now) }
        case .suspend(let target, let waiter):
            step(answering: waiter) { scheduler, now throws(SchedulerError) in try scheduler.suspend(target, waiter: waiter, now: now) }
        case .resume(let target, let waiter):
            step(answering: waiter) { scheduler, now throws(SchedulerError) in try scheduler.resume(target, waiter: waiter, now: now) }
        case .progress(let receipt, let waiter):
            step(answering: waiter) { scheduler, now throws(SchedulerError) in
                try scheduler.progress(receipt: receipt, waiter: waiter, now: now)
            }
        case .bind(let view, let target, let kind, let waiter):
            step(answering: waiter) { scheduler, _ throws(SchedulerError) in
                try scheduler.bind(view: view, to: target, kind: kind, waiter: waiter)
            }
        case .update(let newSettings):
            if newSettings.maxDownloadRate != settings.maxDownloadRate { engine.limitTotal(to: newSettings.maxDownloadRate) }
            settings = newSettings
            transferTemplate = Self.template(transferDefaults, settings: newSettings)
            step { scheduler, now in scheduler.update(settings: SchedulerSettings(newSettings), now: now) }
        case .delivered(var results):
            // Each result moved out in turn: reversed through the list's
            // buffer, where a swap moves an element's bytes, then taken from
            // the end.
            results.withUnsafeMutableBufferPointer { $0.reverse() }
            while let result = results.popLast() {
                switch consume result {
                case .delivered(let outcomes, let order):
                    step { scheduler, now in scheduler.delivered(outcomes, of: order, now: now) }
                case .retry(let order):
                    step { scheduler, now in scheduler.retry(order, now: now) }
                case .served(let receipt, let outcome):
                    hitsInDelivery -= 1
                    step { scheduler, now in scheduler.delivered([(receipt, outcome)], now: now) }
                }
            }
        case .resumeFound(let id, let resume):
            guard let transfer = engine.transfer(id), !transfer.hasBegun else { return }
            transfer.prepare(resume: resume)
            engine.begin(id)
        case .flushed(let id, let failure, let checksum):
            engine.flushed(id, failure: failure, checksum: checksum)
        case .whenSettled(let body):
            onSettled = body
        case .shutdown(let done):
            if !scheduler.isShutDown {
                step { scheduler, now in scheduler.shutdown(now: now) }
                carryOutActions()
                wakeAt = nil
                engine.stopAll(waiting: 5)
            }
            signals.append(done)
        case .sync(let done):
            signals.append(done)
        case .close:
            isOpen = false
        }
    }

    /// A `download` whose destination was checked and whose cache lookup
    /// was made on the request's thread. A hit that needs no file work and
    /// no room in the client's output finishes in this turn, its answer and
    /// `download/finished` handed on together; any other goes to the
    /// delivery queue at the turn's end.
    private func admit(_ request: DownloadRequest, refusal: TransferFailure?, lookup: ResponseCache.Lookup, waiter: Waiter) {
        let answer: CacheAnswer
        switch lookup {
        case .hit(let hit): answer = .hit(hit.tier == .memory ? .memory : .disk)
        case .stale(let stale): answer = .stale(stale)
        case .miss: answer = .miss
        }
        // A hit made at once finishes in the scheduler's step that admits
        // it: its receipt is never kept among the unfinished ones.
        let admission = step { scheduler, now in
            scheduler.download(request, refusal: refusal, cache: answer, waiter: waiter, now: now) { receipt in
                guard case .hit(let hit) = lookup else { return nil }
                cache.countHit()
                let order = HitOrder(hit: hit, receipt: receipt, request: request)
                if dueHits.isEmpty, hitsInDelivery == 0,
                    let outcome = delivery.serveAtOnce(order, memoryBodyLimit: settings.maxMemoryBody, atOnce: &atOnce)
                {
                    return (outcome, MonotonicClock.now())
                }
                dueHits.append(order)
                return nil
            }
        }
        switch admission {
        case .queued:
            if case .stale = answer { cache.countRevalidation() } else { cache.countMiss() }
        case .served, .reused, .refused, .joined:
            break
        }
    }

    // MARK: - Settling

    /// Runs what `whenSettled` gave once no download runs, waits in the
    /// queue or has its outcome made (suspended ones may be left); called
    /// after each turn, once the turn's answers and notifications are
    /// handed on.
    private func runIfSettled() {
        guard let body = onSettled else { return }
        guard scheduler.isSettled else { return }
        onSettled = nil
        body()
    }

    // MARK: - Transfer events

    // The engine calls these through `TransferObserver`, whose witnesses
    // for a generic class are the unspecialised code: every step of the
    // scheduler below them would then go through value witnesses for
    // `Waiter`. Each is made for the two waiters courier uses (the server's
    // `Reply`, `courier get`'s `Int`), which it runs when it is one of them.
    @_specialize(where Waiter == Reply)
    @_specialize(where Waiter == Int)
    func transferDidReceiveResponse(_ transfer: Transfer, _ response: ResponseHead) -> Bool {
        // Only a status the scheduler may retry (outside 200–299) waits as
        // long as `Retry-After` asks.
        let mayRetry = !(200...299).contains(response.status)
        let retryAfter = mayRetry ? response.header("retry-after").flatMap { RetryAfter.seconds($0, now: Date()) } : nil
        let length = transfer.announcedLength
        return step { scheduler, now in
            scheduler.responseArrived(transfer.id, response, length: length, retryAfter: retryAfter, now: now)
        }
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
    func transferDidComplete(_ transfer: Transfer, _ result: consuming TransferResult) {
        // Not through `step`, whose closure would copy the result rather
        // than move it on.
        scheduler.transferEnded(transfer.id, result, now: MonotonicClock.now())
    }

    // MARK: - Steps and actions

    /// Applies one event to the scheduler, which keeps the actions it asks
    /// for until `carryOutActions` takes them.
    @discardableResult
    private func step<Result>(_ event: (inout DownloadScheduler<Waiter>, Double) -> Result) -> Result {
        event(&scheduler, MonotonicClock.now())
    }

    /// Applies a request to the scheduler; one naming what it does not know
    /// is answered with that.
    private func step(
        answering waiter: Waiter, _ event: (inout DownloadScheduler<Waiter>, Double) throws(SchedulerError) -> Void
    ) {
        do throws(SchedulerError) {
            try event(&scheduler, MonotonicClock.now())
        } catch {
            onRefusal(waiter, error)
        }
    }

    /// Carries out the actions the scheduler kept so far, and those they
    /// cause, in order. The list carried out trades storage with the
    /// scheduler's and is kept in `spare` for the next round, so no turn
    /// allocates a list anew, nor copies one into another. Each action
    /// moves out of the list into `perform`, a wake-up that holds nothing
    /// left in its place: iterating would copy every action, with all it
    /// holds, and destroy it twice; swapping one out moved its few hundred
    /// bytes three times.
    private func carryOutActions() {
        while true {
            var due = spare
            spare = []
            scheduler.takeActions(into: &due)
            guard !due.isEmpty else {
                spare = due
                return
            }
            due.withUnsafeMutableBufferPointer { actions in
                guard let first = actions.baseAddress else { return }
                for index in actions.indices {
                    let action = (first + index).move()
                    (first + index).initialize(to: .wake(at: .infinity))
                    perform(action)
                }
            }
            due.removeAll(keepingCapacity: true)
            spare = due
        }
    }

    /// Carries out `action`, whose parts move into what it hands on (the
    /// orders kept for the delivery queue, the answers and notices sent):
    /// an action may hold a whole transfer's result, and binding its parts
    /// would copy them otherwise.
    private func perform(_ action: consuming Action) {
        switch consume action {
        case .answer(let waiter, let answer):
            onAnswer(waiter, answer)
        case .notify(let notice):
            onNotice(notice)
        case .start(let order):
            start(order)
        case .stop(let id):
            // Its partial body goes now, so a client told `cancelled` never
            // sees it.
            engine.cancel(id)
        case .pause(let id):
            engine.pause(id)
        case .resume(let id):
            engine.resume(id)
        case .limit(let id, let maxRate):
            engine.limit(id, to: maxRate)
        case .deliver(let order):
            delivery.prepareFile(for: order)
            // Room for a turn's worth (as many as run, up to 64) at its
            // first: grown one by one, the list of orders, each hundreds of
            // bytes, would be moved to new memory three times in a turn.
            if dueDeliveries.capacity == 0 { dueDeliveries.reserveCapacity(max(8, min(settings.maxActive, 64))) }
            dueDeliveries.append(consume order)
        case .discard(let path):
            delivery.discard(path: path)
        case .transferStarted(let task):
            indicator?.transferStarted(task.number)
        case .transferStopped(let task):
            indicator?.transferStopped(task.number)
        case .wake(let moment):
            wakeAt = min(wakeAt ?? moment, moment)
        }
    }

    /// The options every transfer starts from under `settings`. Redirects
    /// are off in it already, as each transfer follows its own: set there,
    /// they would give every transfer's options a box of shared options of
    /// their own (`EasyOptions.followRedirects`).
    private static func template(_ defaults: EasyOptions, settings: Configuration) -> EasyOptions {
        var options = defaults
        options.followRedirects = false
        options.headers = []
        options.connectTimeoutMilliseconds = Int(settings.connectTimeout * 1000)
        options.lowSpeedLimit = settings.lowSpeedLimit
        options.lowSpeedTime = settings.lowSpeedTime
        return options
    }

    private func start(_ order: TransferOrder) {
        var options = transferTemplate
        options.url = order.url
        let headers = order.request.headers
        let conditions = order.revalidating?.stale.conditionalHeaders ?? []
        if !headers.isEmpty || !conditions.isEmpty {
            options.headers = headers.map { ($0.name, Array($0.value.utf8)) } + conditions
        }
        options.timeoutMilliseconds = Int(order.request.timeout * 1000)
        var device: dev_t?
        let body = bodyTarget(for: order, device: &device)
        let plan = partialPlan(for: order, body: body, device: device)
        let transfer = Transfer(
            id: order.id, options: options, redirectPolicy: redirectPolicy,
            body: body, copyLimit: Self.streamCopyLimit, countsText: order.countsText,
            partials: plan, digesting: order.digestAlgorithms, maxRate: order.maxRate, observer: self)
        engine.add(transfer)
        guard let plan, order.revalidating == nil, mayHoldBodies(plan.store) else {
            engine.begin(order.id)
            return
        }
        // The store verifies a kept body on its own queue; a transfer
        // stopped meanwhile is not started, and lets the body go.
        let inbox = inbox
        plan.store.take(key: plan.key, url: plan.url, proven: plan.proven) { resume in
            inbox.send(.resumeFound(order.id, resume))
        }
    }

    /// Whether `store` may hold a kept body, looked at once between two
    /// runs of libcurl.
    private func mayHoldBodies(_ store: PartialStore) -> Bool {
        if let known = partialsMayHoldBodies { return known }
        let holds = store.mayHoldBodies()
        partialsMayHoldBodies = holds
        return holds
    }

    /// What a task's transfer may do with the partial store: nothing for a
    /// request the cache would not apply to (credentials, validators or a
    /// range of the client's own), nor for a body that streams beside a
    /// destination on another file system than the cache directory (there
    /// its placement stays a rename, and a body kept would need a copy);
    /// else keep its body under the request's key, and continue what is
    /// kept there. `device` is the file system of the body's directory,
    /// when it is known.
    private func partialPlan(for order: TransferOrder, body: BodyTarget, device: dev_t?) -> PartialPlan? {
        guard let partials, ResponseCache.applies(to: order.request) else { return nil }
        if body.destination != nil {
            var beside = stat()
            guard let store = partials.device,
                let device = device ?? (fstat(body.directory.fd, &beside) == 0 ? beside.st_dev : nil), device == store
            else { return nil }
        }
        return PartialPlan(store: partials, request: order.request, url: order.url)
    }

    /// Where a task's body streams to: beside its first receipt's destination
    /// when that directory exists and may be written, so placing it there is
    /// a rename within one directory, else in the cache's temporary
    /// directory. `device` is set to the file system of the directory beside
    /// the destination, when it was learnt on the way: given apart, as a
    /// tuple of the two was copied through its type's metadata at run time.
    private func bodyTarget(for order: TransferOrder, device: inout dev_t?) -> BodyTarget {
        if let path = order.destination, let (directory, name, parentDevice) = writableParent(of: path) {
            device = parentDevice
            return BodyTarget(
                directory: directory, name: Destination.temporaryName(for: name), mode: 0o666, destination: .init(path: path, name: name),
                prepared: PreparedFile(), leftovers: leftovers)
        }
        let name = "\(leftovers.owner)-\(order.id.task)-\(String(NameSuffix.next(), radix: 36)).part"
        return BodyTarget(directory: leftovers.temporary, name: name, mode: 0o600)
    }

    /// The directory of the destination at `path`, open, when it exists and
    /// courier may write in it; with the destination's name in it, and the
    /// directory's file system when it is known. A path the client is
    /// trusted with goes through `parents`, so a run of destinations in one
    /// directory opens it once; under a download root each is walked.
    private func writableParent(of path: String) -> (DirectoryHandle, name: String, device: dev_t?)? {
        let destination = Destination(path, root: downloadRoot)
        if let (directoryPath, name) = destination.trustedParent {
            guard let parent = parents.parent(at: directoryPath), parent.isWritable else { return nil }
            return (parent.directory, name, parent.device)
        }
        guard let (directory, name) = try? destination.openParent(create: false), faccessat(directory.fd, ".", W_OK, 0) == 0
        else { return nil }
        return (directory, name, nil)
    }
}

@available(*, unavailable) extension DownloadOwner: Sendable {}
