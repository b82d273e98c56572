import Foundation
import JSON
import JSONRPC

/// The downloader's bookkeeping; every function here runs with `lock` held.
extension Downloader {
    /// Starts queued tasks while fewer than `maxActive` run.
    func pump() {
        guard !isShutDown else { return }
        while running < settings.maxActive, let task = queue.next(settings.prioritization) {
            start(task)
        }
    }

    func start(_ task: DownloadTask) {
        var options = transferDefaults
        options.url = task.request.url
        options.headers = task.request.headers + (task.revalidation?.conditionalHeaders ?? [])
        task.requestDate = Date()
        options.timeoutMilliseconds = Int(task.request.timeout * 1000)
        options.connectTimeoutMilliseconds = Int(settings.connectTimeout * 1000)
        options.lowSpeedLimit = settings.lowSpeedLimit
        options.lowSpeedTime = settings.lowSpeedTime
        let transfer = Transfer(
            taskID: task.id, options: options, redirectPolicy: redirectPolicy, body: bodyTarget(for: task), observer: self)
        task.transfer = transfer
        task.started = true
        task.state = .running
        task.runningSince = MonotonicClock.now()
        running += 1
        engine.start(transfer)
        activity?.transferStarted(task: task.id)
    }

    /// Where a task's body streams to: beside its first receipt's destination
    /// when that directory exists and may be written, so placing it there is
    /// a rename within one directory, else in the cache's temporary directory.
    func bodyTarget(for task: DownloadTask) -> BodyTarget {
        if let path = task.receipts.first?.request.destination {
            let destination = Destination(path, root: downloadRoot)
            if let (directory, name) = try? destination.openParent(create: false), faccessat(directory.fd, ".", W_OK, 0) == 0 {
                let target = BodyTarget(directory: directory, name: Destination.temporaryName(for: name), mode: 0o666)
                leftovers.record(partial: target.path)
                return target
            }
        }
        let name = "\(leftovers.owner)-\(task.id)-\(String(UInt64.random(in: 0...UInt64.max), radix: 36)).part"
        return BodyTarget(directory: temporaryDirectory, name: name, mode: 0o600)
    }

    /// Removes a task from every map and stops its transfer; `completed`
    /// when its body is complete and about to be delivered.
    func detach(_ task: DownloadTask, completed: Bool = false) {
        guard task.state != .finished else { return }
        if task.state == .running { activity?.transferStopped(task: task.id) }
        if task.started {
            running -= 1
            if let transfer = task.transfer {
                engine.cancel(transfer)
                // Its partial body goes now, not when the engine gets to it, so a
                // client told `cancelled` never sees it; writes still under way
                // land in the unlinked file.
                if !completed {
                    transfer.isAbandoned.store(true, ordering: .releasing)
                    transfer.body.remove()
                }
            }
        }
        task.state = .finished
        tasks[task.id] = nil
        if tasksByKey[task.key] === task { tasksByKey[task.key] = nil }
        activity?.taskFinished(task: task.id, finalSize: completed ? task.received : nil)
    }

    /// Ends the receipts a transfer can no longer satisfy and says whether
    /// the transfer goes on. When none is left, the task is detached first,
    /// so the activity count drops before their `download/finished`.
    func end(_ ended: [(Receipt, Outcome)], of task: DownloadTask, now: Double) -> Bool {
        let none = ended.count == task.receipts.count
        if none { detach(task) }
        for (receipt, outcome) in ended { finish(receipt, outcome, now: now) }
        if none { pump() }
        return !none
    }

    @discardableResult
    func cancel(_ receipt: Receipt, now: Double) -> Bool {
        guard receipt.phase == .active else { return false }
        let task = receipt.task
        finish(receipt, Outcome(url: receipt.request.url, failure: TransferFailure(code: .cancelled, message: "cancelled")), now: now)
        if let task, task.receipts.isEmpty {
            detach(task)
            pump()
        }
        return true
    }

    func finish(_ receipt: Receipt, _ outcome: Outcome, now: Double) {
        guard receipt.phase != .finished else { return }
        receipt.phase = .finished
        receipts[receipt.id] = nil
        if let slot = receipt.request.slot.map(ExactString.init), slots[slot] === receipt { slots[slot] = nil }
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
        for (reply, reused) in receipt.waiters {
            var response = result(for: receipt, reused: reused, state: "finished").objectValue ?? [:]
            response["outcome"] = outcomeJSON
            if outcome.source == .memory || outcome.source == .disk { response["source"] = .string(outcome.source.rawValue) }
            reply.success(.object(response))
        }
        receipt.waiters = []
        receipt.task = nil
    }

    func emitProgress(_ task: DownloadTask, now: Double) {
        guard !task.receipts.isEmpty, task.received > task.lastProgressReceived else { return }
        task.lastProgressAt = now
        task.lastProgressReceived = task.received
        var params = progressInfo(task, now: now)
        params["task"] = .string(task.id)
        params["receipts"] = .array(task.receipts.map { .string($0.id) })
        emit("download/progress", .object(params))
        activity?.taskProgress(task: task.id, received: task.received, expected: task.expected)
    }

    func progressInfo(_ task: DownloadTask, now: Double) -> [String: JSON] {
        [
            "task": .string(task.id),
            "received": .integer(task.received),
            "expected": task.expected.map(JSON.integer) ?? .null,
            "fraction": task.fraction.map(JSON.double) ?? .null,
            "bytesPerSecond": .double(task.bytesPerSecond(now: now).rounded()),
        ]
    }

    func result(for receipt: Receipt, reused: Bool = false, state: String? = nil, source: String? = nil) -> JSON {
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

    func withTask(_ params: Params, _ body: (DownloadTask, Double) -> Void) throws -> JSON {
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

    func unknown(_ kind: String, _ id: String) -> RPCError {
        RPCError(Self.unknownReceipt, "unknown \(kind) '\(id)'", data: [kind: .string(id)])
    }
}
