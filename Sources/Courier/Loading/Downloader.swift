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

    private let lock = NSLock()
    private let engine: TransferEngine
    private let emit: @Sendable (String, JSON) -> Void
    private let logger: Logger
    private let temporaryDirectory: String
    private let downloadsDirectory: String
    private let transferDefaults: EasyOptions
    private let cache: ResponseCache

    // Guarded by `lock`.
    private var settings: Configuration
    private var tasks: [String: DownloadTask] = [:]
    private var tasksByKey: [TaskKey: DownloadTask] = [:]
    /// Receipts without their `download/finished` yet.
    private var receipts: [String: Receipt] = [:]
    private var slots: [String: Receipt] = [:]
    private var history = FinishedHistory(limit: 10_000)
    private var queue = RunQueue()
    /// Tasks handed to the engine and not yet ended, suspended ones included.
    private var running = 0
    private var counter = 0
    private var isShutDown = false
    private var activity: (any TaskActivityObserver)?
    private var bindings: ViewBindings?

    init(
        settings: Configuration, cache: ResponseCache, emit: @escaping @Sendable (String, JSON) -> Void, logger: Logger
    ) throws {
        self.settings = settings
        self.cache = cache
        self.emit = emit
        self.logger = logger
        temporaryDirectory = settings.cacheDir + "/tmp"
        downloadsDirectory = settings.cacheDir + "/downloads/\(getpid())"
        for directory in [temporaryDirectory, downloadsDirectory] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        var defaults = EasyOptions(url: "")
        defaults.protocols = settings.allowedSchemes.sorted().joined(separator: ",")
        defaults.connectTimeoutMilliseconds = Int(settings.connectTimeout * 1000)
        defaults.caFile = settings.caFile
        defaults.proxy = settings.proxy
        defaults.userAgent = "courier/\(Configuration.version)"
        transferDefaults = defaults
        engine = TransferEngine(logger: logger)
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

    private var currentSettings: Configuration { lock.withLock { settings } }

    // MARK: - Methods

    func download(_ params: Params, reply: Reply) throws {
        let request = try DownloadRequest(params, defaults: currentSettings)
        let destinationAllowed = request.destination.map(isDestinationAllowed) ?? true
        let lookup = cache.lookup(request)

        lock.lock()
        let now = MonotonicClock.now()
        if let slot = request.slot, let current = slots[slot], current.phase == .active {
            if current.request.url == request.url {
                reply.success(result(for: current, reused: true))
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
        if let slot = request.slot { slots[slot] = receipt }
        if request.wait { receipt.reply = reply }

        var refusal: TransferFailure?
        if !settings.allowedSchemes.contains(request.scheme) {
            refusal = TransferFailure(code: .schemeNotAllowed, message: "the scheme '\(request.scheme)' is not allowed")
        } else if !destinationAllowed {
            refusal = TransferFailure(
                code: .destinationNotAllowed, message: "the destination lies outside the download root")
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
    private func serve(_ hit: ResponseCache.Hit, to receipt: Receipt) {
        let delivery = Delivery(
            response: hit.response.head, size: Int64(hit.body.count), body: BodyFile(bytes: hit.body),
            source: hit.tier == .memory ? .memory : .disk, downloadsDirectory: downloadsDirectory, logger: logger)
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
                if let receipt = slots[slot] { count = cancel(receipt, now: now) ? 1 : 0 }
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
        try? FileManager.default.removeItem(atPath: downloadsDirectory)
    }

    // MARK: - Transfer events (engine thread)

    func transferDidReceiveResponse(_ transfer: Transfer, _ response: ResponseHead) -> Bool {
        lock.withLock {
            guard let task = tasks[transfer.taskID], task.transfer === transfer else { return false }
            if response.status == 304, task.revalidation != nil { return true }
            task.expected = response.announcedLength
            let refused = task.receipts.compactMap { receipt -> (Receipt, Outcome)? in
                guard let failure = Self.check(receipt.request, response: response, size: response.announcedLength) else {
                    return nil
                }
                var outcome = Outcome(url: receipt.request.url, response: response)
                outcome.error = failure
                return (receipt, outcome)
            }
            return end(refused, of: task, now: MonotonicClock.now())
        }
    }

    func transferDidReceiveData(_ transfer: Transfer, received: Int64, expected: Int64?) -> Bool {
        lock.withLock {
            guard let task = tasks[transfer.taskID], task.transfer === transfer else { return false }
            let now = MonotonicClock.now()
            task.received = received
            if expected != nil { task.expected = expected }
            let tooLarge = task.receipts.compactMap { receipt -> (Receipt, Outcome)? in
                guard let limit = receipt.request.maxBytes, received > limit else { return nil }
                return (receipt, Outcome(url: receipt.request.url, failure: Self.tooLarge(limit)))
            }
            guard end(tooLarge, of: task, now: now) else { return false }
            if now - task.lastProgressAt >= settings.progressInterval { emitProgress(task, now: now) }
            return true
        }
    }

    func transferDidComplete(_ transfer: Transfer, _ result: TransferResult) {
        let claimed: (task: DownloadTask, receipts: [Receipt])? = lock.withLock {
            guard let task = tasks[transfer.taskID], task.transfer === transfer else { return nil }
            let now = MonotonicClock.now()
            if result.failure == nil, task.received != task.lastProgressReceived { emitProgress(task, now: now) }
            let claimed = task.receipts
            for receipt in claimed { receipt.phase = .completing }
            detach(task, completed: result.failure == nil)
            pump()
            return (task, claimed)
        }
        guard let (task, receipts) = claimed else {
            if let path = result.bodyPath { unlink(path) }
            return
        }
        let outcomes: [Outcome]
        if let response = result.response, let bodyPath = result.bodyPath, result.failure == nil {
            let responseDate = Date()
            if response.status == 304, let stale = task.revalidation {
                unlink(bodyPath)
                guard let hit = cache.revalidated(stale, notModified: response, requestTime: task.requestDate, responseTime: responseDate)
                else {
                    retry(task, receipts)
                    return
                }
                outcomes = Delivery(
                    response: hit.response.head, size: Int64(hit.body.count), body: BodyFile(bytes: hit.body),
                    source: .revalidated, downloadsDirectory: downloadsDirectory, logger: logger
                ).deliver(to: receipts)
            } else {
                let keys = Set(receipts.map { ResponseCache.key(for: $0.request) })
                let bytes = (200...299).contains(response.status)
                    ? cache.store(
                        keys: keys, request: task.request, head: response, requestTime: task.requestDate,
                        responseTime: responseDate, bodyPath: bodyPath, size: result.size)
                    : nil
                outcomes = Delivery(
                    response: response, size: result.size, body: BodyFile(path: bodyPath, firstBytes: result.head, bytes: bytes),
                    source: .network, downloadsDirectory: downloadsDirectory, logger: logger
                ).deliver(to: receipts)
            }
        } else {
            outcomes = Delivery.failures(of: result, for: receipts)
        }
        lock.withLock {
            let now = MonotonicClock.now()
            for (receipt, outcome) in zip(receipts, outcomes) { finish(receipt, outcome, now: now) }
        }
    }

    /// The origin answered a revalidation with a 304 that no stored body
    /// fits any more: fetch again, without conditions, for the same receipts.
    private func retry(_ task: DownloadTask, _ receipts: [Receipt]) {
        lock.withLock {
            guard !isShutDown else {
                let now = MonotonicClock.now()
                for receipt in receipts {
                    finish(receipt, Outcome(url: receipt.request.url, failure: TransferFailure(code: .shutdown, message: "courier shut down")), now: now)
                }
                return
            }
            let again = DownloadTask(id: task.id, request: task.request)
            for receipt in receipts where receipt.phase == .completing {
                receipt.phase = .active
                receipt.task = again
                again.receipts.append(receipt)
            }
            guard !again.receipts.isEmpty else { return }
            tasks[again.id] = again
            if tasksByKey[again.key] == nil { tasksByKey[again.key] = again }
            cache.countMiss()
            queue.enqueue(again)
            pump()
        }
    }

    // MARK: - Internals (lock held)

    /// Starts queued tasks while fewer than `maxActive` run.
    private func pump() {
        guard !isShutDown else { return }
        while running < settings.maxActive, let task = queue.next(settings.prioritization) {
            start(task)
        }
    }

    private func start(_ task: DownloadTask) {
        var options = transferDefaults
        options.url = task.request.url
        options.headers = task.request.headers + (task.revalidation?.conditionalHeaders ?? [])
        task.requestDate = Date()
        options.timeoutMilliseconds = Int(task.request.timeout * 1000)
        let limits = task.receipts.map(\.request.maxBytes)
        if !limits.contains(where: { $0 == nil }) { options.maxFileSize = limits.compactMap { $0 }.max() }
        let transfer = Transfer(taskID: task.id, options: options, bodyPath: bodyPath(for: task), observer: self)
        task.transfer = transfer
        task.started = true
        task.state = .running
        task.runningSince = MonotonicClock.now()
        running += 1
        engine.start(transfer)
        activity?.transferStarted(task: task.id)
    }

    /// Where a task's body streams to: beside its first receipt's destination,
    /// so placing it there is a rename within one directory, else in the
    /// cache's temporary directory.
    private func bodyPath(for task: DownloadTask) -> String {
        let name = "\(getpid())-\(task.id).part"
        if let destination = task.receipts.first?.request.destination {
            let directory = (destination as NSString).deletingLastPathComponent
            if access(directory, W_OK) == 0 { return "\(directory)/.courier-\(name)" }
        }
        return "\(temporaryDirectory)/\(name)"
    }

    /// Removes a task from every map and stops its transfer.
    private func detach(_ task: DownloadTask, completed: Bool = false) {
        guard task.state != .finished else { return }
        if task.state == .running { activity?.transferStopped(task: task.id) }
        if task.started {
            running -= 1
            if let transfer = task.transfer { engine.cancel(transfer) }
        }
        task.state = .finished
        tasks[task.id] = nil
        if tasksByKey[task.key] === task { tasksByKey[task.key] = nil }
        activity?.taskFinished(task: task.id, finalSize: completed ? task.received : nil)
    }

    /// Ends the receipts a transfer can no longer satisfy and says whether
    /// the transfer goes on. When none is left, the task is detached first,
    /// so the activity count drops before their `download/finished`.
    private func end(_ ended: [(Receipt, Outcome)], of task: DownloadTask, now: Double) -> Bool {
        let none = ended.count == task.receipts.count
        if none { detach(task) }
        for (receipt, outcome) in ended { finish(receipt, outcome, now: now) }
        if none { pump() }
        return !none
    }

    @discardableResult
    private func cancel(_ receipt: Receipt, now: Double) -> Bool {
        guard receipt.phase == .active else { return false }
        let task = receipt.task
        finish(receipt, Outcome(url: receipt.request.url, failure: TransferFailure(code: .cancelled, message: "cancelled")), now: now)
        if let task, task.receipts.isEmpty {
            detach(task)
            pump()
        }
        return true
    }

    private func finish(_ receipt: Receipt, _ outcome: Outcome, now: Double) {
        guard receipt.phase != .finished else { return }
        receipt.phase = .finished
        receipts[receipt.id] = nil
        if let slot = receipt.request.slot, slots[slot] === receipt { slots[slot] = nil }
        receipt.task?.receipts.removeAll { $0 === receipt }

        var outcome = outcome
        outcome.durationMs = (now - receipt.createdAt) * 1000
        let outcomeJSON = outcome.json
        var snapshot = receipt.task.map { progressInfo($0, now: now) } ?? [
            "received": 0, "expected": nil, "fraction": nil, "bytesPerSecond": 0.0,
        ]
        if outcome.ok { snapshot["received"] = .integer(outcome.size) }
        snapshot["receipt"] = .string(receipt.id)
        snapshot["task"] = .string(receipt.taskID)
        snapshot["state"] = "finished"
        history.add(receipt.id, .object(snapshot))

        emit("download/finished", ["receipt": .string(receipt.id), "task": .string(receipt.taskID), "outcome": outcomeJSON])
        if let reply = receipt.reply {
            receipt.reply = nil
            var response = result(for: receipt, state: "finished").objectValue ?? [:]
            response["outcome"] = outcomeJSON
            if outcome.source == .memory || outcome.source == .disk { response["source"] = .string(outcome.source.rawValue) }
            reply.success(.object(response))
        }
        receipt.task = nil
    }

    private func emitProgress(_ task: DownloadTask, now: Double) {
        guard !task.receipts.isEmpty, task.received > task.lastProgressReceived else { return }
        task.lastProgressAt = now
        task.lastProgressReceived = task.received
        var params = progressInfo(task, now: now)
        params["task"] = .string(task.id)
        params["receipts"] = .array(task.receipts.map { .string($0.id) })
        emit("download/progress", .object(params))
        activity?.taskProgress(task: task.id, received: task.received, expected: task.expected)
    }

    private func progressInfo(_ task: DownloadTask, now: Double) -> [String: JSON] {
        [
            "task": .string(task.id),
            "received": .integer(task.received),
            "expected": task.expected.map(JSON.integer) ?? .null,
            "fraction": task.fraction.map(JSON.double) ?? .null,
            "bytesPerSecond": .double(task.bytesPerSecond(now: now).rounded()),
        ]
    }

    private func result(for receipt: Receipt, reused: Bool = false, state: String? = nil, source: String? = nil) -> JSON {
        let taskState: String
        if let state {
            taskState = state
        } else if let task = receipt.task {
            taskState = task.started ? "running" : "queued"
        } else {
            taskState = "finished"
        }
        var result: [String: JSON] = [
            "receipt": .string(receipt.id), "task": .string(receipt.taskID), "state": .string(taskState), "reused": .bool(reused),
        ]
        if let source { result["source"] = .string(source) }
        return .object(result)
    }

    private func withTask(_ params: Params, _ body: (DownloadTask, Double) -> Void) throws -> JSON {
        let named = try params.byName(allowed: ["task", "receipt"])
        let taskID = try named.optionalString("task")
        let receiptID = try named.optionalString("receipt")
        guard (taskID == nil) != (receiptID == nil) else {
            throw RPCError.invalidParams("give exactly one of 'task' or 'receipt'")
        }
        return try lock.withLock {
            let task: DownloadTask?
            if let receiptID {
                if let receipt = receipts[receiptID] {
                    task = receipt.task
                } else if let finished = history[receiptID] {
                    return ["task": finished["task"] ?? .null, "state": "finished"]
                } else {
                    throw unknown("receipt", receiptID)
                }
            } else {
                task = tasks[taskID!]
                if task == nil, !history.hasTask(taskID!) { throw unknown("task", taskID!) }
            }
            guard let task else { return ["task": JSON(taskID), "state": "finished"] }
            body(task, MonotonicClock.now())
            return ["task": .string(task.id), "state": .string(task.state.rawValue)]
        }
    }

    private func unknown(_ kind: String, _ id: String) -> RPCError {
        RPCError(Self.unknownReceipt, "unknown \(kind) '\(id)'", data: [kind: .string(id)])
    }

    // MARK: - Checks

    /// Why a response cannot satisfy `request`, if it cannot.
    static func check(_ request: DownloadRequest, response: ResponseHead, size: Int64?) -> TransferFailure? {
        if !(200...299).contains(response.status) {
            return TransferFailure(code: .httpStatus, message: "the origin answered HTTP \(response.status)")
        }
        if !request.accepts(contentType: response.contentType) {
            return TransferFailure(
                code: .unacceptableContentType,
                message: "content type \(response.contentType ?? "(none)") is not among \(request.accept ?? [])")
        }
        if let limit = request.maxBytes, let size, size > limit { return tooLarge(limit) }
        return nil
    }

    static func tooLarge(_ limit: Int64) -> TransferFailure {
        TransferFailure(code: .tooLarge, message: "the body exceeds \(limit) bytes")
    }

    private func isDestinationAllowed(_ destination: String) -> Bool {
        guard let root = currentSettings.downloadRoot else { return true }
        let standardized = URL(fileURLWithPath: destination).standardizedFileURL
        let parent = standardized.deletingLastPathComponent().resolvingSymlinksInPath().path
        let resolvedRoot = URL(fileURLWithPath: root).resolvingSymlinksInPath().path
        let candidate = parent + "/" + standardized.lastPathComponent
        return candidate.hasPrefix(resolvedRoot.hasSuffix("/") ? resolvedRoot : resolvedRoot + "/")
    }
}

extension String {
    /// 42 for "t42", for ordering ids.
    var numericSuffix: Int { Int(drop(while: { !$0.isNumber })) ?? 0 }
}
