import Curl
import Dispatch
import Logging
import Locking
import Synchronization

/// Runs downloads: the door through which requests reach the engine's
/// thread, where `DownloadOwner` keeps the scheduler and every transfer.
///
/// A request's destination is checked and the cache consulted on the
/// request's thread; everything else it asks is a command through the
/// engine's inbox, and its answer comes back through `answer` (or
/// `refuse`) from the engine's thread.
final class Downloader<Waiter: Sendable>: Sendable {
    private typealias Command = DownloadOwner<Waiter>.Command

    private let inbox = EngineInbox<Command>()
    let cache: ResponseCache
    private let delivery: TransferDelivery
    /// Set at start-up: every destination lies inside it.
    private let downloadRoot: String?
    /// This process's files outside the cache entries (bodies in transit in
    /// `tmp/`, `path` files in `downloads/<pid>`, partial files beside
    /// destinations), for removal after a crash.
    private let leftovers: Leftovers
    /// Bodies kept for resuming, in `<cache dir>/partials`; nil when
    /// `--partial-capacity` is 0 or the store cannot be made.
    private let partials: PartialStore?
    private let isShutDown = Atomic(false)

    /// Keeps its files under `root`. `answer` and `notify` receive what the
    /// scheduler says, in order, and `refuse` the requests that name no
    /// receipt or task it knows; `batch` runs a turn of the engine with the
    /// messages it causes sent as one burst; `awaitOutputRoom` blocks while
    /// the client leaves too much output unread, and is called before a
    /// body is made into text or base64, so outcomes that carry one (each
    /// up to `maxMemoryBody`) never pile up for a client that does not read.
    init(
        settings: Configuration, root: CacheRoot, cache: ResponseCache, indicator: ActivityIndicator? = nil,
        answer: @escaping @Sendable (Waiter, Answer) -> Void,
        refuse: @escaping @Sendable (Waiter, SchedulerError) -> Void = { _, _ in },
        notify: @escaping @Sendable (Notice) -> Void,
        batch: @escaping @Sendable (() -> Void) -> Void = { $0() }, awaitOutputRoom: @escaping @Sendable () -> Void = {},
        logger: Logger
    ) throws {
        self.cache = cache
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
        delivery = TransferDelivery(
            cache: cache, leftovers: leftovers, downloadRoot: downloadRoot, awaitOutputRoom: awaitOutputRoom, logger: logger)
        var defaults = EasyOptions(url: "")
        defaults.protocols = settings.allowedSchemes.sorted().joined(separator: ",")
        defaults.caFile = settings.caFile
        defaults.proxy = settings.proxy
        defaults.userAgent = "courier/\(Configuration.version)"
        let world = DownloadOwner<Waiter>.World(
            inbox: inbox, settings: settings, delivery: delivery, indicator: indicator, answer: answer, refuse: refuse,
            notify: notify, batch: batch, downloadRoot: downloadRoot,
            redirectPolicy: RedirectPolicy(allowsInsecure: settings.allowInsecureRedirects), leftovers: leftovers,
            partials: partials, transferDefaults: defaults, logger: logger)
        startThread(named: "courier.transfers") { DownloadOwner(world).run() }
    }

    /// Ends the engine's thread, which frees libcurl's handles.
    deinit {
        inbox.send(.close)
    }

    func update(settings: Configuration) {
        inbox.send(.update(settings))
    }

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
        inbox.send(.download(request, refusal: refusal, lookup: lookup, waiter: waiter))
    }

    func cancel(_ target: CancelTarget, waiter: Waiter) {
        inbox.send(.cancel(target, waiter: waiter))
    }

    func suspend(_ target: TaskTarget, waiter: Waiter) {
        inbox.send(.suspend(target, waiter: waiter))
    }

    func resume(_ target: TaskTarget, waiter: Waiter) {
        inbox.send(.resume(target, waiter: waiter))
    }

    func progress(receipt: ReceiptID?, waiter: Waiter) {
        inbox.send(.progress(receipt: receipt, waiter: waiter))
    }

    func bind(view: String, to target: TaskTarget?, kind: BindingKind, waiter: Waiter) {
        inbox.send(.bind(view: view, to: target, kind: kind, waiter: waiter))
    }

    /// Ends every unfinished receipt with `shutdown`, stops the transfers,
    /// and waits for outcomes being prepared and what they cause to be
    /// handed on.
    func shutdown() {
        guard !isShutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let stopped = DispatchSemaphore(value: 0)
        inbox.send(.shutdown(stopped))
        _ = stopped.wait(timeout: .now() + 6)
        delivery.waitUntilIdle()
        let handedOn = DispatchSemaphore(value: 0)
        inbox.send(.sync(handedOn))
        _ = handedOn.wait(timeout: .now() + 5)
        partials?.flush()
        leftovers.finish()
    }

    // MARK: - Settling

    /// Runs `body` once, as soon as no download runs, waits in the queue or
    /// has its outcome made (suspended ones may be left) and the answers and
    /// notifications that led there have been handed on; at once when that
    /// is so already. What end of input waits for: every request has come.
    func whenSettled(_ body: @escaping @Sendable () -> Void) {
        inbox.send(.whenSettled(body))
    }
}
