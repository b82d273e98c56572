import Foundation
import JSON
import Testing

@testable import Courier

/// The cache reports values (`stats`, `describe(key:)`, `clear`), which the
/// server writes as `cache/stats`, `cache/lookup` and `cache/clear`.
@Suite(.timeLimit(.minutes(1)))
struct ResponseCacheReportsTests {
    private func withCache(_ body: (ResponseCache) throws -> Void) throws {
        let directory = NSTemporaryDirectory() + "courier-reports-\(getpid())-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let configuration = Configuration(cacheDir: directory)
        try body(ResponseCache(configuration: configuration, root: try CacheRoot(testing: directory), logger: .init(label: "test")))
    }

    @Test func anEntryInMemoryIsDescribedAndCleared() throws {
        try withCache { cache in
            let now = Date(timeIntervalSince1970: 1_700_000_000)
            let response = CachedResponse(
                status: 200, headers: [("cache-control", "max-age=60"), ("etag", "\"e\"")], url: "http://o/a",
                requestTime: now, responseTime: now)
            #expect(cache.memory.set(MemoryCache.Entry(response: response, body: [1, 2, 3]), for: "url http://o/a"))

            #expect(
                cache.describe(key: "url http://o/a", now: now.addingTimeInterval(10))
                    == ResponseCache.Entry(
                        fresh: true, size: 3, tier: .memory, expires: now.addingTimeInterval(60), etag: "\"e\"",
                        lastModified: nil))
            #expect(cache.describe(key: "url http://o/b") == nil)
            #expect(cache.stats.memory.entries == 1 && cache.stats.memory.usage > 0 && cache.stats.hits == 0)
            #expect(cache.stats.disk.path != nil)

            #expect(cache.clear(memory: true, disk: false) == ResponseCache.Cleared(memory: 1, disk: 0))
            #expect(cache.describe(key: "url http://o/a") == nil)
        }
    }

    @Test func nothingStoredIsWrittenWithNulls() {
        #expect(
            ResponseCache.Entry.json(nil)
                == ["cached": false, "fresh": false, "size": nil, "tier": nil, "expires": nil, "etag": nil, "lastModified": nil])
        let entry = ResponseCache.Entry(
            fresh: false, size: 5, tier: .disk, expires: Date(timeIntervalSince1970: 0), etag: nil, lastModified: "x")
        #expect(
            ResponseCache.Entry.json(entry)
                == [
                    "cached": true, "fresh": false, "size": 5, "tier": "disk", "expires": "1970-01-01T00:00:00Z",
                    "etag": nil, "lastModified": "x",
                ])
        #expect(ResponseCache.Cleared(memory: 2, disk: 3).json == ["memory": 2, "disk": 3])
    }
}
