import Foundation
import JSON
import Logging
import Synchronization

/// The two tiers together, as the downloader sees them: an auto-purging
/// memory LRU in front of the HTTP-aware disk cache, the RFC 9111 decisions
/// of when a stored response may be served, and the hit, miss and
/// revalidation counters.
final class ResponseCache: Sendable {
    enum Tier: String, Sendable {
        case memory
        case disk
    }

    /// A stored response that may be served as it is.
    struct Hit: Sendable {
        var key: String
        var response: CachedResponse
        var body: [UInt8]
        var tier: Tier

        /// Names this stored response (key and the time it was fetched or
        /// last revalidated), for files several hits may share.
        var sharedName: String {
            String(XXH64.hash(Array("\(key)\n\(response.responseTime.timeIntervalSince1970)".utf8)), radix: 16)
        }
    }

    /// A stored response that must be revalidated before it is served.
    struct Stale: Sendable {
        var key: String
        var response: CachedResponse
        var conditionalHeaders: [(name: String, value: String)]
    }

    enum Lookup: Sendable {
        case hit(Hit)
        case stale(Stale)
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
    let disk: DiskCache?
    private let counters = Mutex(Counters())
    private let logger: Logger

    init(configuration: Configuration, logger: Logger) {
        self.logger = logger
        memory = MemoryCache(capacity: configuration.memoryCapacity, afterPurge: configuration.memoryAfterPurge)
        do {
            disk = try DiskCache(cacheDirectory: configuration.cacheDir, capacity: Int64(configuration.diskCapacity))
        } catch {
            logger.warning("disk cache unavailable in \(configuration.cacheDir): \(error)")
            disk = nil
        }
    }

    var memoryEntryLimit: Int { memory.capacity / Self.memoryEntryShare }

    /// Requests that carry their own validators or ask for a range are passed
    /// through: the cache neither answers nor stores them.
    static func applies(to request: DownloadRequest) -> Bool {
        let bypass: Set<String> = ["if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range"]
        return !request.headers.contains { bypass.contains($0.name.lowercased()) }
    }

    static func key(for request: DownloadRequest) -> String { request.cacheKey ?? request.url }

    /// What the caches can do for `request` under its cache policy.
    func lookup(_ request: DownloadRequest, now: Date = Date()) -> Lookup {
        guard request.cachePolicy != .reload, Self.applies(to: request) else { return .miss }
        let key = Self.key(for: request)
        let anyAge = request.cachePolicy == .cacheElseLoad || request.cachePolicy == .cacheOnly

        func decide(_ response: CachedResponse, body: () -> (body: [UInt8], response: CachedResponse)?, tier: Tier) -> Lookup? {
            guard HTTPCachePolicy.matches(response, requestHeaders: request.headers) else { return nil }
            let freshness = HTTPCachePolicy.freshness(of: response, requestHeaders: request.headers, now: now)
            if anyAge || freshness.isFresh {
                guard let loaded = body() else { return nil }
                return .hit(Hit(key: key, response: loaded.response, body: loaded.body, tier: tier))
            }
            let conditions = HTTPCachePolicy.conditionalHeaders(for: response)
            return conditions.isEmpty ? nil : .stale(Stale(key: key, response: response, conditionalHeaders: conditions))
        }

        if let entry = memory.get(key),
            let found = decide(entry.response, body: { (entry.body, entry.response) }, tier: .memory)
        {
            return found
        }
        if let disk, let entry = disk.lookup(key: key) {
            let found = decide(entry.response, body: {
                guard let read = disk.read(key: key) else { return nil }
                if read.body.count <= memoryEntryLimit {
                    memory.set(MemoryCache.Entry(response: read.entry.response, body: read.body), for: key)
                }
                return (read.body, read.entry.response)
            }, tier: .disk)
            if let found { return found }
        }
        return .miss
    }

    /// Stores a fresh network response under `keys`, from the body file the
    /// transfer wrote; returns the body when it was read for the memory tier.
    /// A response that may not be stored removes what was stored before.
    func store(
        keys: Set<String>, request: DownloadRequest, head: ResponseHead, requestTime: Date, responseTime: Date,
        bodyPath: String, size: Int64
    ) -> [UInt8]? {
        guard Self.applies(to: request) else { return nil }
        guard HTTPCachePolicy.isStorable(status: head.status, requestHeaders: request.headers, responseHeaders: head.headers)
        else {
            for key in keys { remove(key: key) }
            return nil
        }
        let response = CachedResponse(
            head: head, requestURL: request.url, requestHeaders: request.headers, requestTime: requestTime,
            responseTime: responseTime)
        var body: [UInt8]?
        if size <= Int64(memoryEntryLimit) {
            body = FileManager.default.contents(atPath: bodyPath).map { [UInt8]($0) }
        }
        for key in keys {
            if let body, body.count == Int(size) {
                memory.set(MemoryCache.Entry(response: response, body: body), for: key)
            } else {
                memory.remove(key)
            }
            disk?.store(key: key, response: response, bodyFile: bodyPath)
        }
        return body
    }

    /// A 304 answered the revalidation of `stale`: the stored headers are
    /// refreshed in both tiers and the stored body is served. Nil when the
    /// 304 names another representation or the stored body is gone.
    func revalidated(_ stale: Stale, notModified head: ResponseHead, requestTime: Date, responseTime: Date) -> Hit? {
        guard let merged = HTTPCachePolicy.merging(
            notModified: head.headers, into: stale.response, requestTime: requestTime, responseTime: responseTime)
        else { return nil }
        let body: [UInt8]
        if let entry = memory.peek(stale.key) {
            body = entry.body
        } else if let read = disk?.read(key: stale.key) {
            body = read.body
        } else {
            return nil
        }
        if body.count <= memoryEntryLimit {
            memory.set(MemoryCache.Entry(response: merged, body: body), for: stale.key)
        }
        if let disk, disk.update(key: stale.key, response: merged) == false, disk.lookup(key: stale.key) == nil {
            disk.store(key: stale.key, response: merged, body: body)
        }
        return Hit(key: stale.key, response: merged, body: body, tier: .memory)
    }

    func countHit() { counters.withLock { $0.hits += 1 } }
    func countMiss() { counters.withLock { $0.misses += 1 } }
    func countRevalidation() { counters.withLock { $0.revalidations += 1 } }

    // MARK: - Methods

    var stats: JSON {
        let counts = counters.withLock { $0 }
        return [
            "memory": [
                "usage": JSON(memory.usage), "capacity": JSON(memory.capacity), "afterPurge": JSON(memory.afterPurge),
                "entries": JSON(memory.count),
            ],
            "disk": [
                "usage": .integer(disk?.usage ?? 0), "capacity": .integer(disk?.capacity ?? 0),
                "entries": JSON(disk?.count ?? 0), "path": JSON(disk?.path),
            ],
            "hits": JSON(counts.hits), "misses": JSON(counts.misses), "revalidations": JSON(counts.revalidations),
        ]
    }

    /// What is stored under `key`, without changing recency or counters.
    func describe(key: String, now: Date = Date()) -> JSON {
        let tier: Tier
        let response: CachedResponse
        let size: Int64
        if let entry = memory.peek(key) {
            (tier, response, size) = (.memory, entry.response, Int64(entry.body.count))
        } else if let entry = disk?.lookup(key: key) {
            (tier, response, size) = (.disk, entry.response, entry.bodyLength)
        } else {
            return ["cached": false, "fresh": false, "size": nil, "tier": nil, "expires": nil, "etag": nil, "lastModified": nil]
        }
        let remaining = HTTPCachePolicy.freshnessLifetime(of: response) - HTTPCachePolicy.currentAge(of: response, now: now)
        let expires = now.addingTimeInterval(remaining)
        return [
            "cached": true,
            "fresh": .bool(HTTPCachePolicy.freshness(of: response, now: now).isFresh),
            "size": .integer(size),
            "tier": .string(tier.rawValue),
            "expires": .string(expires.formatted(.iso8601)),
            "etag": JSON(response.header("etag")),
            "lastModified": JSON(response.header("last-modified")),
        ]
    }

    @discardableResult
    func remove(key: String) -> Bool {
        let inMemory = memory.remove(key) != nil
        let onDisk = disk?.remove(key: key) ?? false
        return inMemory || onDisk
    }

    func clear(memory clearMemory: Bool, disk clearDisk: Bool) -> JSON {
        var removed: (memory: Int, disk: Int) = (0, 0)
        if clearMemory {
            removed.memory = memory.count
            memory.removeAll()
        }
        if clearDisk, let disk {
            removed.disk = disk.count
            disk.removeAll()
        }
        return ["memory": JSON(removed.memory), "disk": JSON(removed.disk)]
    }
}
