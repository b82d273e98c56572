import Curl
import Dispatch
import FoundationEssentials
import JSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import Locking

/// The two tiers together, as the downloader sees them: an auto-purging
/// memory LRU in front of the HTTP-aware disk cache, the RFC 9111 decisions
/// of when a stored response may be served, and the hit, miss and
/// revalidation counters.
final class ResponseCache: Sendable {
    enum Tier: String, Sendable {
        case memory
        case disk
    }

    /// A stored response that may be served as it is. A class: a hit goes
    /// from the request's thread through the engine's to the delivery
    /// queue, and a copy of a class is one reference, not one per string
    /// and table the response holds.
    final class Hit: Sendable {
        let key: String
        let response: CachedResponse
        let body: CachedBody
        let tier: Tier
        /// The memory tier's text of the response's headers, for the outcome.
        let sharedHeaders: SharedJSON?
        /// The memory tier's `pathFileName`, found once for its entry.
        let knownFileName: String?

        init(
            key: String, response: CachedResponse, body: CachedBody, tier: Tier, sharedHeaders: SharedJSON? = nil,
            knownFileName: String? = nil
        ) {
            self.key = key
            self.response = response
            self.body = body
            self.tier = tier
            self.sharedHeaders = sharedHeaders
            self.knownFileName = knownFileName
        }

        /// The name of the `path` file the hits of this stored response share.
        var pathFileName: String { knownFileName ?? response.pathFileName(key: key) }
    }

    /// A stored response that must be revalidated before it is served.
    struct Stale: Sendable {
        var key: String
        var response: CachedResponse
        var conditionalHeaders: [(name: String, value: [UInt8])]
    }

    /// A reference wide, as a hit is: a stale response is held in a box,
    /// so that the lookup of every request moves to the engine's thread,
    /// and into what it makes, without copying a whole stored response.
    enum Lookup: Sendable {
        case hit(Hit)
        indirect case stale(Stale)
        case miss
    }

    private struct Counters {
        var hits = 0
        var misses = 0
        var revalidations = 0
    }

    /// The memory tier keeps bodies up to this share of its capacity; larger
    /// ones live on disk only.
    static let memoryEntryShare = 8

    let memory: MemoryCache
    /// Whether the disk tier is still being opened, and then the tier (nil
    /// for good when it could not be opened).
    private let diskTier = Monitor<DiskTier>(.opening)
    /// Whether downloads use the disk tier: not with `--disk-capacity 0`.
    private let storesOnDisk: Bool
    private let counters = Locked(Counters())
    /// Writes the digests reads of stored bodies took into their entries.
    private let recorder = DispatchQueue(label: "courier.cache.digests", qos: .utility)
    /// Stores of finished downloads made behind their outcomes.
    private let behind: StoresBehind
    private let logger: Logger

    /// The disk tier lives in `root`'s `http` directory; without it (a cache
    /// directory courier may not write) only the memory tier works. It is
    /// opened on a thread of its own (`Cache.db` opened, usage counted), so
    /// start-up does not wait for it; its first use does.
    init(configuration: Configuration, root: CacheRoot, logger: Logger) {
        self.logger = logger
        memory = MemoryCache(capacity: configuration.memoryCapacity, afterPurge: configuration.memoryAfterPurge)
        let capacity = Int64(configuration.diskCapacity)
        storesOnDisk = capacity > 0
        let tier = diskTier
        // Weak: the writer's thread must not keep the cache alive.
        behind = StoresBehind { [weak tier] body in
            guard case .open(let disk?)? = tier?.withLock(wake: false, { $0 }) else { return body() }
            disk.batch(body)
        }
        startThread(named: "courier.cache.open") {
            let disk: DiskCache?
            do {
                disk = try DiskCache(root: root, capacity: capacity)
            } catch {
                logger.warning("disk cache unavailable in \(root.path): \(error)")
                disk = nil
            }
            tier.withLock { $0 = .open(disk) }
        }
    }

    deinit { behind.end() }

    private enum DiskTier: Sendable {
        case opening
        case open(DiskCache?)
    }

    /// The disk tier; waits while it is being opened.
    var disk: DiskCache? {
        diskTier.wait(until: { if case .opening = $0 { false } else { true } }) { tier in
            if case .open(let disk) = tier { disk } else { nil }
        }
    }

    /// The disk tier as downloads use it: none with `--disk-capacity 0`.
    /// Such a courier stores nothing there, and it owes nothing to what
    /// other processes on the cache directory stored: it does not read
    /// their entries (every body is over its bound of 0 bytes, so a read
    /// would delete the entry as one it may not believe), and it does not
    /// remove them when a response it fetched may not be stored (RFC 9111
    /// §4.4 asks a cache to invalidate only after an unsafe method, and
    /// courier's requests are GETs); `cache/lookup` does not read them
    /// either. `cache/stats`, `cache/remove` and `cache/clear` still act on
    /// the directory when asked.
    private var downloadTier: DiskCache? { storesOnDisk ? disk : nil }

    var memoryEntryLimit: Int { memory.capacity / Self.memoryEntryShare }

    /// Runs `body`, in which every store, update and removal made on this
    /// thread commits in one write transaction of the disk tier when
    /// `body` ends, before `batch` returns (see `DiskCache.batch`): an
    /// outcome sent after it describes responses that are stored. While
    /// the disk tier is still being opened, each write is its own.
    func batch<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        guard let opened = openedDownloadTier else { return try body() }
        return try opened.batch(body)
    }

    /// Runs `body`, in which the lookups this thread makes in the disk
    /// tier share one read transaction (see `DiskCache.readingTogether`):
    /// for the requests of one message, received before `body` runs. While
    /// the disk tier is still being opened, each lookup is its own.
    func readingTogether<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        guard let opened = openedDownloadTier else { return try body() }
        return try opened.readingTogether(body)
    }

    /// The disk tier downloads use, when it is open already: nil while it
    /// is being opened (nobody waits for it here) and with no disk tier.
    private var openedDownloadTier: DiskCache? {
        guard storesOnDisk else { return nil }
        return diskTier.withLock(wake: false) { tier -> DiskCache? in
            if case .open(let disk?) = tier { disk } else { nil }
        }
    }

    /// Requests that carry credentials (`Authorization`, `Cookie`, a user
    /// or password in the URL), their own validators, or a range are passed
    /// through: the cache neither answers nor stores them. The disk tier is
    /// shared by every process on the cache directory, and no credential or
    /// personal response belongs there.
    static func applies(to request: DownloadRequest) -> Bool {
        !request.hasCredentials && !request.headers.contains { bypassHeaders.contains($0.name.lowercased()) }
    }

    private static let bypassHeaders: Set<String> = [
        "if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range",
    ]

    /// The keys a response reached through `redirects` is stored under, for
    /// receipts that asked with `keys`: none when a hop said `no-store` or
    /// the final URL carries a user or password; the keys asked for when
    /// every hop may be stored on its own (a 301 or 308, or one with
    /// explicit freshness) or is named by a `cacheKey`; else the final URL's
    /// own key, since a temporary redirect must be asked again. Each key
    /// once.
    static func storageKeys(
        for requests: some Collection<DownloadRequest>, redirects: [ResponseHead], finalURL: String?
    ) -> [String] {
        if redirects.contains(where: { CacheControl($0.headers).noStore }) { return [] }
        // Without a redirect the final URL is the one each request asked,
        // whose user information the request knows without a parse.
        if redirects.isEmpty {
            if requests.contains(where: \.hasUserInfo) { return [] }
        } else if let finalURL, CurlURL(finalURL)?.hasUserInfo ?? true {
            return []
        }
        let permanent = redirects.allSatisfy {
            HTTPCachePolicy.isStorable(status: $0.status, requestHeaders: [], responseHeaders: $0.headers)
        }
        let keys = requests.map { request in
            if permanent || request.cacheKey != nil { return key(for: request) }
            return key(url: finalURL ?? request.url)
        }
        // Most transfers have one receipt: no set to build for it.
        return keys.count > 1 ? Array(Set(keys)) : keys
    }

    /// `key(cacheKey:)` of the request's `cacheKey`, else `key(url:)` of its
    /// URL: made with the request.
    static func key(for request: DownloadRequest) -> String { request.cacheStorageKey }

    /// The key of a URL's response: `url ` and the URL's bytes, escaped.
    static func key(url: String) -> String { "url " + escaped(url) }

    /// The key of a client's `cacheKey`: `key ` and its bytes, escaped, so it
    /// never names the response of a URL of the same text.
    static func key(cacheKey: String) -> String { "key " + escaped(cacheKey) }

    /// `text` in printable ASCII: every other byte, and `%`, as `%XX`. Two
    /// texts escape alike only when their bytes are equal, so the tiers'
    /// String-keyed maps tell apart what Unicode equivalence would merge.
    static func escaped(_ text: String) -> String {
        // Most URLs and keys need no escape: they are kept as they are,
        // which their contiguous bytes tell faster than the UTF-8 view.
        if text.utf8.withContiguousStorageIfAvailable({ $0.allSatisfy(isKept) }) ?? text.utf8.allSatisfy(isKept) {
            return text
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isKept(byte) {
                bytes.append(byte)
            } else {
                bytes += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `escaped` keeps `byte` as it is.
    private static func isKept(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "%")
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// What the caches can do for `request` under its cache policy. For a
    /// request with `integrity`, a stored body is served only when it
    /// matches, and one whose recorded digest does not match is neither
    /// served nor revalidated; when what is stored under its URL cannot be
    /// served as it is, any stored body with its digest is
    /// (`lookup(content:)`); else the origin is asked.
    func lookup(_ request: DownloadRequest, now: Date = Date()) -> Lookup {
        let found = lookup(url: request, now: now)
        if case .hit = found { return found }
        return lookup(content: request).map(Lookup.hit) ?? found
    }

    /// What is stored under `request`'s own key, as `lookup` uses it.
    private func lookup(url request: DownloadRequest, now: Date) -> Lookup {
        guard request.cachePolicy != .reload, Self.applies(to: request) else { return .miss }
        let key = Self.key(for: request)
        behind.settle(key)
        let anyAge = request.cachePolicy == .cacheElseLoad || request.cachePolicy == .cacheOnly
        let integrity = request.integrity

        func decide(_ response: borrowing CachedResponse, hit: () -> Hit?) -> Lookup? {
            guard HTTPCachePolicy.matches(response, requestHeaders: request.headers) else { return nil }
            if let integrity, let recorded = response.digests[integrity.algorithm], !integrity.matches(recorded) {
                return nil
            }
            let freshness = HTTPCachePolicy.freshness(of: response, requestHeaders: request.headers, now: now)
            if anyAge || freshness.isFresh {
                return hit().map(Lookup.hit)
            }
            // Validators come from the origin or from a file another process
            // wrote: one that could end the header line is never replayed
            // (`Validators.requestHeaders` leaves it out).
            let conditions = HTTPCachePolicy.conditionalHeaders(for: response)
            return conditions.isEmpty ? nil : .stale(Stale(key: key, response: copy response, conditionalHeaders: conditions))
        }

        switch memory.find(key) {
        case .held(let hit)?:
            if let found = decide(hit.response, hit: { Self.held(hit, matching: integrity) ? hit : nil }) { return found }
        case .entry(let entry)?:
            let found = decide(entry.response) {
                body(of: entry, key: key, matching: integrity).map {
                    Hit(
                        key: key, response: entry.response, body: .bytes($0), tier: .memory, sharedHeaders: entry.sharedHeaders,
                        knownFileName: entry.pathFileName)
                }
            }
            if let found { return found }
        case nil:
            break
        }
        // One opening of the entry serves the decision and the body; a body
        // too large for the memory tier is left in its file. Its digest is
        // taken as it is read for its check, and only such digests go to
        // the memory tier with it.
        let fromDisk = downloadTier?.withEntry(key: key) { entry, load in
            decide(entry.response) {
                guard let loaded = load(Int64(memoryEntryLimit), digesting: integrity?.algorithm) else { return nil }
                var response = entry.response
                response.digests = loaded.digests
                if case .bytes(let bytes) = loaded.body, bytes.count <= memoryEntryLimit {
                    memory.set(MemoryCache.Entry(response: response, body: bytes), for: key)
                }
                recordDigests(loaded.digests, of: entry, key: key)
                if let integrity, integrity.mismatch(in: loaded.digests) != nil { return nil }
                return Hit(key: key, response: response, body: loaded.body, tier: .disk)
            }
        }
        if let fromDisk, let found = fromDisk { return found }
        return .miss
    }

    /// A stored body whose digest is one `request`'s `integrity` gives,
    /// whatever URL it was stored under (content addressing), for a request
    /// the cache applies to and whose policy is not `reload`: the body of a
    /// stored `200`, fresh or not (the digest, not the URL, says what the
    /// client wants), found through the disk tier's digest index and
    /// served from the memory tier when it holds it. A hint the index gives
    /// is followed only when the entry's own record has the digest, and the
    /// body is served only when its bytes hash to it: those the memory tier
    /// holds by the digest taken from them, those read from the disk as
    /// they are read.
    func lookup(content request: DownloadRequest) -> Hit? {
        guard let integrity = request.integrity, request.cachePolicy != .reload, Self.applies(to: request),
            let disk = downloadTier
        else { return nil }
        behind.settle()
        let algorithm = integrity.algorithm
        for digest in integrity.digests {
            for key in disk.keys(withDigest: digest, algorithm) {
                if let entry = memory.get(key), entry.response.status == 200, entry.response.digests[algorithm] == digest,
                    let bytes = body(of: entry, key: key, matching: integrity)
                {
                    return Hit(key: key, response: entry.response, body: .bytes(bytes), tier: .memory)
                }
                let hit = disk.withEntry(key: key) { entry, load -> Hit? in
                    guard entry.response.status == 200, entry.response.digests[algorithm] == digest,
                        let loaded = load(Int64(memoryEntryLimit), digesting: algorithm), loaded.digests[algorithm] == digest
                    else { return nil }
                    return Hit(key: key, response: entry.response, body: loaded.body, tier: .disk)
                }
                if let hit = hit ?? nil { return hit }
            }
        }
        return nil
    }

    /// Records with `key`'s disk entry the digests a read of its body took
    /// that its record lacks, so that content addressing finds it by them
    /// without hashing it again: on `recorder`, so no lookup waits on the
    /// write.
    private func recordDigests(_ taken: BodyDigests, of entry: DiskCacheEntry, key: String) {
        guard let disk, !taken.algorithms.isSubset(of: entry.response.digests.algorithms) else { return }
        let write = entry.write
        recorder.async { disk.record(taken, key: key, write: write) }
    }

    /// Stores a fresh network response under `keys`; returns the body when
    /// it was read for the memory tier. `body` gives the length and checksum
    /// of what the transfer wrote to its file, and the bytes when it kept
    /// them. The disk tier hard-links the file when it can, so it may be
    /// renamed afterwards; a rewrite in place makes the disk entry a miss.
    /// A body the disk tier stored in a body file stands in the memory tier
    /// as that file, read and checked on its first hit, even when the
    /// transfer kept its bytes: those were a file download's, and holding
    /// them too would keep every small download's bytes twice, in fresh
    /// memory each time. The memory tier holds any other kept bytes; any
    /// other body that fits is read from the file now. Both tiers record the
    /// digests `body` gives.
    /// A response that may not be stored removes what was stored before.
    func store(
        keys: [String], request: DownloadRequest, head: ResponseHead, requestTime: Date, responseTime: Date,
        body: CacheBodyFile
    ) -> [UInt8]? {
        for key in keys { behind.settle(key) }
        return storeNow(keys: keys, request: request, head: head, requestTime: requestTime, responseTime: responseTime, body: body)
    }

    /// Whether `deferredStore` makes stores to be made behind their
    /// outcomes: once the disk tier is open, and not with `--disk-capacity 0`.
    /// Without the disk tier a store is cheap, and is made at once.
    var storesBehind: Bool { openedDownloadTier != nil }

    /// A store of a fresh network response, as `store` makes it, for
    /// `storeBehind`: `file` (the body's file, which `body` names as its
    /// unnamed file) stays open until it is made. The body is not read for
    /// the memory tier: its bytes are `body`'s, or it is not held there.
    func deferredStore(
        keys: [String], request: DownloadRequest, head: ResponseHead, requestTime: Date, responseTime: Date,
        body: CacheBodyFile, holding file: StoresBehind.OpenFile
    ) -> StoresBehind.Store {
        StoresBehind.Store(keys: keys) { [self] in
            withExtendedLifetime(file) {
                _ = storeNow(keys: keys, request: request, head: head, requestTime: requestTime, responseTime: responseTime, body: body)
            }
        }
    }

    /// Queues `stores` to be made behind the caller (`StoresBehind`), or
    /// makes them now, in one write transaction, when too many wait already.
    /// Call it before the outcomes of their downloads go out: a request
    /// made after an outcome then finds its response stored.
    func storeBehind(_ stores: [StoresBehind.Store]) {
        guard !behind.add(stores) else { return }
        batch {
            for store in stores {
                for key in store.keys { behind.settle(key) }
                store.make()
            }
        }
    }

    /// `store`, without settling the stores waiting behind.
    private func storeNow(
        keys: [String], request: DownloadRequest, head: ResponseHead, requestTime: Date, responseTime: Date,
        body: CacheBodyFile
    ) -> [UInt8]? {
        guard Self.applies(to: request) else { return nil }
        // Parsed once: for the decision, and then for the stored response.
        let fields = CachedResponse.Fields(head.headers)
        guard HTTPCachePolicy.isStorable(status: head.status, requestHeaders: request.headers, response: fields) else {
            for key in keys {
                memory.remove(key)
                downloadTier?.remove(key: key)
            }
            return nil
        }
        let inMemory = body.length <= Int64(memoryEntryLimit)
        let disk = downloadTier
        guard inMemory || disk != nil else {
            for key in keys { memory.remove(key) }
            return nil
        }
        var bytes = body.bytes
        var unreadable = false
        let onDisk = disk.map { body.length <= $0.maximumBodyLength } ?? false
        var response = CachedResponse(
            head: head, fields: fields, requestURL: request.url, requestHeaders: request.headers, requestTime: requestTime,
            responseTime: responseTime)
        response.digests = body.digests
        for key in keys {
            var stored: String?
            if let disk {
                if onDisk {
                    let placed = disk.storeBody(key: key, response: response, file: body)
                    stored = placed?.fileName
                    // A body kept inline was read for its row: not again.
                    if bytes == nil { bytes = placed?.bytes }
                } else {
                    disk.remove(key: key)
                }
            }
            guard inMemory else {
                memory.remove(key)
                continue
            }
            if let stored {
                let reference = MemoryCache.StoredBody(name: stored, length: Int(body.length), checksum: body.checksum)
                memory.set(MemoryCache.Entry(response: response, stored: reference), for: key)
                continue
            }
            if bytes == nil, !unreadable {
                bytes = body.read()
                unreadable = bytes == nil
            }
            if let bytes {
                memory.set(MemoryCache.Entry(response: response, body: bytes), for: key)
            } else {
                memory.remove(key)
            }
        }
        return bytes
    }

    /// Whether the body the memory tier holds for `hit` has a digest
    /// `integrity` gives (as `body(of:key:matching:)` tells of a held body).
    private static func held(_ hit: Hit, matching integrity: Integrity?) -> Bool {
        guard let integrity, case .bytes(let bytes) = hit.body else { return true }
        return integrity.matches(hit.response.digests[integrity.algorithm] ?? DigestHasher.hash(bytes, integrity.algorithm))
    }

    /// The body of a memory entry: held, or read from the disk tier's body
    /// file it stands for and then held. Nil, and the entry removed, when
    /// that file is gone or no longer has the length and checksum stored.
    /// Nil too when `integrity` is given and the body does not match it: a
    /// held body by the digest recorded from it (taken now when none was),
    /// one read from the disk tier's file by the bytes read.
    private func body(of entry: MemoryCache.Entry, key: String, matching integrity: Integrity? = nil) -> [UInt8]? {
        guard let stored = entry.stored else {
            guard let integrity else { return entry.body }
            let digest = entry.response.digests[integrity.algorithm] ?? DigestHasher.hash(entry.body, integrity.algorithm)
            return integrity.matches(digest) ? entry.body : nil
        }
        let file = disk.map {
            CacheBodyFile(directory: $0.directory, name: stored.name, length: Int64(stored.length), checksum: stored.checksum)
        }
        guard let bytes = file?.read() else {
            memory.remove(key, ifStill: entry)
            return nil
        }
        memory.hold(bytes, for: key, readFrom: stored)
        if let integrity, !integrity.matches(DigestHasher.hash(bytes, integrity.algorithm)) { return nil }
        return bytes
    }

    /// A 304 answered the revalidation of `stale`: the stored headers are
    /// refreshed in both tiers and the stored body is served. Nil when the
    /// 304 names another representation or the stored body is gone.
    func revalidated(_ stale: Stale, notModified head: ResponseHead, requestTime: Date, responseTime: Date) -> Hit? {
        behind.settle(stale.key)
        guard let merged = HTTPCachePolicy.merging(
            notModified: head.headers, rawValues: head.rawValues, into: stale.response, requestTime: requestTime, responseTime: responseTime)
        else { return nil }
        let body: CachedBody
        // The memory tier keeps only digests taken from the bytes it holds.
        var held = merged
        if let entry = memory.peek(stale.key), let bytes = self.body(of: entry, key: stale.key) {
            body = .bytes(bytes)
            held.digests = entry.response.digests
        } else if let loaded = downloadTier?.withEntry(key: stale.key, { _, load in load(Int64(memoryEntryLimit)) }), let loaded {
            body = loaded
            held.digests = BodyDigests()
        } else {
            return nil
        }
        if case .bytes(let bytes) = body, bytes.count <= memoryEntryLimit {
            memory.set(MemoryCache.Entry(response: held, body: bytes), for: stale.key)
        }
        if let disk = downloadTier, disk.update(key: stale.key, response: merged) == false, disk.lookup(key: stale.key) == nil,
            case .bytes(let bytes) = body
        {
            disk.store(key: stale.key, response: merged, body: bytes)
        }
        return Hit(key: stale.key, response: merged, body: body, tier: .memory)
    }

    /// Makes every store waiting behind its outcome (`storeBehind`) now.
    func settle() { behind.settle() }

    func countHit() { counters.withLock { $0.hits += 1 } }
    func countMiss() { counters.withLock { $0.misses += 1 } }
    func countRevalidation() { counters.withLock { $0.revalidations += 1 } }

    // MARK: - Methods

    /// Each tier's use and the counters since start.
    var stats: Stats {
        behind.settle()
        let counts = counters.withLock { $0 }
        let disk = disk
        return Stats(
            memory: .init(usage: memory.usage, capacity: memory.capacity, afterPurge: memory.afterPurge, entries: memory.count),
            disk: .init(usage: disk?.usage ?? 0, capacity: disk?.capacity ?? 0, entries: disk?.count ?? 0, path: disk?.path),
            hits: counts.hits, misses: counts.misses, revalidations: counts.revalidations)
    }

    /// What is stored under `key`, without changing recency or counters;
    /// nil when neither tier holds it.
    func describe(key: String, now: Date = Date()) -> Entry? {
        behind.settle(key)
        let tier: Tier
        let response: CachedResponse
        let size: Int64
        if let entry = memory.peek(key) {
            (tier, response, size) = (.memory, entry.response, Int64(entry.bodyLength))
        } else if let entry = downloadTier?.lookup(key: key) {
            (tier, response, size) = (.disk, entry.response, entry.bodyLength)
        } else {
            return nil
        }
        let remaining = HTTPCachePolicy.freshnessLifetime(of: response) - HTTPCachePolicy.currentAge(of: response, now: now)
        return Entry(
            fresh: HTTPCachePolicy.freshness(of: response, now: now).isFresh, size: size, tier: tier,
            expires: now.addingTimeInterval(remaining), etag: response.header("etag"),
            lastModified: response.header("last-modified"))
    }

    @discardableResult
    func remove(key: String) -> Bool {
        behind.settle(key)
        let inMemory = memory.remove(key) != nil
        let onDisk = disk?.remove(key: key) ?? false
        return inMemory || onDisk
    }

    /// Empties the tiers asked for; says how many entries each lost.
    func clear(memory clearMemory: Bool, disk clearDisk: Bool) -> Cleared {
        behind.settle()
        var removed = Cleared(memory: 0, disk: 0)
        if clearMemory {
            removed.memory = memory.count
            memory.removeAll()
        }
        if clearDisk, let disk {
            removed.disk = disk.count
            disk.removeAll()
            // Entries standing for the disk tier's body files go with them.
            memory.removeStored()
        }
        return removed
    }
}
