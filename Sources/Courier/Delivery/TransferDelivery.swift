import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Locking
import Logging

/// A cache hit the scheduler has admitted: its receipt is answered from
/// the tier that holds it.
struct HitOrder: Sendable {
    var hit: ResponseCache.Hit
    var receipt: ReceiptID
    var request: DownloadRequest
}

/// What delivering one order came to, for the scheduler.
enum DeliveryResult: Sendable {
    /// The outcomes of a finished transfer's receipts, and the order as
    /// `DeliveryOrder.delivered` leaves it.
    case delivered([(receipt: ReceiptID, outcome: Outcome)], of: DeliveryOrder)
    /// The origin answered a revalidation with a 304 that no stored body
    /// fits (or one some receipt's integrity refuses): fetch again.
    case retry(DeliveryOrder)
    /// A cache hit's outcome.
    case served(receipt: ReceiptID, Outcome)
}

/// Turns finished transfers and cache hits into outcomes — cache writes,
/// file placement, text decoding — on the delivery queue, so neither the
/// engine's thread nor a request's waits on that I/O. The engine hands it
/// what became due in one turn as one batch, and hears the batch's results
/// as one command; a hit that needs none of that it serves at once
/// (`serveAtOnce`).
final class TransferDelivery: Sendable {
    let cache: ResponseCache
    private let leftovers: Leftovers
    /// Set at start-up: every destination lies inside it.
    private let downloadRoot: String?
    /// Blocks while the client leaves too much output unread.
    private let awaitOutputRoom: @Sendable () -> Void
    private let logger: Logger
    /// Where batches run, one after another.
    private let queue = DispatchQueue(label: "courier.deliveries")
    /// Makes the files of bodies held in memory ahead of their delivery,
    /// beside it.
    private let files = DispatchQueue(label: "courier.files")

    /// `awaitOutputRoom` is called before a body is made into text or
    /// base64, so outcomes that carry one (each up to `maxMemoryBody`)
    /// never pile up for a client that does not read.
    init(
        cache: ResponseCache, leftovers: Leftovers, downloadRoot: String?, awaitOutputRoom: @escaping @Sendable () -> Void,
        logger: Logger
    ) {
        self.cache = cache
        self.leftovers = leftovers
        self.downloadRoot = downloadRoot
        self.awaitOutputRoom = awaitOutputRoom
        self.logger = logger
    }

    /// Starts making, beside its destination, the file of a body that
    /// `order` holds in memory alone, on a thread of its own, unless the
    /// destination's file system is held in memory: there making it costs
    /// about what the hand-over does (a wake-up of that thread, and of the
    /// delivery queue's when it waits for the file), and delivery makes it
    /// when it places the body (`PreparedFile.take(makingIn:mode:)`).
    /// Returns at once.
    func prepareFile(for order: DeliveryOrder) {
        if order.result.bodyIsInMemoryOnly, let target = order.result.body, let prepared = target.prepared,
            !target.directory.isInMemory
        {
            prepared.make(in: target.directory, mode: target.mode, on: files)
        }
    }

    /// Delivers, on the delivery queue, the hits and the finished transfers
    /// that became due in one turn of the engine, then hands their results
    /// to `done` in one piece. Receipts asking for text or base64 get at
    /// most `memoryBodyLimit` bytes of it. Batches handed over while the
    /// queue is busy are delivered together, their stores in one write
    /// transaction, when it is free; each batch's `done` still hears its
    /// own results, in the order the batches came.
    func deliver(
        _ orders: [DeliveryOrder], hits: [HitOrder], memoryBodyLimit: Int64,
        then done: @escaping @Sendable ([DeliveryResult]) -> Void
    ) {
        let batch = Batch(orders: orders, hits: hits, memoryBodyLimit: memoryBodyLimit, done: done)
        let idle = waiting.withLock { waiting in
            waiting.batches.append(batch)
            defer { waiting.draining = true }
            return !waiting.draining
        }
        if idle { queue.async { [self] in drain() } }
    }

    /// Removes a body file nobody will read, on the delivery queue.
    func discard(path: String) {
        queue.async { _ = unlink(path) }
    }

    /// Waits for the batches handed over so far, and makes the stores they
    /// left behind their outcomes.
    func waitUntilIdle() {
        queue.sync {}
        cache.settle()
    }

    /// What one turn of the engine handed over.
    private struct Batch: Sendable {
        var orders: [DeliveryOrder]
        var hits: [HitOrder]
        var memoryBodyLimit: Int64
        var done: @Sendable ([DeliveryResult]) -> Void
    }

    /// Batches handed over and not yet taken, and whether the delivery
    /// queue has a drain under way that will take them.
    private struct Waiting: Sendable {
        var batches: [Batch] = []
        var draining = false
    }

    private let waiting = Locked(Waiting())

    /// Delivers the waiting batches, and those that come meanwhile, until
    /// none is left: at most `ordersPerTransaction` finished transfers at a
    /// time (or one batch, when it has more), so outcomes keep flowing
    /// while the queue catches up.
    private func drain() {
        while true {
            let batches = waiting.withLock { waiting in
                var (count, orders) = (0, 0)
                for batch in waiting.batches {
                    guard count == 0 || orders + batch.orders.count <= Self.ordersPerTransaction else { break }
                    (count, orders) = (count + 1, orders + batch.orders.count)
                }
                if count == 0 { waiting.draining = false }
                defer { waiting.batches.removeFirst(count) }
                return Array(waiting.batches[..<count])
            }
            guard !batches.isEmpty else { return }
            deliver(batches)
        }
    }

    /// The most finished transfers whose stores a drain puts in one write
    /// transaction when the queue has fallen behind.
    static let ordersPerTransaction = 64

    /// Delivers `batches` and hands each its results. The stores of the
    /// finished transfers whose receipts take no body as text or base64
    /// commit in one write transaction, before any of their outcomes goes
    /// out; the others wait for room in the client's output each, outside
    /// it, so a client that does not read never holds the transaction open.
    /// The stores of bodies held in memory alone are queued to be made
    /// behind the outcomes instead (`ResponseCache.storeBehind`), before
    /// those go out. A batch's outcomes go as soon as its own are made, so
    /// the text and base64 they hold never wait for another batch's.
    private func deliver(_ batches: [Batch]) {
        // Orders are read where they lie (through their arrays' buffers,
        // which lend each in place) and results moved out of `stored`: a
        // copy of either retains every string and array it holds.
        var stored = batches.map { [DeliveryResult?](repeating: nil, count: $0.orders.count) }
        var behind: [StoresBehind.Store] = []
        cache.batch {
            for index in batches.indices {
                let limit = batches[index].memoryBodyLimit
                batches[index].orders.withUnsafeBufferPointer { orders in
                    for position in orders.indices where !DeliveryOrder.carryBody(orders[position].receipts) {
                        stored[index][position] = deliver(orders[position], memoryBodyLimit: limit, behind: &behind)
                    }
                }
            }
        }
        for index in batches.indices {
            let batch = batches[index]
            var results: [DeliveryResult] = []
            results.reserveCapacity(batch.hits.count + batch.orders.count)
            for hit in batch.hits { results.append(serve(hit, memoryBodyLimit: batch.memoryBodyLimit)) }
            batch.orders.withUnsafeBufferPointer { orders in
                for position in orders.indices {
                    if let result = stored[index][position].take() {
                        results.append(result)
                    } else {
                        results.append(deliver(orders[position], memoryBodyLimit: batch.memoryBodyLimit, behind: &behind))
                    }
                }
            }
            cache.storeBehind(behind)
            behind.removeAll()
            batch.done(results)
        }
    }

    /// Answers a receipt from a cache tier: the body is placed and decoded,
    /// then the receipt finishes.
    private func serve(_ order: HitOrder, memoryBodyLimit: Int64) -> DeliveryResult {
        let hit = order.hit
        if order.request.body != .none { awaitOutputRoom() }
        var outcomes = delivery(for: hit, memoryBodyLimit: memoryBodyLimit).deliver(to: [(order.receipt, order.request)])
        let outcome = outcomes.removeLast()
        return .served(receipt: order.receipt, outcome)
    }

    /// What the engine's thread keeps from one hit it serves at once to
    /// the next, within one of its turns (`serveAtOnce`): emptied as each
    /// turn's commands are done, so a file the client removed before
    /// sending a request is made again for it, and a hit's body is not
    /// held past the turn.
    struct AtOnce {
        /// The `path` files found kept already: those are not looked at
        /// again, so a burst of hits admitted together looks at its file
        /// once.
        var keptFiles: Set<String> = []
        /// The last hit served with its body's `path`, the URL its request
        /// named, and its outcome.
        var last: (hit: ResponseCache.Hit, url: String, outcome: Outcome)?

        mutating func removeAll() {
            keptFiles.removeAll(keepingCapacity: true)
            last = nil
        }
    }

    /// The outcome of a hit whose body is held in memory and whose receipt
    /// needs no file made, placed or read, and no body as text or base64
    /// (which waits for room in the client's output): made at once, on the
    /// caller's thread, whose only system call is a look at the `path` file
    /// an earlier hit made. Nil for any other hit, which `deliver` serves.
    ///
    /// `atOnce` holds what the hits served before this one in the caller's
    /// turn found. The outcome of a hit depends on the stored response
    /// (the same `Hit` while its entry is as it is), the URL the request
    /// names and whether the response suits the request: a request the
    /// last hit's response suits as well, naming the same URL, gets the
    /// last outcome again, its members shared, with the `path` file that
    /// hit found kept.
    func serveAtOnce(_ order: HitOrder, memoryBodyLimit: Int64, atOnce: inout AtOnce) -> Outcome? {
        let hit = order.hit
        guard case .bytes = hit.body, order.request.destination == nil, order.request.body == .none else { return nil }
        if let last = atOnce.last, last.hit === hit, last.url.isExactly(order.request.url),
            order.request.refusal(of: hit.response.head, size: hit.body.length, memoryBodyLimit: memoryBodyLimit) == nil
        {
            return last.outcome
        }
        var served = delivery(for: hit, memoryBodyLimit: memoryBodyLimit)
        if let name = served.sharedFileName, atOnce.keptFiles.contains(name) || served.isKept(name) {
            atOnce.keptFiles.insert(name)
            served.sharedFileIsKept = true
        } else if order.request.refusal(of: hit.response.head, size: hit.body.length, memoryBodyLimit: memoryBodyLimit) == nil {
            return nil
        }
        // Moved out of the list, not copied.
        var outcomes = served.deliver(to: [(order.receipt, order.request)])
        let outcome = outcomes.removeLast()
        if outcome.ok, outcome.path != nil { atOnce.last = (hit, order.request.url, outcome) }
        return outcome
    }

    /// How a hit's outcome is made: from the tier's response, with the
    /// text and file name its entry shares.
    private func delivery(for hit: ResponseCache.Hit, memoryBodyLimit: Int64) -> Delivery {
        // Made whole at once: a copy changed afterwards retains all it holds.
        Delivery(
            response: hit.response.head, size: hit.body.length, body: BodyFile(hit.body),
            source: hit.tier == .memory ? .memory : .disk, downloads: leftovers.downloads, downloadRoot: downloadRoot,
            leftovers: leftovers, memoryBodyLimit: memoryBodyLimit, logger: logger, sharedFileName: hit.pathFileName,
            headerObject: hit.response.headerObject, sharedHeaders: hit.sharedHeaders)
    }

    /// The outcomes of a finished transfer for the receipts it had. The
    /// store of a body held in memory alone, once written to its unnamed
    /// file, goes to `behind`, to be made behind the outcome.
    private func deliver(
        _ order: DeliveryOrder, memoryBodyLimit: Int64, behind: inout [StoresBehind.Store]
    ) -> DeliveryResult {
        if order.carriesBody { awaitOutputRoom() }
        // Read where they lie: a list of them copies each request whole.
        let requests = order.receipts.lazy.map { $0.request }
        let outcomes: [Outcome]
        if let response = order.result.response, let target = order.result.body, order.result.failure == nil {
            let responseDate = Date()
            if response.status == 304, let stale = order.revalidating?.stale {
                target.remove()
                guard
                    let hit = cache.revalidated(
                        stale, notModified: response, requestTime: order.result.requestDate, responseTime: responseDate)
                else {
                    cache.countMiss()
                    return .retry(order)
                }
                // A stored body that some receipt's integrity refuses is not
                // served: the origin is asked for the body.
                let check = IntegrityCheck(requests, taken: BodyDigests()) { hit.body.digests($0) }
                guard check.passed else {
                    cache.countMiss()
                    return .retry(order)
                }
                outcomes = delivery(
                    response: hit.response.head, size: hit.body.length, body: BodyFile(hit.body), source: .revalidated,
                    memoryBodyLimit: memoryBodyLimit
                ).deliver(to: order.receipts)
            } else {
                let keys = ResponseCache.storageKeys(for: requests, redirects: order.result.redirects, finalURL: response.finalURL)
                var bytes = order.result.bytes
                // The closure holds what it reads, not the whole target.
                let (size, directory, name) = (order.result.size, target.directory, target.name)
                let check = IntegrityCheck(requests, taken: order.result.digests) { [bytes] missing in
                    bytes.map { BodyDigests.of($0, missing) }
                        ?? IntegrityCheck.digests(ofFile: name, in: directory, length: size, missing)
                }
                // A body held in memory alone is written to the file made
                // ahead beside its destination first, so the disk tier
                // links it from there rather than keep a copy of its own.
                var body: BodyFile?
                if (200...299).contains(response.status), check.passed {
                    if order.result.bodyIsInMemoryOnly {
                        body = BodyFile(
                            target: target, length: order.result.size, firstBytes: order.result.head, bytes: bytes, written: false)
                    }
                    let unnamed = body?.unnamedFile()
                    if let held = unnamed, ResponseCache.applies(to: order.request), cache.storesBehind {
                        // Without the bytes: a waiting store holds a descriptor, not the body.
                        let file = CacheBodyFile(
                            directory: target.directory, name: target.name, length: order.result.size,
                            checksum: order.result.checksum, digests: check.digests, unnamed: held.descriptor)
                        behind.append(
                            cache.deferredStore(
                                keys: keys, request: order.request, head: response, requestTime: order.result.requestDate,
                                responseTime: responseDate, body: file, holding: held))
                    } else {
                        let file = CacheBodyFile(
                            directory: target.directory, name: target.name, length: order.result.size,
                            checksum: order.result.checksum, bytes: order.result.bytes, digests: check.digests,
                            unnamed: unnamed?.descriptor)
                        let stored = cache.store(
                            keys: keys, request: order.request, head: response, requestTime: order.result.requestDate,
                            responseTime: responseDate, body: file)
                        bytes = bytes ?? stored
                    }
                }
                // Made here, not in an autoclosure, which would hold a copy
                // of the target.
                let placed: BodyFile
                if let body {
                    placed = body
                } else {
                    placed = BodyFile(
                        target: target, length: order.result.size, firstBytes: order.result.head, bytes: bytes,
                        written: !order.result.bodyIsInMemoryOnly)
                }
                outcomes = delivery(
                    response: response, size: order.result.size, body: placed, source: .network,
                    memoryBodyLimit: memoryBodyLimit, resumedFrom: order.result.resumedFrom
                ).deliver(to: order.receipts, failing: check.failures)
            }
        } else {
            outcomes = Delivery.failures(of: order.result, for: Array(requests))
        }
        return .delivered(zip(order.receipts, outcomes).map { (receipt: $0.0.id, outcome: $0.1) }, of: order.delivered)
    }

    private func delivery(
        response: ResponseHead, size: Int64, body: BodyFile, source: OutcomeSource, memoryBodyLimit: Int64,
        resumedFrom: Int64? = nil
    ) -> Delivery {
        Delivery(
            response: response, size: size, body: body, source: source, downloads: leftovers.downloads,
            downloadRoot: downloadRoot, leftovers: leftovers, memoryBodyLimit: memoryBodyLimit, logger: logger,
            resumedFrom: resumedFrom)
    }
}

extension DeliveryOrder {
    /// The order as the scheduler reads it once delivered (its id, request,
    /// size, response and where it resumed from), without what the
    /// delivery alone reads: the body's bytes and file, its first bytes,
    /// the redirects and the receipts' requests. Those are freed on the
    /// delivery queue with the order, not on the engine's thread.
    var delivered: DeliveryOrder {
        var delivered = self
        delivered.receipts = []
        delivered.result.bytes = nil
        delivered.result.head = []
        delivered.result.body = nil
        delivered.result.redirects = []
        return delivered
    }

    /// Some receipt takes the body as text or base64: its outcome waits
    /// for room in the client's output.
    fileprivate var carriesBody: Bool { Self.carryBody(receipts) }

    /// Whether some of `receipts` take the body as text or base64.
    fileprivate static func carryBody(_ receipts: [(id: ReceiptID, request: DownloadRequest)]) -> Bool {
        receipts.contains { $0.request.body != .none }
    }
}
