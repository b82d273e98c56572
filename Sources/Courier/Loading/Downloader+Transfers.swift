import Foundation
import JSON
import JSONRPC

/// Transfer events, called on the engine's thread.
extension Downloader {
    func transferDidReceiveResponse(_ transfer: Transfer, _ response: ResponseHead) -> Bool {
        lock.withLock {
            guard let task = tasks[transfer.taskID], task.transfer === transfer else { return false }
            if response.status == 304, task.revalidation != nil { return true }
            task.expected = response.announcedLength
            let refused = task.receipts.compactMap { receipt -> (Receipt, Outcome)? in
                guard let failure = Self.check(
                    receipt.request, response: response, size: response.announcedLength,
                    memoryBodyLimit: settings.maxMemoryBody)
                else {
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
                guard let limit = Self.byteLimit(of: receipt.request, memoryBodyLimit: settings.maxMemoryBody),
                    received > limit
                else { return nil }
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
        deliveries.async { [self] in
            batch { deliver(result, of: task, to: receipts) }
        }
    }

    /// The outcomes of a finished transfer for the receipts it had, on the
    /// delivery queue.
    private func deliver(_ result: TransferResult, of task: DownloadTask, to receipts: [Receipt]) {
        let memoryBodyLimit = currentSettings.maxMemoryBody
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
                    source: .revalidated, downloadsDirectory: downloadsDirectory, downloadRoot: downloadRoot, leftovers: leftovers,
                    memoryBodyLimit: memoryBodyLimit, logger: logger
                ).deliver(to: receipts)
            } else {
                let keys = ResponseCache.storageKeys(
                    for: receipts.map(\.request), redirects: result.redirects, finalURL: response.finalURL)
                let bytes = (200...299).contains(response.status)
                    ? cache.store(
                        keys: keys, request: task.request, head: response, requestTime: task.requestDate,
                        responseTime: responseDate, bodyPath: bodyPath, size: result.size)
                    : nil
                outcomes = Delivery(
                    response: response, size: result.size, body: BodyFile(path: bodyPath, firstBytes: result.head, bytes: bytes),
                    source: .network, downloadsDirectory: downloadsDirectory, downloadRoot: downloadRoot, leftovers: leftovers,
                    memoryBodyLimit: memoryBodyLimit, logger: logger
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
    func retry(_ task: DownloadTask, _ receipts: [Receipt]) {
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
}
