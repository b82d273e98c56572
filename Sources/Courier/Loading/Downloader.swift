import Curl
import Foundation
import JSON
import JSONRPC
import Logging

/// AFImageDownloader made headless: receipts, coalescing of identical
/// requests, a bounded run queue with priorities, slots, suspend and resume,
/// progress, and exactly one `download/finished` per receipt.
///
/// Requests arrive on the connection's thread and transfer events on the
/// engine's thread; all state below is guarded by `lock`, and notifications
/// are sent while it is held so they leave in the order things happened.
final class Downloader: TransferObserver, @unchecked Sendable {
    static let unknownReceipt = ErrorCode(rawValue: -32001)

    let lock = NSLock()
    let engine: TransferEngine
    let emit: @Sendable (String, JSON) -> Void
    let logger: Logger
    /// `<cache dir>/tmp`, where bodies stream when not beside a destination.
    let temporaryDirectory: DirectoryHandle
    let downloadsDirectory: String
    /// Set at start-up: every destination lies inside it.
    let downloadRoot: String?
    let redirectPolicy: RedirectPolicy
    /// This process's files outside the cache entries, for removal after a crash.
    let leftovers: Leftovers
    let transferDefaults: EasyOptions
    let cache: ResponseCache
    /// Turns finished transfers into outcomes (file moves, cache writes, text
    /// decoding) off the engine's thread, so no transfer waits on that I/O.
    let deliveries = DispatchQueue(label: "courier.deliveries")
    let batch: @Sendable (() -> Void) -> Void

    // Guarded by `lock`.
    var settings: Configuration
    var tasks: [String: DownloadTask] = [:]
    var tasksByKey: [TaskKey: DownloadTask] = [:]
    /// Receipts without their `download/finished` yet.
    var receipts: [String: Receipt] = [:]
    /// By slot name, compared as bytes.
    var slots: [ExactString: Receipt] = [:]
    var history = FinishedHistory(limit: 10_000)
    var queue = RunQueue()
    /// Tasks handed to the engine and not yet ended, suspended ones included.
    var running = 0
    var counter = 0
    var isShutDown = false
    var activity: (any TaskActivityObserver)?
    var bindings: ViewBindings?

    /// `batch` runs a turn of the transfer engine, or one delivery, with the
    /// notifications it causes sent as one burst.
    init(
        settings: Configuration, cache: ResponseCache, emit: @escaping @Sendable (String, JSON) -> Void,
        batch: @escaping @Sendable (() -> Void) -> Void = { $0() }, logger: Logger
    ) throws {
        self.settings = settings
        self.cache = cache
        self.batch = batch
        self.emit = emit
        self.logger = logger
        downloadsDirectory = settings.cacheDir + "/downloads/\(getpid())"
        for directory in [settings.cacheDir + "/tmp", settings.cacheDir + "/journals", downloadsDirectory] {
            try DirectoryHandle.makePrivateDirectories(directory)
        }
        temporaryDirectory = try DirectoryHandle(opening: settings.cacheDir + "/tmp")
        leftovers = try Leftovers(
            journals: settings.cacheDir + "/journals", temporaryDirectory: temporaryDirectory.path,
            downloadsDirectory: downloadsDirectory)
        downloadRoot = settings.downloadRoot
        redirectPolicy = RedirectPolicy(allowsInsecure: settings.allowInsecureRedirects)
        var defaults = EasyOptions(url: "")
        defaults.protocols = settings.allowedSchemes.sorted().joined(separator: ",")
        defaults.caFile = settings.caFile
        defaults.proxy = settings.proxy
        defaults.userAgent = "courier/\(Configuration.version)"
        transferDefaults = defaults
        engine = TransferEngine(logger: logger, batch: batch)
    }

    func setActivity(_ hub: ActivityHub) {
        lock.withLock {
            activity = hub
            bindings = hub.bindings
        }
    }

    func update(settings newSettings: Configuration) {
        lock.withLock {
            settings = newSettings
            pump()
        }
    }

    var currentSettings: Configuration { lock.withLock { settings } }

    // MARK: - Methods

    func download(_ params: Params, reply: Reply) throws {
        let request = try DownloadRequest(params, defaults: currentSettings)
        let destinationFailure = request.destination.flatMap { path -> TransferFailure? in
            do throws(Destination.Failure) {
                try Destination(path, root: downloadRoot).check()
                return nil
            } catch {
                return error.transferFailure
            }
        }
        let lookup = cache.lookup(request)

        lock.lock()
        let now = MonotonicClock.now()
        if let slot = request.slot, let current = slots[ExactString(slot)], current.phase == .active {
            if current.request.url.isExactly(request.url) {
                if request.wait {
                    current.waiters.append((reply, true))
                } else {
                    reply.success(result(for: current, reused: true))
                }
                lock.unlock()
                return
            }
            cancel(current, now: now)
        }
        counter += 1
        let receiptID = "r\(counter)"
        let existing = tasksByKey[TaskKey(request)]
        let taskID = existing?.id ?? "t\(counter)"
        let receipt = Receipt(id: receiptID, taskID: taskID, request: request, createdAt: now)
        receipts[receipt.id] = receipt
        if let slot = request.slot { slots[ExactString(slot)] = receipt }
        if request.wait { receipt.waiters.append((reply, false)) }

        var refusal: TransferFailure?
        if !settings.allowedSchemes.contains(request.scheme) {
            refusal = TransferFailure(code: .schemeNotAllowed, message: "the scheme '\(request.scheme)' is not allowed")
        } else if let destinationFailure {
            refusal = destinationFailure
        } else if case .hit(let hit) = lookup {
            cache.countHit()
            receipt.phase = .completing
            if !request.wait { reply.success(result(for: receipt, state: "finished", source: hit.tier.rawValue)) }
            lock.unlock()
            serve(hit, to: receipt)
            return
        } else if request.cachePolicy == .cacheOnly {
            refusal = TransferFailure(code: .notCached, message: "no cached response for \(request.url)")
        }
        defer { lock.unlock() }
        if let refusal {
            if !request.wait { reply.success(result(for: receipt, state: "finished")) }
            finish(receipt, Outcome(url: request.url, failure: refusal), now: now)
            return
        }

        let task: DownloadTask
        if let existing {
            task = existing
            if request.priority > task.priority, task.state == .queued {
                task.priority = request.priority
                queue.enqueue(task)
            }
        } else {
            task = DownloadTask(id: taskID, request: request)
            if case .stale(let stale) = lookup {
                task.revalidation = stale
                cache.countRevalidation()
            } else {
                cache.countMiss()
            }
            tasks[task.id] = task
            tasksByKey[task.key] = task
            queue.enqueue(task)
        }
        receipt.task = task
        task.receipts.append(receipt)
        pump()
        if !request.wait { reply.success(result(for: receipt)) }
    }

    /// Answers a receipt from a cache tier, off the lock: the body is placed
    /// and decoded, then the receipt finishes.
    func serve(_ hit: ResponseCache.Hit, to receipt: Receipt) {
        let delivery = Delivery(
            response: hit.response.head, size: Int64(hit.body.count), body: BodyFile(bytes: hit.body),
            source: hit.tier == .memory ? .memory : .disk, downloadsDirectory: downloadsDirectory, downloadRoot: downloadRoot, leftovers: leftovers,
            memoryBodyLimit: currentSettings.maxMemoryBody, logger: logger,
            sharedName: hit.sharedName)
        let outcome = delivery.deliver(to: [receipt])[0]
        lock.withLock { finish(receipt, outcome, now: MonotonicClock.now()) }
    }

    func cancel(_ params: Params) throws -> JSON {
        let named = try params.byName(allowed: ["receipt", "slot", "all"])
        let given = ["receipt", "slot", "all"].filter { named.has($0) }
        guard given.count == 1 else {
            throw RPCError.invalidParams("give exactly one of 'receipt', 'slot' or 'all'")
        }
        return try lock.withLock {
            let now = MonotonicClock.now()
            var count = 0
            if let id = try named.optionalString("receipt") {
                if let receipt = receipts[id] {
                    count = cancel(receipt, now: now) ? 1 : 0
                } else if history[id] == nil {
                    throw unknown("receipt", id)
                }
            } else if let slot = try named.optionalString("slot") {
                if let receipt = slots[ExactString(slot)] { count = cancel(receipt, now: now) ? 1 : 0 }
            } else if try named.optionalBool("all") == true {
                for receipt in receipts.values.sorted(by: { $0.createdAt < $1.createdAt }) where cancel(receipt, now: now) {
                    count += 1
                }
            }
            return ["cancelled": .bool(count > 0), "count": JSON(count)]
        }
    }

    func suspend(_ params: Params) throws -> JSON {
        try withTask(params) { task, now in
            switch task.state {
            case .running:
                task.state = .suspended
                task.activeSeconds += now - (task.runningSince ?? now)
                task.runningSince = nil
                if let transfer = task.transfer { engine.pause(transfer) }
                activity?.transferStopped(task: task.id)
            case .queued:
                task.state = .suspended
            case .suspended, .finished:
                break
            }
        }
    }

    func resume(_ params: Params) throws -> JSON {
        try withTask(params) { task, now in
            guard task.state == .suspended else { return }
            if task.started {
                task.state = .running
                task.runningSince = now
                if let transfer = task.transfer { engine.resume(transfer) }
                activity?.transferStarted(task: task.id)
            } else {
                task.state = .queued
                queue.enqueue(task)
                pump()
            }
        }
    }

    func progress(_ params: Params) throws -> JSON {
        let named = try params.byName(allowed: ["receipt"])
        let now = MonotonicClock.now()
        return try lock.withLock {
            guard let id = try named.optionalString("receipt") else {
                let list = tasks.values.sorted { $0.id.numericSuffix < $1.id.numericSuffix }.map { task in
                    var info = progressInfo(task, now: now)
                    info["receipts"] = .array(task.receipts.map { .string($0.id) })
                    info["state"] = .string(task.state.rawValue)
                    return JSON.object(info)
                }
                return ["tasks": .array(list)]
            }
            if let receipt = receipts[id] {
                var info = receipt.task.map { progressInfo($0, now: now) } ?? [:]
                info["receipt"] = .string(id)
                info["task"] = .string(receipt.taskID)
                info["state"] = .string(receipt.task.map { $0.state == .finished ? "running" : $0.state.rawValue } ?? "queued")
                return .object(info.merging(["received": 0, "expected": nil, "fraction": nil, "bytesPerSecond": 0.0]) { a, _ in a })
            }
            if let finished = history[id] { return finished }
            throw unknown("receipt", id)
        }
    }

    /// `bind {view, task|receipt, kind?}`: the reply goes out first, then the
    /// view's current state.
    func bind(_ params: Params, reply: Reply) throws {
        let named = try params.byName(allowed: ["view", "task", "receipt", "kind"])
        let view = try named.string("view")
        let kind = try named.optionalChoice("kind", as: BindingKind.self) ?? .animating
        let receiptID = try named.optionalString("receipt")
        let taskID = try named.optionalString("task")
        let unbinding = named["task"]?.isNull == true && receiptID == nil
        guard unbinding || (taskID == nil) != (receiptID == nil) else {
            throw RPCError.invalidParams("give exactly one of 'task' (null unbinds) or 'receipt'")
        }
        try lock.withLock {
            guard let bindings else { throw RPCError(.internalError, "bindings are not available") }
            if unbinding {
                bindings.unbind(view: view)
                reply.success(["bound": false])
                return
            }
            let task: DownloadTask?
            let id: String
            if let receiptID {
                if let receipt = receipts[receiptID] {
                    task = receipt.task
                    id = receipt.taskID
                } else if let finished = history[receiptID] {
                    task = nil
                    id = finished["task"]?.stringValue ?? ""
                } else {
                    throw unknown("receipt", receiptID)
                }
            } else {
                id = taskID!
                task = tasks[id]
                if task == nil, !history.hasTask(id) { throw unknown("task", id) }
            }
            let snapshot = task.map { TaskSnapshot(running: $0.state == .running, received: $0.received, expected: $0.expected) }
            reply.success(["bound": .bool(snapshot != nil)])
            bindings.bind(view: view, task: id, kind: kind, snapshot: snapshot)
        }
    }

    /// Ends every unfinished receipt with `shutdown` and stops the engine.
    func shutdown() {
        lock.withLock {
            guard !isShutDown else { return }
            isShutDown = true
            let now = MonotonicClock.now()
            for receipt in receipts.values.sorted(by: { $0.createdAt < $1.createdAt }) where receipt.phase == .active {
                finish(receipt, Outcome(url: receipt.request.url, failure: TransferFailure(code: .shutdown, message: "courier shut down")), now: now)
            }
            for task in tasks.values { detach(task) }
            queue.removeAll()
        }
        engine.shutdown(timeout: 5)
        deliveries.sync {}
        try? FileManager.default.removeItem(atPath: downloadsDirectory)
        leftovers.finish()
    }

    // MARK: - Checks

    /// Why a response cannot satisfy `request`, if it cannot.
    static func check(
        _ request: DownloadRequest, response: ResponseHead, size: Int64?, memoryBodyLimit: Int64
    ) -> TransferFailure? {
        // Status 0: a scheme without status lines (file://, with --allow-scheme).
        if response.status != 0, !(200...299).contains(response.status) {
            return TransferFailure(code: .httpStatus, message: "the origin answered HTTP \(response.status)")
        }
        if !request.accepts(contentType: response.contentType) {
            return TransferFailure(
                code: .unacceptableContentType,
                message: "content type \(response.contentType ?? "(none)") is not among \(request.accept ?? [])")
        }
        if let limit = byteLimit(of: request, memoryBodyLimit: memoryBodyLimit), let size, size > limit {
            return tooLarge(limit)
        }
        return nil
    }

    /// The receipt's own limit: its `maxBytes`, and `memoryBodyLimit`
    /// (`--max-memory-body`) when it asks for `text` or `base64`, which are
    /// held in memory; decoded (decompressed) bytes count, so a small gzip
    /// cannot expand into gigabytes of memory. Other receipts of its task
    /// have theirs.
    static func byteLimit(of request: DownloadRequest, memoryBodyLimit: Int64) -> Int64? {
        guard request.body != .none else { return request.maxBytes }
        return min(request.maxBytes ?? .max, memoryBodyLimit)
    }

    static func tooLarge(_ limit: Int64) -> TransferFailure {
        TransferFailure(code: .tooLarge, message: "the body exceeds \(limit) bytes")
    }
}

extension String {
    /// 42 for "t42", for ordering ids.
    var numericSuffix: Int { Int(drop(while: { !$0.isNumber })) ?? 0 }
}
