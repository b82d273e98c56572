import Locking
import Testing

@testable import Courier

private func request(
    _ url: String = "http://origin/a", headers: [(name: String, value: String)] = [], slot: String? = nil,
    priority: Priority = .normal, cachePolicy: CachePolicy = .default, body: BodyKind = .none,
    destination: String? = nil, maxBytes: Int64? = nil, timeout: Double = 60, wait: Bool = false, retries: Int = 3,
    mirrors: [String] = [], maxRate: Int64? = nil, integrity: Integrity? = nil, textEncoding: String? = nil
) -> DownloadRequest {
    DownloadRequest(
        url: url, scheme: String(url.prefix { $0 != ":" }), hasUserInfo: false, headers: headers, slot: slot,
        priority: priority, cachePolicy: cachePolicy, accept: nil, body: body, textEncoding: textEncoding, destination: destination,
        maxBytes: maxBytes, timeout: timeout, cacheKey: nil, wait: wait, retries: retries, mirrors: mirrors,
        integrity: integrity, maxRate: maxRate)
}

/// Task and receipt ids by number, as the scheduler issues them.
private func t(_ number: Int) -> TaskID { TaskID(number) }
private func r(_ number: Int) -> ReceiptID { ReceiptID(number) }

private let sha256 = try! Integrity(parsing: "sha256-" + String(repeating: "A", count: 43) + "=")
private let sha512 = try! Integrity(parsing: "sha512-" + String(repeating: "A", count: 86) + "==")

private func response(_ status: Int = 200, length: Int64? = nil) -> ResponseHead {
    ResponseHead(status: status, headers: length.map { [("content-length", String($0))] } ?? [])
}

private let succeeded = TransferResult(response: response(), size: 10, bodyPath: "/body")

/// The scheduler driven as the server drives it, with a fake engine: it
/// records what it is asked to do and plays transfers' events back. Waiters
/// are request numbers.
private struct Harness {
    var scheduler: DownloadScheduler<Int>
    var now = 0.0
    var nextWaiter = 0
    /// Everything asked so far, in order.
    var log: [SchedulerAction<Int>] = []
    var answers: [Int: Answer] = [:]
    /// Transfers started and not stopped, by task.
    var transfers: [TaskID: TransferID] = [:]
    var stopped: [TransferID] = []
    var discarded: [String] = []
    var paused: Set<TransferID> = []
    var delivering: [DeliveryOrder] = []
    /// `download/finished` per receipt, in order.
    var finished: [(receipt: ReceiptID, outcome: Outcome)] = []
    var indicator: Set<TaskID> = []
    /// `download/retrying`, in order.
    var retrying: [RetryNotice] = []
    /// Moments `wake(at:)` asked for, in order.
    var wakes: [Double] = []
    /// Rate limits of started transfers: the one each started with, then
    /// each change, in order.
    var rates: [(id: TransferID, rate: Int64?)] = []

    /// Waits before retries are `retry`'s, scaled by `random`.
    init(
        maxActive: Int = 4, prioritization: Prioritization = .fifo, progressInterval: Double = 0.1,
        retry: RetryPolicy = RetryPolicy(delay: 1, maxDelay: 30, maxTime: 60), random: Double = 1
    ) {
        var settings = SchedulerSettings()
        settings.maxActive = maxActive
        settings.prioritization = prioritization
        settings.progressInterval = progressInterval
        settings.retry = retry
        scheduler = DownloadScheduler(settings: settings, random: { random })
    }

    mutating func take() -> [SchedulerAction<Int>] {
        let actions = scheduler.takeActions()
        for action in actions {
            switch action {
            case .answer(let waiter, let answer): answers[waiter] = answer
            case .notify(.finished(let receipt, _, let outcome)): finished.append((receipt, outcome))
            case .notify(.retrying(let notice)): retrying.append(notice)
            case .notify: break
            case .start(let order):
                #expect(transfers[order.id.task] == nil, "one transfer per task")
                transfers[order.id.task] = order.id
                rates.append((order.id, order.maxRate))
            case .stop(let id):
                stopped.append(id)
                transfers[id.task] = nil
            case .pause(let id): paused.insert(id)
            case .resume(let id): paused.remove(id)
            case .limit(let id, let rate): rates.append((id, rate))
            case .deliver(let order):
                delivering.append(order)
                transfers[order.id.task] = nil
            case .discard(let path): discarded.append(path)
            case .transferStarted(let task): indicator.insert(task)
            case .transferStopped(let task): indicator.remove(task)
            case .wake(let moment): wakes.append(moment)
            }
        }
        log += actions
        return actions
    }

    /// A `download`: its receipt and what became of it (`r0` and `t0`,
    /// which the scheduler never issues, when the answer waits for the
    /// outcome).
    @discardableResult
    mutating func download(_ request: DownloadRequest, cache: CacheAnswer = .miss, refusal: TransferFailure? = nil) -> (
        receipt: ReceiptID, task: TaskID, admission: Admission
    ) {
        nextWaiter += 1
        let waiter = nextWaiter
        let admission = scheduler.download(request, refusal: refusal, cache: cache, waiter: waiter, now: now)
        _ = take()
        guard case .download(let reply)? = answers[waiter] else {
            return (r(0), t(0), admission)
        }
        return (reply.receipt, reply.task, admission)
    }

    mutating func answer(_ body: (inout DownloadScheduler<Int>, Int) throws(SchedulerError) -> Void) throws(SchedulerError) -> Answer? {
        nextWaiter += 1
        try body(&scheduler, nextWaiter)
        _ = take()
        return answers[nextWaiter]
    }

    mutating func cancel(_ target: CancelTarget) -> Int {
        let now = self.now
        guard case .cancelled(let count)? = try? answer({ s, w throws(SchedulerError) in try s.cancel(target, waiter: w, now: now) })
        else { return -1 }
        return count
    }

    /// Runs `task`'s transfer to its end: headers, `bytes` of body, success;
    /// `resumedFrom`: the byte the attempt continued a kept body from.
    mutating func complete(_ task: TaskID, bytes: Int64 = 10, resumedFrom: Int64? = nil) {
        guard let id = transfers[task] else {
            Issue.record("\(task) has no transfer")
            return
        }
        _ = scheduler.responseArrived(id, response(length: bytes), length: bytes, now: now)
        _ = scheduler.dataArrived(id, received: bytes, expected: bytes, now: now)
        let result = TransferResult(
            response: response(length: bytes), size: bytes, bodyPath: "/body-\(task)", resumedFrom: resumedFrom)
        scheduler.transferEnded(id, result, now: now)
        _ = take()
    }

    /// Delivers every pending order: a success for each receipt, except an
    /// `integrity_mismatch` for those in `mismatching`, from `source`; or
    /// the transfer's failure.
    mutating func deliverAll(mismatching: Set<ReceiptID> = [], source: OutcomeSource = .network) {
        let orders = delivering
        delivering = []
        for order in orders {
            guard order.result.failure == nil else {
                let failures = Delivery.failures(of: order.result, for: order.receipts.map(\.request))
                scheduler.delivered(zip(order.receipts, failures).map { ($0.0.id, $0.1) }, of: order, now: now)
                _ = take()
                continue
            }
            let outcomes = order.receipts.map { receipt -> (receipt: ReceiptID, outcome: Outcome) in
                var outcome = Outcome(url: receipt.request.url)
                outcome.size = order.result.size
                outcome.source = source
                if mismatching.contains(receipt.id) {
                    outcome.error = TransferFailure(
                        code: .integrityMismatch, message: "mismatch", expected: receipt.request.integrity?.expected, actual: "sha256-x")
                }
                return (receipt.id, outcome)
            }
            scheduler.delivered(outcomes, of: order, now: now)
            _ = take()
        }
    }

    /// Ends `task`'s transfer with `code`, before or after its response;
    /// `resumedFrom`: the byte the attempt continued a kept body from.
    mutating func fail(_ task: TaskID, _ code: OutcomeErrorCode, response: ResponseHead? = nil, resumedFrom: Int64? = nil) {
        guard let id = transfers[task] else {
            Issue.record("\(task) has no transfer")
            return
        }
        let failure = TransferFailure(code: code, message: "\(code)")
        scheduler.transferEnded(
            id, TransferResult(response: response, size: 0, bodyPath: nil, failure: failure, resumedFrom: resumedFrom), now: now)
        _ = take()
    }

    /// `task`'s response has status `status`: whether the transfer goes on.
    @discardableResult
    mutating func respond(_ task: TaskID, status: Int, retryAfter: Int64? = nil) -> Bool {
        guard let id = transfers[task] else {
            Issue.record("\(task) has no transfer")
            return false
        }
        let goesOn = scheduler.responseArrived(id, response(status), length: nil, retryAfter: retryAfter, now: now)
        _ = take()
        return goesOn
    }

    /// The clock reaches `moment` and the scheduler hears of it.
    mutating func tick(at moment: Double) {
        now = moment
        scheduler.tick(now: moment)
        _ = take()
    }

    /// What `progress` says of `receipt`'s state.
    mutating func state(of receipt: ReceiptID) -> ReplyState? {
        let now = self.now
        guard case .receipt(let progress)? = try? answer({ s, w throws(SchedulerError) in try s.progress(receipt: receipt, waiter: w, now: now) })
        else { return nil }
        return progress.state
    }

    var started: [TaskID] { log.compactMap { if case .start(let order) = $0 { order.id.task } else { nil } } }

    /// The URL each started transfer asked, in order.
    var startedURLs: [String] { log.compactMap { if case .start(let order) = $0 { order.url } else { nil } } }

    /// What bound views were told, in order.
    var views: [ViewNotice] { log.compactMap { if case .notify(.view(let notice)) = $0 { notice } else { nil } } }

    func finishedCount(_ receipt: ReceiptID) -> Int { finished.filter { $0.receipt == receipt }.count }

    func outcome(_ receipt: ReceiptID) -> Outcome? { finished.last { $0.receipt == receipt }?.outcome }
}

@Suite struct DownloadSchedulerTests {
    // MARK: receipts and tasks

    @Test func everyDownloadGetsAReceiptAndIdenticalRequestsShareATask() {
        var h = Harness()
        let a = h.download(request())
        let b = h.download(request(slot: "s", priority: .high, body: .text, destination: "/x", maxBytes: 5))
        #expect(a.receipt == r(1) && b.receipt == r(2))
        #expect(a.task == t(1) && b.task == t(1))
        #expect(a.admission == .queued && b.admission == .joined)
        #expect(h.started == [t(1)])
        h.complete(t(1))
        h.deliverAll()
        #expect(h.finishedCount(r(1)) == 1 && h.finishedCount(r(2)) == 1)
    }

    @Test(arguments: [
        request("http://origin/b"),
        request("http://origin/caf\u{E9}"),
        request(headers: [("X-A", "1")]),
        request(timeout: 5),
    ])
    func requestsThatAskTheOriginSomethingElseGetTheirOwnTask(_ other: DownloadRequest) {
        var h = Harness()
        let first = h.download(request("http://origin/cafe\u{301}", headers: []))
        let same = h.download(request("http://origin/cafe\u{301}"))
        let second = h.download(other)
        #expect(first.task == same.task)
        #expect(second.task != first.task)
    }

    @Test func headerNamesAreComparedWithoutCaseAndValuesAsBytes() {
        var h = Harness()
        let a = h.download(request(headers: [("X-Token", "v")]))
        let b = h.download(request(headers: [("x-token", "v")]))
        let c = h.download(request(headers: [("x-token", "V")]))
        #expect(a.task == b.task)
        #expect(c.task != a.task)
    }

    @Test func withoutWaitTheAnswerComesBeforeAnyNotificationNamingTheReceipt() {
        var h = Harness()
        _ = h.scheduler.download(request("ftp://origin/a"), waiter: 1, now: 0)
        let actions = h.take()
        guard case .answer(1, .download(let reply)) = actions.first else {
            Issue.record("first action: \(String(describing: actions.first))")
            return
        }
        #expect(reply.state == .finished)
        #expect(h.outcome(reply.receipt)?.error?.code == .schemeNotAllowed)
    }

    @Test func onlyTheSchemesTheSettingsAllowRun() {
        var h = Harness()
        // Given settings that allow https alone
        h.scheduler.settings.allowedSchemes = ["https"]

        // When an http and an https download come
        let plain = h.download(request("http://origin/a"))
        let secure = h.download(request("https://origin/b"))

        // Then the first is refused for its scheme, and the second queued
        #expect(h.outcome(plain.receipt)?.error?.code == .schemeNotAllowed)
        #expect(secure.admission == .queued)
        // And once http is allowed again, an http download is queued too
        h.scheduler.settings.allowedSchemes = ["http", "https"]
        #expect(h.download(request("http://origin/c")).admission == .queued)
    }

    // MARK: refusals and the cache

    @Test func refusedRequestsFinishAtOnceWithTheirCode() {
        var h = Harness()
        let scheme = h.download(request("ftp://origin/a"))
        let destination = h.download(
            request(destination: "/elsewhere/x"),
            refusal: TransferFailure(code: .destinationNotAllowed, message: "outside the root"))
        let notCached = h.download(request(cachePolicy: .cacheOnly))
        #expect(h.outcome(scheme.receipt)?.error?.code == .schemeNotAllowed)
        #expect(h.outcome(destination.receipt)?.error?.code == .destinationNotAllowed)
        #expect(h.outcome(notCached.receipt)?.error?.code == .notCached)
        #expect([scheme, destination, notCached].allSatisfy { $0.admission == .refused })
        #expect(h.started.isEmpty)
        #expect(h.scheduler.receipts.isEmpty)
    }

    @Test func aCacheHitIsAnsweredFinishedAndEndsWhenDelivered() {
        var h = Harness()
        let hit = h.download(request(), cache: .hit(.memory))
        #expect(hit.admission == .served(receipt: hit.receipt))
        guard case .download(let reply)? = h.answers[1] else {
            Issue.record("no answer")
            return
        }
        #expect(reply.state == .finished && reply.source == .memory)
        #expect(h.started.isEmpty && h.finished.isEmpty)
        h.scheduler.delivered([(hit.receipt, Outcome(url: "http://origin/a"))], now: 1)
        _ = h.take()
        #expect(h.finishedCount(hit.receipt) == 1)
    }

    @Test func aHitServedAtOnceFinishesInTheStepThatAdmitsItAfterItsAnswer() throws {
        // Given a hit in a slot, whose outcome is made as it is admitted
        var h = Harness()
        var served: ReceiptID?
        let admission = h.scheduler.download(request(slot: "s"), cache: .hit(.memory), waiter: 1, now: 1) { receipt in
            served = receipt
            var outcome = Outcome(url: "http://origin/a")
            outcome.source = .memory
            return (outcome, 1.5)
        }
        let actions = h.take()

        // Then it is answered finished, then finishes, in that step, with
        // the time its outcome took, and is never among the unfinished
        let receipt = try #require(served)
        #expect(admission == .served(receipt: receipt))
        #expect(actions.count == 2)
        guard case .answer(1, .download(let reply)) = actions.first, case .notify(.finished(receipt, _, let outcome)) = actions.last
        else {
            Issue.record("not answered, then finished: \(actions)")
            return
        }
        #expect(reply.receipt == receipt && reply.state == .finished && reply.source == .memory)
        #expect(outcome.durationMs == 500 && outcome.attempts == 0)
        #expect(h.scheduler.receipts.isEmpty && h.scheduler.isSettled)

        // And it is finished for `progress`, `cancel` and `suspend`, and
        // its slot is free
        #expect(h.state(of: receipt) == .finished)
        #expect(h.cancel(.receipt(receipt)) == 0)
        #expect(h.cancel(.slot("s")) == 0)
        guard case .task(_, .finished)? = try h.answer({ s, w throws(SchedulerError) in
            try s.suspend(.receipt(receipt), waiter: w, now: 2)
        })
        else {
            Issue.record("suspend of a finished receipt")
            return
        }
        let next = h.download(request("http://origin/b", slot: "s"))
        #expect(next.admission == .queued)
    }

    @Test func aHitThatIsNotServedAtOnceWaitsForItsDelivery() {
        // Given a hit whose outcome is not made as it is admitted
        var h = Harness()
        var asked = 0
        let admission = h.scheduler.download(request(), cache: .hit(.disk), waiter: 1, now: 0) { _ in
            asked += 1
            return nil
        }
        _ = h.take()

        // Then it waits among the unfinished receipts until it is delivered
        #expect(asked == 1 && admission == .served(receipt: r(1)))
        #expect(h.scheduler.receipts[r(1)] != nil && h.finished.isEmpty)
        h.scheduler.delivered([(r(1), Outcome(url: "http://origin/a"))], now: 1)
        _ = h.take()
        #expect(h.finishedCount(r(1)) == 1 && h.scheduler.receipts.isEmpty)
    }

    @Test func onlyAHitIsServedAtOnce() {
        // Given requests refused, missed and of a scheme not allowed, each
        // offered to be served at once
        var h = Harness()
        var asked = 0
        let refused: [(String, CacheAnswer, TransferFailure?)] = [
            ("http://origin/a", .hit(.memory), TransferFailure(code: .destinationNotAllowed, message: "no")),
            ("http://origin/b", .miss, nil), ("ftp://origin/d", .hit(.memory), nil),
        ]
        for (url, cache, refusal) in refused {
            h.scheduler.download(request(url), refusal: refusal, cache: cache, waiter: 1, now: 0) { _ in
                asked += 1
                return nil
            }
        }

        // Then none is
        #expect(asked == 0)
    }

    @Test func aHitTakesTheTaskOfItsRequestWhenOneIsLiveAndNoneLeftBehind() {
        // Given a hit while nothing runs, then a miss and a hit of one URL
        var h = Harness()
        let alone = h.download(request(), cache: .hit(.memory))
        let miss = h.download(request())
        let hit = h.download(request(), cache: .hit(.memory))
        let joined = h.download(request())

        // Then the first has a task of its own, the second a new one, which
        // the hit names and the last joins
        #expect(alone.task == t(1) && miss.task == t(2) && hit.task == t(2) && joined.task == t(2))
        #expect(joined.admission == .joined)
        #expect(h.started == [t(2)])
    }

    // MARK: the run queue

    @Test func atMostMaxActiveTasksHaveATransfer() {
        var h = Harness(maxActive: 2)
        for index in 1...5 { h.download(request("http://origin/\(index)")) }
        #expect(h.started == [t(1), t(2)])
        h.complete(t(1))
        #expect(h.started == [t(1), t(2), t(3)])
        #expect(h.scheduler.running == 2)
    }

    @Test func queuedTasksStartByPriorityThenInOrder() {
        var h = Harness(maxActive: 1)
        h.download(request("http://origin/busy"))
        h.download(request("http://origin/low", priority: .low))
        h.download(request("http://origin/normal1"))
        h.download(request("http://origin/high", priority: .high))
        h.download(request("http://origin/normal2"))
        for task in [t(1), t(4), t(3), t(5), t(2)] { h.complete(task) }
        #expect(h.started == [t(1), t(4), t(3), t(5), t(2)])
    }

    @Test func lifoStartsTheNewestOfAPriorityFirst() {
        var h = Harness(maxActive: 1, prioritization: .lifo)
        for index in 1...4 { h.download(request("http://origin/\(index)")) }
        for task in [t(1), t(4), t(3)] { h.complete(task) }
        #expect(h.started == [t(1), t(4), t(3), t(2)])
    }

    @Test func aTaskTakesTheHighestPriorityOfItsReceipts() {
        var h = Harness(maxActive: 1)
        h.download(request("http://origin/busy"))
        h.download(request("http://origin/high", priority: .high))
        h.download(request("http://origin/raised", priority: .low))
        h.download(request("http://origin/raised", priority: .high))
        h.complete(t(1))
        h.complete(t(2))
        #expect(h.started == [t(1), t(2), t(3)])
    }

    @Test func aSuspendedTaskKeepsItsPlaceAmongTheRunning() throws {
        var h = Harness(maxActive: 1)
        let a = h.download(request("http://origin/a"))
        h.download(request("http://origin/b"))
        let answer = try h.answer { s, w throws(SchedulerError) in try s.suspend(.receipt(a.receipt), waiter: w, now: 1) }
        guard case .task(_, let state)? = answer else { Issue.record("no answer"); return }
        #expect(state == .suspended)
        #expect(h.paused.contains(TransferID(task: t(1), attempt: 1)))
        #expect(h.started == [t(1)])
        #expect(!h.indicator.contains(t(1)))
        _ = try h.answer { s, w throws(SchedulerError) in try s.resume(.task(t(1)), waiter: w, now: 2) }
        #expect(h.paused.isEmpty && h.indicator.contains(t(1)))
    }

    @Test func aSuspendedQueuedTaskDoesNotStartUntilResumed() throws {
        var h = Harness(maxActive: 1)
        h.download(request("http://origin/a"))
        h.download(request("http://origin/b"))
        h.download(request("http://origin/c"))
        _ = try h.answer { s, w throws(SchedulerError) in try s.suspend(.task(t(2)), waiter: w, now: 0) }
        h.complete(t(1))
        #expect(h.started == [t(1), t(3)])
        _ = try h.answer { s, w throws(SchedulerError) in try s.resume(.task(t(2)), waiter: w, now: 0) }
        h.complete(t(3))
        #expect(h.started == [t(1), t(3), t(2)])
    }

    @Test func aBodyThatCompletesAsItsTaskIsSuspendedWaitsForResume() throws {
        var h = Harness(maxActive: 1)
        let a = h.download(request("http://origin/a"))
        h.download(request("http://origin/b"))
        _ = try h.answer { s, w throws(SchedulerError) in try s.suspend(.task(a.task), waiter: w, now: 1) }
        h.complete(t(1))
        #expect(h.delivering.isEmpty && h.finished.isEmpty)
        #expect(h.started == [t(1)], "the suspended task keeps its place")
        let listed = try h.answer { s, w throws(SchedulerError) in try s.progress(receipt: nil, waiter: w, now: 2) }
        guard case .tasks(let tasks)? = listed else { Issue.record("no task list"); return }
        #expect(tasks.map(\.state) == [.suspended, .queued])

        let resumed = try h.answer { s, w throws(SchedulerError) in try s.resume(.task(t(1)), waiter: w, now: 3) }
        guard case .task(_, let state)? = resumed else { Issue.record("no answer"); return }
        #expect(state == .finished)
        #expect(h.delivering.map(\.id.task) == [t(1)] && h.delivering.first?.result.bodyPath == "/body-t1")
        #expect(h.started == [t(1), t(2)])
        h.deliverAll()
        #expect(h.outcome(a.receipt)?.ok == true)
    }

    @Test func cancellingATaskWhoseBodyWaitsForResumeDiscardsTheBody() throws {
        var h = Harness()
        let a = h.download(request())
        _ = try h.answer { s, w throws(SchedulerError) in try s.suspend(.task(a.task), waiter: w, now: 1) }
        h.complete(t(1))
        #expect(h.cancel(.receipt(a.receipt)) == 1)
        #expect(h.outcome(a.receipt)?.error?.code == .cancelled)
        #expect(h.delivering.isEmpty)
        #expect(h.stopped.contains { $0.task == t(1) })
        #expect(h.discarded == ["/body-t1"])
        #expect(h.scheduler.running == 0)
    }

    @Test func aSuspendedTransferThatTimesOutEndsAtOnce() throws {
        var h = Harness()
        let a = h.download(request(timeout: 1))
        _ = try h.answer { s, w throws(SchedulerError) in try s.suspend(.task(a.task), waiter: w, now: 0.5) }
        let timedOut = TransferResult(
            response: nil, size: 0, bodyPath: nil, failure: TransferFailure(code: .timeout, message: "timed out"))
        h.scheduler.transferEnded(h.transfers[t(1)]!, timedOut, now: 1)
        _ = h.take()
        #expect(h.delivering.map(\.result.failure?.code) == [.timeout])
        #expect(h.scheduler.running == 0)
    }

    @Test func suspendingAReceiptWhoseOutcomeIsBeingPreparedNamesItsTask() throws {
        var h = Harness()
        let a = h.download(request())
        h.complete(t(1))
        for target in [TaskTarget.receipt(a.receipt), .task(a.task)] {
            let answer = try h.answer { s, w throws(SchedulerError) in try s.resume(target, waiter: w, now: 1) }
            guard case .task(let id, let state)? = answer else { Issue.record("no answer"); return }
            #expect(id == a.task && state == .finished)
        }
    }

    // MARK: cancel

    @Test func cancelEndsTheReceiptAndStopsTheTransferOnlyWhenNoneIsLeft() {
        var h = Harness()
        let a = h.download(request())
        let b = h.download(request())
        #expect(h.cancel(.receipt(a.receipt)) == 1)
        #expect(h.outcome(a.receipt)?.error?.code == .cancelled)
        #expect(h.stopped.isEmpty)
        #expect(h.cancel(.receipt(b.receipt)) == 1)
        #expect(h.stopped == [TransferID(task: t(1), attempt: 1)])
        #expect(h.scheduler.running == 0 && h.indicator.isEmpty)
    }

    @Test func aCancelledTaskLeavesTheCoalescingTableAtOnce() {
        var h = Harness()
        let a = h.download(request())
        _ = h.cancel(.receipt(a.receipt))
        let again = h.download(request())
        #expect(again.task != a.task)
        #expect(h.started == [a.task, again.task])
    }

    @Test func cancelBySlotAllAndUnknownReceipts() {
        var h = Harness()
        let slotted = h.download(request("http://origin/1", slot: "avatar"))
        h.download(request("http://origin/2"))
        h.download(request("http://origin/3"))
        #expect(h.cancel(.slot("avatar")) == 1)
        #expect(h.outcome(slotted.receipt)?.error?.code == .cancelled)
        #expect(h.cancel(.slot("avatar")) == 0)
        #expect(h.cancel(.all) == 2)
        #expect(h.cancel(.all) == 0)
        #expect(h.cancel(.receipt(slotted.receipt)) == 0, "a finished receipt is remembered")
        #expect(throws: SchedulerError.unknownReceipt(r(99))) {
            try h.scheduler.cancel(.receipt(r(99)), waiter: 0, now: 0)
        }
        #expect(h.finished.count == 3)
    }

    // MARK: slots and wait

    @Test func aSlotWithTheSameURLGivesItsReceiptBackAndAnotherURLCancelsIt() {
        var h = Harness()
        let first = h.download(request("http://origin/1", slot: "s"))
        let again = h.download(request("http://origin/1", slot: "s"))
        #expect(again.admission == .reused && again.receipt == first.receipt)
        guard case .download(let reply)? = h.answers[2] else { Issue.record("no answer"); return }
        #expect(reply.reused)
        let other = h.download(request("http://origin/2", slot: "s"))
        #expect(other.receipt != first.receipt)
        #expect(h.outcome(first.receipt)?.error?.code == .cancelled)
        #expect(h.stopped.count == 1)
    }

    @Test func waitAnswersWithTheOutcomeWhenTheReceiptEndsAndSoDoesAReusingWait() {
        var h = Harness()
        h.download(request("http://origin/1", slot: "s", wait: true))
        h.download(request("http://origin/1", slot: "s", wait: true))
        #expect(h.answers.isEmpty)
        h.complete(t(1))
        #expect(h.answers.isEmpty, "answered when the outcome is delivered")
        h.deliverAll()
        guard case .download(let first)? = h.answers[1], case .download(let second)? = h.answers[2] else {
            Issue.record("answers: \(h.answers)")
            return
        }
        #expect(first.receipt == second.receipt)
        #expect(!first.reused && second.reused)
        #expect(first.outcome?.ok == true && first.state == .finished)
        // The notification comes first, then the answers.
        let order = h.log.compactMap { action -> String? in
            switch action {
            case .notify(.finished): "finished"
            case .answer: "answer"
            default: nil
            }
        }
        #expect(order == ["finished", "answer", "answer"])
    }

    // MARK: limits

    @Test func maxBytesIsCheckedAgainstContentLengthAndThenAsBytesArrive() {
        var h = Harness()
        let small = h.download(request(maxBytes: 5))
        let large = h.download(request(maxBytes: 100))
        let none = h.download(request())
        let id = h.transfers[t(1)]!
        let goesOn = h.scheduler.responseArrived(id, response(length: 10), length: 10, now: 0)
        _ = h.take()
        #expect(goesOn)
        #expect(h.outcome(small.receipt)?.error?.code == .tooLarge)
        let stillGoesOn = h.scheduler.dataArrived(id, received: 101, expected: nil, now: 0)
        _ = h.take()
        #expect(stillGoesOn)
        #expect(h.outcome(large.receipt)?.error?.code == .tooLarge)
        #expect(h.finishedCount(none.receipt) == 0)
        #expect(h.stopped.isEmpty)
    }

    @Test func theTransferStopsWhenNoReceiptIsLeft() {
        var h = Harness()
        let a = h.download(request(maxBytes: 5))
        let b = h.download(request(body: .text))
        h.scheduler.settings.maxMemoryBody = 7
        let id = h.transfers[t(1)]!
        let goesOn = h.scheduler.dataArrived(id, received: 8, expected: nil, now: 0)
        _ = h.take()
        #expect(!goesOn)
        #expect(h.outcome(a.receipt)?.error?.code == .tooLarge)
        #expect(h.outcome(b.receipt)?.error?.code == .tooLarge)
        #expect(h.stopped == [id])
        let afterStop = h.scheduler.dataArrived(id, received: 9, expected: nil, now: 0)
        #expect(!afterStop, "a stopped transfer's events are ignored")
    }

    @Test func bodiesHeldInMemoryEndWhenTheirJSONPassesTheMemoryLimit() throws {
        // Given a text, a Latin-1 text, a base64 and a file receipt on one task
        var h = Harness()
        h.scheduler.settings.maxMemoryBody = 600
        let text = h.download(request(body: .text))
        let latin = h.download(request(body: .text, textEncoding: "iso-8859-1"))
        let base64 = h.download(request(body: .base64))
        let file = h.download(request())
        let id = try #require(h.transfers[t(1)])
        _ = h.scheduler.responseArrived(id, ResponseHead(status: 200, headers: [("content-type", "text/plain")]), length: nil, now: 0)

        // When 100 bytes that take 601 as a JSON string (read as UTF-8) arrive
        let goesOn = h.scheduler.dataArrived(id, received: 100, textLength: 601, expected: nil, now: 0)
        _ = h.take()
        #expect(goesOn)
        // Then the UTF-8 text receipt ends, naming the limit, and the others go on
        #expect(h.outcome(text.receipt)?.error?.code == .tooLarge)
        #expect(h.outcome(text.receipt)?.error?.message.contains("maxMemoryBody") == true)
        #expect(h.finishedCount(latin.receipt) == 0 && h.finishedCount(base64.receipt) == 0)

        // When 451 bytes have arrived: 604 in base64
        let stillGoesOn = h.scheduler.dataArrived(id, received: 451, textLength: 2706, expected: nil, now: 0)
        _ = h.take()
        #expect(stillGoesOn)
        #expect(h.outcome(base64.receipt)?.error?.code == .tooLarge)
        #expect(h.finishedCount(latin.receipt) == 0 && h.finishedCount(file.receipt) == 0)
    }

    @Test func aTransferCountsTextOnlyWhenAReceiptAsksForIt() {
        var h = Harness()
        h.download(request("http://origin/file"))
        h.download(request("http://origin/text", body: .text))
        let orders = h.log.compactMap { action -> TransferOrder? in
            guard case .start(let order) = action else { return nil }
            return order
        }
        #expect(orders.map(\.countsText) == [false, true])
    }

    // MARK: progress and history

    @Test func progressIsToldAtMostOncePerIntervalPlusOnceWhenComplete() {
        var h = Harness(progressInterval: 1)
        h.download(request())
        let id = h.transfers[t(1)]!
        for (index, time) in [0.0, 0.2, 0.5, 1.0, 1.5, 2.5].enumerated() {
            _ = h.scheduler.dataArrived(id, received: Int64(index + 1) * 10, expected: 100, now: time)
        }
        h.scheduler.transferEnded(id, TransferResult(response: response(), size: 65, bodyPath: "/b"), now: 2.6)
        let received = h.take().compactMap { action -> Int64? in
            if case .notify(.progress(let figures, _)) = action { figures.received } else { nil }
        }
        #expect(received == [10, 40, 60])
        #expect(received == received.sorted())
    }

    @Test func bytesHeldBackByTheIntervalAreToldWhenItEndsThoughNoMoreArrive() {
        var h = Harness(progressInterval: 1)
        h.download(request())
        let id = h.transfers[t(1)]!
        _ = h.scheduler.dataArrived(id, received: 10, expected: 100, now: 0)
        _ = h.scheduler.dataArrived(id, received: 30, expected: 100, now: 0.2)
        _ = h.scheduler.dataArrived(id, received: 50, expected: 100, now: 0.4)
        func told(_ actions: [SchedulerAction<Int>]) -> [Int64] {
            actions.compactMap { action -> Int64? in
                if case .notify(.progress(let figures, _)) = action { figures.received } else { nil }
            }
        }
        #expect(told(h.take()) == [10])
        #expect(h.wakes == [1])
        // The transfer stalls: the clock reaches the end of the interval.
        h.now = 1
        h.scheduler.tick(now: 1)
        #expect(told(h.take()) == [50])
        // Nothing more arrived, so nothing more is due.
        #expect(h.wakes == [1])
        h.now = 2
        h.scheduler.tick(now: 2)
        #expect(told(h.take()) == [])
    }

    @Test func bytesHeldBackAreToldWhenTheTaskIsSuspendedNotDuringTheSuspension() throws {
        var h = Harness(progressInterval: 1)
        let a = h.download(request())
        let id = h.transfers[t(1)]!
        _ = h.scheduler.dataArrived(id, received: 10, expected: 100, now: 0)
        _ = h.scheduler.dataArrived(id, received: 30, expected: 100, now: 0.2)
        _ = h.take()
        h.now = 0.3
        let now = h.now
        _ = try h.answer { s, w throws(SchedulerError) in try s.suspend(.receipt(a.receipt), waiter: w, now: now) }
        let told = h.log.compactMap { action -> Int64? in
            if case .notify(.progress(let figures, _)) = action { figures.received } else { nil }
        }
        #expect(told == [10, 30])
        h.log = []
        h.now = 1
        h.scheduler.tick(now: 1)
        #expect(!h.take().contains { if case .notify(.progress) = $0 { true } else { false } })
    }

    @Test func aLateWakeDoesNotTellBytesSoonAfterTheLastNotification() {
        var h = Harness(progressInterval: 1)
        h.download(request())
        let id = h.transfers[t(1)]!
        _ = h.scheduler.dataArrived(id, received: 10, expected: 100, now: 0)
        _ = h.scheduler.dataArrived(id, received: 20, expected: 100, now: 0.5)
        // Bytes at 1.1 are told at once; the wake asked for 1 comes late, at 1.2,
        // after more bytes arrived at 1.15.
        _ = h.scheduler.dataArrived(id, received: 30, expected: 100, now: 1.1)
        _ = h.scheduler.dataArrived(id, received: 40, expected: 100, now: 1.15)
        _ = h.take()
        h.wakes = []
        h.now = 1.2
        h.scheduler.tick(now: 1.2)
        #expect(!h.take().contains { if case .notify(.progress) = $0 { true } else { false } })
        // They are told one interval after the last notification.
        #expect(h.wakes == [2.1])
        h.now = 2.1
        h.scheduler.tick(now: 2.1)
        let told = h.take().compactMap { action -> Int64? in
            if case .notify(.progress(let figures, _)) = action { figures.received } else { nil }
        }
        #expect(told == [40])
    }

    @Test func bytesToldBeforeTheirWakeAreNotToldAgain() {
        var h = Harness(progressInterval: 1)
        h.download(request())
        let id = h.transfers[t(1)]!
        _ = h.scheduler.dataArrived(id, received: 10, expected: 100, now: 0)
        _ = h.scheduler.dataArrived(id, received: 30, expected: 100, now: 0.5)
        _ = h.scheduler.dataArrived(id, received: 60, expected: 100, now: 1)
        _ = h.take()
        h.now = 1
        h.scheduler.tick(now: 1)
        #expect(!h.take().contains { if case .notify(.progress) = $0 { true } else { false } })
    }

    @Test func progressAnswersForLiveAndFinishedReceiptsAndForgetsUnknownOnes() throws {
        var h = Harness()
        let a = h.download(request())
        guard case .receipt(let live)? = try h.answer({ s, w throws(SchedulerError) in try s.progress(receipt: a.receipt, waiter: w, now: 0) })
        else { Issue.record("no answer"); return }
        #expect(live.state == .running && live.figures.task == a.task)
        h.complete(t(1), bytes: 42)
        h.deliverAll()
        guard case .receipt(let done)? = try h.answer({ s, w throws(SchedulerError) in try s.progress(receipt: a.receipt, waiter: w, now: 0) })
        else { Issue.record("no answer"); return }
        #expect(done.state == .finished && done.figures.received == 42)
        #expect(throws: SchedulerError.unknownReceipt(r(7))) { try h.scheduler.progress(receipt: r(7), waiter: 0, now: 0) }
    }

    @Test func theHistoryForgetsTheOldestPastItsLimit() {
        var history = FinishedHistory(limit: 3)
        for index in 1...5 {
            history.add(ReceiptProgress(receipt: r(index), figures: .none(task: t(index)), state: .finished))
        }
        #expect(history[r(2)] == nil && history[r(3)] != nil && history[r(5)] != nil)
        #expect(!history.hasTask(t(1)) && history.hasTask(t(4)))
    }

    @Test func tasksAndReceiptsGoInTheOrderTheyWereIssuedPastNine() throws {
        // Given twelve tasks and their receipts, issued at one moment
        var h = Harness(maxActive: 1)
        for index in 1...12 { h.download(request("http://origin/\(index)")) }
        // When every task is listed, then every receipt cancelled
        guard case .tasks(let reports)? = try h.answer({ s, w throws(SchedulerError) in try s.progress(receipt: nil, waiter: w, now: 0) })
        else { Issue.record("no answer"); return }
        #expect(h.cancel(.all) == 12)
        // Then both follow the numbers: t9 before t10, which as strings come the other way
        #expect(reports.map(\.figures.task) == (1...12).map(t))
        #expect(h.finished.map(\.receipt) == (1...12).map(r))
    }

    // MARK: bindings

    @Test func bindAnswersFirstThenTellsTheViewItsState() throws {
        var h = Harness()
        let a = h.download(request())
        _ = try h.answer { s, w throws(SchedulerError) in try s.bind(view: "v", to: .receipt(a.receipt), kind: .animating, waiter: w) }
        let tail = h.log.suffix(2)
        guard case .answer(_, .bound("v", true)) = tail.first, case .notify(.view(.animating("v", true))) = tail.last else {
            Issue.record("\(Array(tail))")
            return
        }
        h.complete(t(1))
        #expect(h.log.contains { if case .notify(.view(.animating("v", false))) = $0 { true } else { false } })
        #expect(throws: SchedulerError.unknownTask(t(9))) {
            try h.scheduler.bind(view: "v", to: .task(t(9)), kind: .progress, waiter: 0)
        }
    }

    // MARK: revalidation, shutdown

    @Test func aRetryFetchesAgainForTheSameReceiptsAndIgnoresTheOldAttempt() {
        var h = Harness()
        let a = h.download(request())
        h.complete(t(1))
        let order = h.delivering.removeFirst()
        h.scheduler.retry(order, now: 1)
        _ = h.take()
        #expect(h.transfers[t(1)] == TransferID(task: t(1), attempt: 2))
        let oldAttempt = h.scheduler.dataArrived(order.id, received: 1, expected: nil, now: 1)
        #expect(!oldAttempt)
        h.complete(t(1))
        h.deliverAll()
        #expect(h.finishedCount(a.receipt) == 1 && h.outcome(a.receipt)?.ok == true)
    }

    @Test func shutdownEndsUnfinishedReceiptsButDeliversCompletedOnes() {
        var h = Harness(maxActive: 1)
        let done = h.download(request("http://origin/1"))
        let running = h.download(request("http://origin/2"))
        let queued = h.download(request("http://origin/3"))
        h.complete(t(1))
        h.scheduler.shutdown(now: 1)
        _ = h.take()
        #expect(h.outcome(running.receipt)?.error?.code == .shutdown)
        #expect(h.outcome(queued.receipt)?.error?.code == .shutdown)
        #expect(h.finishedCount(done.receipt) == 0)
        h.deliverAll()
        #expect(h.outcome(done.receipt)?.ok == true)
        #expect(h.transfers.isEmpty && h.indicator.isEmpty && h.scheduler.running == 0)
    }

    // MARK: retries

    @Test func aTransientFailureWaitsWithoutAPlaceThenTriesTheSameTaskAgain() {
        // Given a running download
        var h = Harness(maxActive: 1)
        let a = h.download(request())
        h.download(request("http://origin/b"))
        // When its connection is reset at 10 s
        h.now = 10
        h.fail(t(1), .network)
        // Then it waits 1 s, told, without a transfer, a place or the indicator's count
        #expect(h.retrying.map(\.attempt) == [2] && h.retrying.map(\.delay) == [1])
        #expect(h.retrying.first?.receipts == [a.receipt] && h.retrying.first?.error.code == .network)
        #expect(h.wakes == [11])
        #expect(h.finished.isEmpty && h.delivering.isEmpty)
        #expect(h.state(of: a.receipt) == .retrying)
        #expect(!h.indicator.contains(t(1)) && h.transfers[t(1)] == nil)
        #expect(h.started == [t(1), t(2)], "its place went to the queued task")
        // When the clock passes the moment a little early, then on time
        h.tick(at: 10.5)
        guard case .retrying(let until, let failed)? = h.scheduler.tasks[t(1)]?.state else {
            Issue.record("t1 does not wait to retry")
            return
        }
        #expect(until == 11 && failed.failure.code == .network)
        h.complete(t(2))
        h.tick(at: 11)
        // Then attempt 2 of the same task starts, and late events of attempt 1 are ignored
        #expect(h.transfers[t(1)] == TransferID(task: t(1), attempt: 2))
        let lateEvent = h.scheduler.dataArrived(TransferID(task: t(1), attempt: 1), received: 5, expected: nil, now: 11)
        #expect(!lateEvent)
        h.complete(t(1))
        h.deliverAll()
        #expect(h.outcome(a.receipt)?.ok == true && h.outcome(a.receipt)?.attempts == 2)
    }

    @Test(arguments: [OutcomeErrorCode.timeout, .connectFailed, .network])
    func transientTransferFailuresAreRetried(_ code: OutcomeErrorCode) {
        var h = Harness()
        h.download(request())
        h.fail(t(1), code)
        #expect(h.retrying.map(\.error.code) == [code])
        #expect(h.finished.isEmpty)
    }

    @Test(arguments: [OutcomeErrorCode.dnsFailed, .tlsFailed, .tooManyRedirects, .insecureRedirect, .schemeNotAllowed, .tooLarge, .io])
    func otherTransferFailuresEndAtOnce(_ code: OutcomeErrorCode) {
        var h = Harness()
        let a = h.download(request())
        h.fail(t(1), code)
        h.deliverAll()
        #expect(h.retrying.isEmpty)
        #expect(h.outcome(a.receipt)?.error?.code == code && h.outcome(a.receipt)?.attempts == 1)
    }

    @Test(arguments: [408, 429, 500, 502, 503, 504, 522, 524])
    func transientStatusesAreRetried(_ status: Int) {
        var h = Harness()
        let a = h.download(request())
        let goesOn = h.respond(t(1), status: status)
        #expect(!goesOn, "the failed response's body is not read")
        #expect(h.stopped == [TransferID(task: t(1), attempt: 1)])
        #expect(h.retrying.first?.httpStatus == status && h.retrying.first?.error.code == .httpStatus)
        #expect(h.finishedCount(a.receipt) == 0)
    }

    @Test(arguments: [400, 401, 403, 404, 410, 501, 505, 599, 302])
    func otherStatusesEndAtOnce(_ status: Int) {
        var h = Harness()
        let a = h.download(request())
        h.respond(t(1), status: status, retryAfter: 1)
        #expect(h.retrying.isEmpty)
        #expect(h.outcome(a.receipt)?.error?.code == .httpStatus && h.outcome(a.receipt)?.status == status)
        #expect(h.outcome(a.receipt)?.retryAfter == nil)
    }

    @Test func theWaitDoublesIsScaledByTheRandomFactorAndCapped() {
        var h = Harness(retry: RetryPolicy(delay: 1, maxDelay: 5, maxTime: 600), random: 0.75)
        h.download(request(retries: 5))
        for attempt in 1...5 {
            h.fail(t(1), .timeout)
            h.tick(at: h.wakes.last!)
            #expect(h.transfers[t(1)]?.attempt == attempt + 1)
        }
        #expect(h.retrying.map(\.delay) == [0.75, 1.5, 3, 5, 5])
    }

    @Test func retryAfterMakesTheWaitAtLeastThatLong() {
        var h = Harness()
        h.download(request())
        h.respond(t(1), status: 503, retryAfter: 7)
        #expect(h.retrying.map(\.delay) == [7] && h.wakes == [7])
    }

    @Test func aRetryAfterBeyondTheLongestWaitEndsTheReceiptAtOnceWithIt() {
        var h = Harness()
        let a = h.download(request())
        h.respond(t(1), status: 429, retryAfter: 31)
        #expect(h.retrying.isEmpty && h.scheduler.running == 0)
        #expect(h.outcome(a.receipt)?.error?.code == .httpStatus && h.outcome(a.receipt)?.retryAfter == 31)
    }

    @Test func noAttemptWaitsPastTheMaxTimeFromTheReceiptsFirst() {
        // Given a receipt whose first attempt began at 0, failing at 50
        var h = Harness(retry: RetryPolicy(delay: 20, maxDelay: 30, maxTime: 60))
        let asked = h.download(request("http://origin/asked"))
        let backedOff = h.download(request("http://origin/backed-off"))
        h.now = 50
        // When one origin asks for 11 s and the other's backoff is 20 s
        h.respond(t(1), status: 503, retryAfter: 11)
        h.respond(t(2), status: 503)
        // Then neither waits; only the one whose Retry-After passed the limit names it
        #expect(h.retrying.isEmpty)
        #expect(h.outcome(asked.receipt)?.retryAfter == 11)
        #expect(h.outcome(backedOff.receipt)?.error?.code == .httpStatus && h.outcome(backedOff.receipt)?.retryAfter == nil)
    }

    @Test func noAttemptStartsAfterTheMaxTimeWhileWaitingForAPlace() {
        // Given a task waiting to retry while another holds the only place
        var h = Harness(maxActive: 1, retry: RetryPolicy(delay: 1, maxDelay: 30, maxTime: 60))
        let a = h.download(request())
        h.fail(t(1), .connectFailed)
        let b = h.download(request("http://origin/b"))
        h.tick(at: 1)
        #expect(h.started == [t(1), t(2)] && h.state(of: a.receipt) == .queued)
        // When the place comes free after the receipt's max time
        h.now = 61
        h.complete(t(2))
        // Then it ends with its last failure instead of starting
        #expect(h.started == [t(1), t(2)])
        #expect(h.outcome(a.receipt)?.error?.code == .connectFailed && h.outcome(a.receipt)?.attempts == 1)
        h.deliverAll()
        #expect(h.outcome(b.receipt)?.ok == true)
        #expect(h.scheduler.tasks.isEmpty && h.scheduler.running == 0)
    }

    @Test func aLinkCutMoreOftenThanTheRetriesFinishesWhileEachAttemptMovesTheBodyOn() {
        // Given a download with 3 retries whose attempts are each cut short
        // after continuing the body from further than the one before
        var h = Harness()
        let a = h.download(request(retries: 3))
        h.fail(t(1), .network, response: response())
        for attempt in 2...7 {
            h.tick(at: h.wakes.last!)
            h.fail(t(1), .network, response: response(206), resumedFrom: Int64(attempt - 1) * 100)
        }
        // When attempt 8 completes
        h.tick(at: h.wakes.last!)
        h.complete(t(1))
        h.deliverAll()
        // Then every attempt was retried after the first wait, and all 8 are counted
        #expect(h.retrying.map(\.attempt) == Array(2...8))
        #expect(h.retrying.map(\.delay) == Array(repeating: 1, count: 7))
        #expect(h.outcome(a.receipt)?.ok == true && h.outcome(a.receipt)?.attempts == 8)
    }

    @Test func attemptsThatContinueFromNoFurtherSpendTheBudget() {
        // Given a download with 3 retries whose attempt 2 continued 100 bytes
        var h = Harness()
        let a = h.download(request(retries: 3))
        h.fail(t(1), .network, response: response())
        h.tick(at: h.wakes.last!)
        h.fail(t(1), .network, response: response(206), resumedFrom: 100)
        // When the attempts after it continue from the same byte, or start anew
        for resumedFrom in [100, nil, 100] as [Int64?] {
            h.tick(at: h.wakes.last!)
            h.fail(t(1), .network, response: response(resumedFrom == nil ? 200 : 206), resumedFrom: resumedFrom)
        }
        h.deliverAll()
        // Then the budget counts from attempt 2, doubling, and ends after 3 more
        #expect(h.retrying.map(\.delay) == [1, 1, 2, 4])
        #expect(h.outcome(a.receipt)?.error?.code == .network && h.outcome(a.receipt)?.attempts == 5)
    }

    @Test func aBodyThatStartsAnewEachTimeFailsAfterItsRetries() {
        var h = Harness()
        let a = h.download(request(retries: 3))
        for _ in 1...4 {
            if let wake = h.wakes.last { h.tick(at: wake) }
            h.fail(t(1), .network, response: response())
        }
        h.deliverAll()
        #expect(h.retrying.map(\.delay) == [1, 2, 4])
        #expect(h.outcome(a.receipt)?.error?.code == .network && h.outcome(a.receipt)?.attempts == 4)
    }

    @Test func theMaxTimeCountsFromTheLastAttemptThatContinuedFurther() {
        // Given a download whose attempt 1 ran from 0 to 50, and attempt 2,
        // which continued its body, from 51 to 100
        var h = Harness(retry: RetryPolicy(delay: 1, maxDelay: 30, maxTime: 60))
        let a = h.download(request(retries: 3))
        h.now = 50
        h.fail(t(1), .network, response: response())
        h.tick(at: 51)
        h.now = 100
        h.fail(t(1), .network, response: response(206), resumedFrom: 100)
        // Then it waits: 100 s after attempt 1 began, but 49 s after attempt 2, which continued the body
        #expect(h.retrying.map(\.attempt) == [2, 3] && h.finished.isEmpty)
        // When attempt 3 continues from no further and fails 61 s after attempt 2 began
        h.tick(at: 101)
        h.now = 112
        h.fail(t(1), .network, response: response(206), resumedFrom: 100)
        h.deliverAll()
        // Then no attempt starts after the max time
        #expect(h.retrying.count == 2)
        #expect(h.outcome(a.receipt)?.error?.code == .network && h.outcome(a.receipt)?.attempts == 3)
    }

    @Test func retriesZeroTurnsRetryingOff() {
        var h = Harness()
        let a = h.download(request(retries: 0))
        h.respond(t(1), status: 503)
        #expect(h.retrying.isEmpty && h.outcome(a.receipt)?.error?.code == .httpStatus)
    }

    @Test func budgetsArePerReceiptOnACoalescedTask() {
        // Given receipts of one task with 0, 1 and 2 retries
        var h = Harness()
        let none = h.download(request(retries: 0))
        let one = h.download(request(retries: 1))
        let two = h.download(request(retries: 2))
        // When attempt 1 fails after its response
        h.fail(t(1), .network, response: response())
        // Then the receipt without retries ends with that failure and the others wait
        #expect(h.retrying.last?.receipts == [one.receipt, two.receipt])
        #expect(h.delivering.map { $0.receipts.map(\.id) } == [[none.receipt]])
        #expect(h.delivering.first?.result.failure?.code == .network)
        h.deliverAll()
        #expect(h.outcome(none.receipt)?.error?.code == .network && h.outcome(none.receipt)?.attempts == 1)
        // When attempts 2 and 3 fail
        h.tick(at: h.wakes.last!)
        h.respond(t(1), status: 500)
        #expect(h.outcome(one.receipt)?.error?.code == .httpStatus && h.outcome(one.receipt)?.attempts == 2)
        #expect(h.retrying.last?.receipts == [two.receipt])
        h.tick(at: h.wakes.last!)
        h.respond(t(1), status: 500)
        // Then each ends once its own budget is spent
        #expect(h.outcome(two.receipt)?.attempts == 3)
        #expect(h.retrying.map(\.attempt) == [2, 3])
        #expect(h.scheduler.tasks.isEmpty && h.scheduler.running == 0)
    }

    @Test func aReceiptThatJoinsCountsTheAttemptsItSaw() {
        var h = Harness()
        let first = h.download(request())
        h.fail(t(1), .timeout)
        let waiting = h.download(request())
        h.tick(at: 1)
        h.fail(t(1), .timeout)
        h.tick(at: h.wakes.last!)
        let running = h.download(request())
        h.complete(t(1))
        h.deliverAll()
        #expect(waiting.task == t(1) && running.task == t(1))
        #expect([first, waiting, running].map { h.outcome($0.receipt)?.attempts } == [3, 2, 1])
        let hit = h.download(request("http://origin/cached"), cache: .hit(.memory))
        h.scheduler.delivered([(hit.receipt, Outcome(url: "http://origin/cached"))], now: h.now)
        _ = h.take()
        #expect(h.outcome(hit.receipt)?.attempts == 0)
    }

    @Test(arguments: [(Prioritization.fifo, [t(2), t(3)]), (.lifo, [t(3), t(2)])])
    func aRetryGoesBeforeTheTasksOfItsPriorityThatNeverStarted(_ prioritization: Prioritization, _ others: [TaskID]) {
        // Given a task that fails while others of its priority and a higher one wait
        var h = Harness(maxActive: 1, prioritization: prioritization)
        h.download(request("http://origin/1"))
        h.download(request("http://origin/2"))
        h.download(request("http://origin/3"))
        h.download(request("http://origin/high", priority: .high))
        h.fail(t(1), .network)
        #expect(h.started == [t(1), t(4)])
        // When its wait ends while the higher one runs
        h.tick(at: 1)
        for task in [t(4), t(1)] + others { h.complete(task) }
        // Then it starts next, before the tasks of its priority that never started
        #expect(h.started == [t(1), t(4), t(1)] + others)
    }

    @Test func boundViewsKeepAnimatingWhileATaskWaitsAndStopWhenItIsCancelled() throws {
        var h = Harness()
        let a = h.download(request())
        _ = try h.answer { s, w throws(SchedulerError) in try s.bind(view: "spinner", to: .task(a.task), kind: .animating, waiter: w) }
        h.fail(t(1), .network)
        _ = try h.answer { s, w throws(SchedulerError) in try s.bind(view: "late", to: .task(a.task), kind: .animating, waiter: w) }
        let animating = { (h: Harness) in
            h.log.compactMap { action -> ViewNotice? in if case .notify(.view(let notice)) = action { notice } else { nil } }
        }
        #expect(animating(h) == [.animating(view: "spinner", animating: true), .animating(view: "late", animating: true)])
        #expect(h.cancel(.receipt(a.receipt)) == 1)
        #expect(h.outcome(a.receipt)?.error?.code == .cancelled)
        #expect(animating(h).suffix(2) == [.animating(view: "spinner", animating: false), .animating(view: "late", animating: false)])
        #expect(h.scheduler.tasks.isEmpty && h.indicator.isEmpty && h.scheduler.running == 0)
        h.tick(at: 5)
        #expect(h.started == [t(1)], "a cancelled wait starts nothing")
    }

    @Test func shutdownEndsAWaitingReceiptAtOnce() {
        var h = Harness()
        let a = h.download(request())
        h.respond(t(1), status: 503, retryAfter: 20)
        h.scheduler.shutdown(now: 1)
        _ = h.take()
        #expect(h.outcome(a.receipt)?.error?.code == .shutdown && h.outcome(a.receipt)?.attempts == 1)
        h.tick(at: 20)
        #expect(h.started == [t(1)])
    }

    @Test func aSuspendedWaitResumesAsARetry() throws {
        var h = Harness(maxActive: 1)
        let a = h.download(request())
        h.download(request("http://origin/b"))
        h.fail(t(1), .network)
        let suspended = try h.answer { s, w throws(SchedulerError) in try s.suspend(.task(a.task), waiter: w, now: 0) }
        guard case .task(_, let state)? = suspended else { Issue.record("no answer"); return }
        #expect(state == .suspended)
        h.tick(at: 1)
        #expect(h.scheduler.tasks[t(1)]?.state.replyState == .suspended)
        _ = try h.answer { s, w throws(SchedulerError) in try s.resume(.task(a.task), waiter: w, now: 2) }
        h.complete(t(2))
        #expect(h.transfers[t(1)] == TransferID(task: t(1), attempt: 2))
    }

    @Test func aDeliveredBodyDrawsARandomFactorOnlyWhenItFailedItsIntegrity() {
        // Given a scheduler that counts the random factors it draws (each
        // one a system call)
        let draws = Locked(0)
        var h = Harness()
        h.scheduler = DownloadScheduler(random: { draws.withLock { $0 += 1 }; return 1 })
        // When a download's body arrives whole and matches
        let a = h.download(request(integrity: sha256))
        h.complete(a.task)
        h.deliverAll()
        // Then it finishes without one
        #expect(h.outcome(a.receipt)?.ok == true)
        #expect(draws.withLock { $0 } == 0)
        // When another's body fails its integrity, it draws one for its wait
        let b = h.download(request("http://origin/b", integrity: sha256))
        h.complete(b.task)
        h.deliverAll(mismatching: [b.receipt])
        #expect(h.state(of: b.receipt) == .retrying)
        #expect(draws.withLock { $0 } == 1)
    }

    @Test func aBodyThatFailsItsIntegrityOnceIsFetchedAgainThenFailsAtOnce() throws {
        // Given a download with integrity, and a view bound to its task
        var h = Harness()
        let a = h.download(request(integrity: sha256))
        _ = try h.answer { s, w throws(SchedulerError) in try s.bind(view: "spinner", to: .task(a.task), kind: .animating, waiter: w) }
        // When its body from the network does not match
        h.complete(t(1))
        h.deliverAll(mismatching: [a.receipt])
        // Then it does not finish: it waits for attempt 2, told why, the view still animating
        #expect(h.finished.isEmpty)
        #expect(h.retrying.map(\.attempt) == [2] && h.retrying.map(\.error.code) == [.integrityMismatch])
        #expect(h.retrying.first?.receipts == [a.receipt] && h.retrying.first?.delay == 1)
        #expect(h.state(of: a.receipt) == .retrying && h.wakes == [1])
        #expect(h.views.last == .animating(view: "spinner", animating: true))
        // When attempt 2's body does not match either
        h.tick(at: 1)
        #expect(h.transfers[t(1)] == TransferID(task: t(1), attempt: 2))
        h.complete(t(1))
        h.deliverAll(mismatching: [a.receipt])
        // Then it fails at once, after 2 attempts, and the view stops
        #expect(h.retrying.count == 1)
        #expect(h.outcome(a.receipt)?.error?.code == .integrityMismatch && h.outcome(a.receipt)?.attempts == 2)
        #expect(h.views.last == .animating(view: "spinner", animating: false))
        #expect(h.scheduler.tasks.isEmpty && h.indicator.isEmpty && h.scheduler.running == 0)
    }

    @Test func aSecondMismatchFailsAtOnceEvenAfterOtherRetries() {
        var h = Harness()
        let a = h.download(request(integrity: sha256))
        h.complete(t(1))
        h.deliverAll(mismatching: [a.receipt])
        h.tick(at: 1)
        h.fail(t(1), .network)
        h.tick(at: h.wakes.last!)
        h.complete(t(1))
        h.deliverAll(mismatching: [a.receipt])
        #expect(h.retrying.map(\.error.code) == [.integrityMismatch, .network])
        #expect(h.outcome(a.receipt)?.error?.code == .integrityMismatch && h.outcome(a.receipt)?.attempts == 3)
    }

    @Test func aContinuedBodyThatFailsItsIntegrityCountsFromTheAttemptThatContinuedIt() {
        // Given a download with 1 retry whose attempt 1 was cut short
        var h = Harness()
        let a = h.download(request(retries: 1, integrity: sha256))
        h.fail(t(1), .network, response: response())
        // When attempt 2 continues its body and completes it, and the body does not match
        h.tick(at: h.wakes.last!)
        h.complete(t(1), bytes: 300, resumedFrom: 100)
        h.deliverAll(mismatching: [a.receipt])
        // Then it is fetched once more, after the first wait
        #expect(h.retrying.map(\.error.code) == [.network, .integrityMismatch])
        #expect(h.retrying.map(\.delay) == [1, 1] && h.finishedCount(a.receipt) == 0)
        h.tick(at: h.wakes.last!)
        h.complete(t(1), bytes: 300)
        h.deliverAll()
        #expect(h.outcome(a.receipt)?.ok == true && h.outcome(a.receipt)?.attempts == 3)
    }

    @Test func onlyTheReceiptsABodyFailedWaitForTheNextAttempt() {
        // Given three receipts of one task: one whose digest the body
        // matches, one it does not, and one without integrity
        var h = Harness()
        let good = h.download(request(integrity: sha256))
        let bad = h.download(request(integrity: sha512))
        let plain = h.download(request())
        #expect(Set([good.task, bad.task, plain.task]) == [t(1)])
        // When the body is delivered
        h.complete(t(1))
        h.deliverAll(mismatching: [bad.receipt])
        // Then those it suits finish, and only the other waits, on the same task
        #expect(h.outcome(good.receipt)?.ok == true && h.outcome(plain.receipt)?.ok == true)
        #expect(h.finishedCount(bad.receipt) == 0 && h.retrying.first?.receipts == [bad.receipt])
        #expect(h.retrying.first?.task == t(1))
        // And a new receipt for the same request joins the waiting task
        let joining = h.download(request())
        #expect(joining.task == t(1) && joining.admission == .joined)
        h.tick(at: 1)
        h.complete(t(1))
        h.deliverAll()
        #expect(h.outcome(bad.receipt)?.ok == true && h.outcome(bad.receipt)?.attempts == 2)
        #expect(h.outcome(joining.receipt)?.ok == true && h.outcome(joining.receipt)?.attempts == 1)
    }

    @Test func aMismatchIsNotRetriedWithoutRetriesOrForAStoredBody() {
        var h = Harness()
        let none = h.download(request(retries: 0, integrity: sha256))
        h.complete(t(1))
        h.deliverAll(mismatching: [none.receipt])
        #expect(h.outcome(none.receipt)?.error?.code == .integrityMismatch && h.retrying.isEmpty)
        let revalidated = h.download(request("http://origin/b", integrity: sha256))
        h.complete(t(2))
        h.deliverAll(mismatching: [revalidated.receipt], source: .revalidated)
        #expect(h.outcome(revalidated.receipt)?.error?.code == .integrityMismatch && h.retrying.isEmpty)
    }

    @Test func aMismatchDeliveredAfterShutdownEndsWithIt() {
        var h = Harness()
        let a = h.download(request(integrity: sha256))
        h.complete(t(1))
        h.scheduler.shutdown(now: 1)
        _ = h.take()
        h.deliverAll(mismatching: [a.receipt])
        #expect(h.outcome(a.receipt)?.error?.code == .integrityMismatch && h.retrying.isEmpty)
        #expect(h.scheduler.tasks.isEmpty && h.wakes.isEmpty)
    }

    @Test func boundViewsHearThatATaskWithIntegrityFinishedOnceItsBodyIsChecked() throws {
        var h = Harness()
        let a = h.download(request(integrity: sha256))
        _ = try h.answer { s, w throws(SchedulerError) in try s.bind(view: "bar", to: .task(a.task), kind: .progress, waiter: w) }
        h.complete(t(1))
        #expect(h.views.last == .progress(view: "bar", received: 10, expected: 10))
        h.deliverAll()
        #expect(h.views.last == .progress(view: "bar", received: 10, expected: 10))
        #expect(h.outcome(a.receipt)?.ok == true)
        #expect(h.scheduler.bindings.views(boundTo: t(1)).isEmpty)
    }

    // MARK: mirrors

    @Test func attemptsGoToTheURLThenEachMirrorOfEveryReceiptInTurn() {
        var h = Harness(retry: RetryPolicy(delay: 0, maxDelay: 0, maxTime: 60))
        let a = h.download(request(retries: 4, mirrors: ["http://m1/a", "http://origin/a"]))
        h.download(request(retries: 4, mirrors: ["http://m2/a", "http://m1/a"]))
        for _ in 1...4 {
            h.fail(t(1), .connectFailed)
            h.tick(at: h.now)
        }
        #expect(h.startedURLs == ["http://origin/a", "http://m1/a", "http://m2/a", "http://origin/a", "http://m1/a"])
        h.fail(t(1), .connectFailed)
        h.deliverAll()
        #expect(h.outcome(a.receipt)?.url == "http://origin/a")
        #expect(h.outcome(a.receipt)?.finalURL == "http://m1/a", "a failure without a response names the URL it asked last")
    }

    /// Random interleavings of every event: each receipt ends with exactly
    /// one `download/finished`, never more than `maxActive` transfers run,
    /// and when everything has ended nothing is left running or counted.
    @Test(arguments: 1...20)
    func everyReceiptEndsExactlyOnceWhateverHappens(seed: UInt64) throws {
        var random = SplitMix(seed: seed)
        var h = Harness(maxActive: 3, retry: RetryPolicy(delay: 0.1, maxDelay: 1, maxTime: 5))
        var issued: Set<ReceiptID> = []
        for step in 0..<400 {
            h.now = Double(step) / 10
            switch random.next() % 10 {
            case 0, 1, 2:
                let url = "http://origin/\(random.next() % 6)"
                let slot = random.next() % 3 == 0 ? "s\(random.next() % 2)" : nil
                let made = h.download(
                    request(url, slot: slot, maxBytes: random.next() % 4 == 0 ? 50 : nil, wait: random.next() % 5 == 0),
                    cache: random.next() % 7 == 0 ? .hit(.disk) : .miss)
                if case .served(let receipt) = made.admission {
                    h.scheduler.delivered([(receipt, Outcome(url: url))], now: h.now)
                    _ = h.take()
                }
                if made.receipt != r(0) { issued.insert(made.receipt) }
            case 3:
                if let receipt = issued.randomElement(using: &random) { _ = h.cancel(.receipt(receipt)) }
            case 4:
                let now = h.now
                if let task = h.transfers.keys.sorted().randomElement(using: &random) {
                    _ = try? h.answer { s, w throws(SchedulerError) in
                        try s.suspend(.task(task), waiter: w, now: now)
                    }
                }
            case 5:
                let now = h.now
                if let task = h.scheduler.tasks.keys.sorted().randomElement(using: &random) {
                    _ = try? h.answer { s, w throws(SchedulerError) in try s.resume(.task(task), waiter: w, now: now) }
                }
            case 6:
                if let id = h.transfers.values.sorted(by: { $0.task < $1.task }).randomElement(using: &random) {
                    _ = h.scheduler.dataArrived(id, received: Int64(random.next() % 100), expected: nil, now: h.now)
                    _ = h.take()
                }
            case 7:
                if let task = h.transfers.keys.sorted().randomElement(using: &random) { h.complete(task) }
            case 8:
                if let task = h.transfers.keys.sorted().randomElement(using: &random) {
                    if random.next() % 2 == 0 {
                        h.respond(task, status: [200, 404, 503][Int(random.next() % 3)], retryAfter: Int64(random.next() % 3))
                    } else {
                        h.fail(task, [.network, .timeout, .dnsFailed][Int(random.next() % 3)])
                    }
                }
                h.tick(at: h.now)
            default:
                h.deliverAll()
            }
            #expect(h.scheduler.running <= 3)
            #expect(h.transfers.count <= 3)
        }
        h.scheduler.shutdown(now: 100)
        _ = h.take()
        h.deliverAll()
        for receipt in h.finished.map(\.receipt) { issued.insert(receipt) }
        for receipt in issued { #expect(h.finishedCount(receipt) == 1, "\(receipt)") }
        #expect(h.scheduler.receipts.isEmpty && h.scheduler.tasks.isEmpty)
        #expect(h.transfers.isEmpty && h.indicator.isEmpty && h.scheduler.running == 0)
        let waited = h.log.compactMap { action -> DownloadReply? in
            if case .answer(_, .download(let reply)) = action, reply.outcome != nil { reply } else { nil }
        }
        for reply in waited { #expect(reply.state == .finished) }
    }

    @Test func roomForABurstOfRequestsIsMadeOnce() {
        var h = Harness(maxActive: 8)
        h.scheduler.reserveCapacity(forQueuing: 2_000)
        let (receipts, tasks) = (h.scheduler.receipts.capacity, h.scheduler.tasks.capacity)
        #expect(receipts >= 2_000 && tasks >= 2_000)
        for number in 1...2_000 { h.download(request("http://origin/\(number)")) }
        #expect(h.scheduler.receipts.count == 2_000)
        #expect(h.scheduler.receipts.capacity == receipts, "the map of receipts grew no more")
        #expect(h.scheduler.tasks.capacity == tasks, "the map of tasks grew no more")
        #expect(h.started.count == 8)
    }
}

/// `maxRate`: a task's transfer may take the largest rate of its receipts,
/// and none while any of them has none; the limit follows as receipts join
/// and leave.
@Suite struct TaskRateLimitTests {
    private func rates(_ h: Harness) -> [Int64?] { h.rates.map(\.rate) }

    @Test func aTaskStartsWithTheLargestRateOfItsReceipts() {
        var h = Harness(maxActive: 1)
        h.download(request("http://origin/first"))
        h.download(request(maxRate: 100))
        h.download(request(maxRate: 300))
        h.download(request(maxRate: 200))
        h.complete(t(1))
        #expect(h.rates.last?.id.task == t(2))
        #expect(h.rates.last?.rate == 300)
    }

    @Test func aTaskHasNoLimitWhileAnyReceiptHasNone() {
        var h = Harness()
        h.download(request(maxRate: 100))
        h.download(request())
        #expect(rates(h) == [100, nil], "a receipt without a limit lifts it")
        let limited = h.download(request("http://origin/b", maxRate: 50))
        let open = h.download(request("http://origin/b"))
        #expect(rates(h) == [100, nil, 50, nil])
        #expect(h.cancel(.receipt(open.receipt)) == 1)
        #expect(rates(h) == [100, nil, 50, nil, 50], "the limit comes back when the receipt without one leaves")
        _ = limited
    }

    @Test func theLimitFollowsReceiptsThatJoinAndLeave() {
        var h = Harness()
        let slow = h.download(request(maxRate: 100))
        let fast = h.download(request(maxRate: 400))
        let same = h.download(request(maxRate: 400))
        #expect(rates(h) == [100, 400], "an unchanged limit is not told again")
        #expect(h.cancel(.receipt(fast.receipt)) == 1)
        #expect(rates(h) == [100, 400])
        #expect(h.cancel(.receipt(same.receipt)) == 1)
        #expect(rates(h) == [100, 400, 100])
        #expect(h.rates.allSatisfy { $0.id == h.transfers[t(1)] })
        _ = slow
    }

    @Test func aQueuedTaskIsToldNothingUntilItStarts() {
        var h = Harness(maxActive: 1)
        h.download(request("http://origin/first"))
        let a = h.download(request(maxRate: 100))
        h.download(request(maxRate: 200))
        #expect(h.cancel(.receipt(a.receipt)) == 1)
        #expect(rates(h) == [nil])
        h.complete(t(1))
        #expect(rates(h) == [nil, 200])
    }

    @Test func aRetriedTaskStartsWithTheLimitOfTheReceiptsStillWaiting() {
        var h = Harness()
        h.download(request(retries: 0))
        h.download(request(retries: 3, maxRate: 100))
        #expect(rates(h) == [nil])
        h.fail(t(1), .network)
        h.tick(at: 10)
        #expect(h.started == [t(1), t(1)])
        #expect(rates(h) == [nil, 100], "the receipt without a limit ended with the failed attempt")
    }
}
