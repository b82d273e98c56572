import Foundation
import JSON
import Testing

@testable import Courier

@Suite(.timeLimit(.minutes(1)))
struct MemoryCacheTests {
    /// An entry whose cost is exactly `cost` under key `key`.
    private func entry(costing cost: Int, key: String) -> MemoryCache.Entry {
        let response = CachedResponse(
            status: 200, headers: [], url: "", requestTime: Date(timeIntervalSince1970: 0),
            responseTime: Date(timeIntervalSince1970: 0))
        let fixed = MemoryCache.entryOverhead + key.utf8.count
        return MemoryCache.Entry(response: response, body: [UInt8](repeating: 7, count: cost - fixed))
    }

    @Test func costIsBodyPlusOverheadPlusMetadataBytes() {
        let response = CachedResponse(
            status: 200, headers: [("content-type", "image/png")], url: "http://a/b",
            requestTime: Date(), responseTime: Date(), varyValues: ["accept": "image/*"])
        let entry = MemoryCache.Entry(response: response, body: [UInt8](repeating: 0, count: 1000))
        #expect(MemoryCache.cost(of: entry, key: "k") == 1000 + 512 + 1 + 10 + 12 + 9 + 6 + 7)
    }

    @Test func getSharesTheHeadersOfAnEntryAndKeepsThemForTheNextHit() throws {
        // Given an entry with repeated and mixed-case headers
        let response = CachedResponse(
            status: 200, headers: [("Vary", "a"), ("vary", "b"), ("content-type", "text/plain")], url: "http://a/b",
            requestTime: Date(), responseTime: Date())
        let stored = MemoryCache.Entry(response: response, body: [1, 2])
        let cache = MemoryCache(capacity: 10_000, afterPurge: 10_000)
        cache.set(stored, for: "k")
        #expect(cache.peek("k")?.sharedHeaders == nil)

        // When it is read twice
        let first = cache.get("k")
        let second = cache.get("k")

        // Then both hits have one text, which writes the outcome's members
        // from the response, its headers among them, and the entry is still
        // the entry stored
        let shared = try #require(first?.sharedHeaders)
        #expect(second?.sharedHeaders === shared)
        var text: [UInt8] = []
        JSONMessage(estimate: 64, sharing: shared) { object in
            object.set("finalUrl", sharedMembers: shared, or: { _ in })
            object.set("size", sharedMembers: shared, or: { _ in })
        }.encode(into: &text)
        #expect(
            String(decoding: text, as: UTF8.self)
                == #"{"finalUrl":"http://a/b","headers":{"content-type":"text/plain","vary":"a, b"},"httpVersion":null,"#
                + #""size":2,"source":"memory","status":200}"#)
        #expect(first == stored)
        cache.remove("k", ifStill: stored)
        #expect(cache.count == 0)
    }

    @Test func theFirstHitCountsTheOutcomesTextItMakesInTheEntrysCost() throws {
        // Given an entry with one header
        let response = CachedResponse(
            status: 200, headers: [("content-type", "text/plain")], url: "http://a/b",
            requestTime: Date(), responseTime: Date())
        let cache = MemoryCache(capacity: 10_000, afterPurge: 10_000)
        cache.set(MemoryCache.Entry(response: response, body: [1, 2]), for: "k")
        let before = cache.usage

        // When it is hit twice
        let shared = try #require(cache.get("k")?.sharedHeaders)
        _ = cache.get("k")

        // Then the text the first hit made (its runs' keys, and what
        // follows each), and only it, is counted once
        let fromResponse = #""http://a/b","headers":{"content-type":"text/plain"},"httpVersion":null"#
        let figures = #"2,"source":"memory","status":200"#
        #expect(shared.byteCount == "finalUrl".utf8.count + fromResponse.utf8.count + "size".utf8.count + figures.utf8.count)
        #expect(cache.usage == before + shared.byteCount)
        #expect(cache.usage == MemoryCache.cost(of: try #require(cache.peek("k")), key: "k"))
    }

    @Test func aFirstHitThatTakesUsageOverTheCapacityPurgesTheLeastRecentOthers() throws {
        // Given a cache filled to its capacity by two entries, one with a header
        let response = CachedResponse(
            status: 200, headers: [("x", String(repeating: "v", count: 100))], url: "",
            requestTime: Date(timeIntervalSince1970: 0), responseTime: Date(timeIntervalSince1970: 0))
        let headed = MemoryCache.Entry(response: response, body: [UInt8](repeating: 1, count: 1_000))
        let headedCost = MemoryCache.cost(of: headed, key: "h")
        let cache = MemoryCache(capacity: headedCost + 2_000, afterPurge: headedCost + 2_000)
        cache.set(entry(costing: 2_000, key: "a"), for: "a")
        cache.set(headed, for: "h")
        #expect(cache.usage == cache.capacity)

        // When the headed entry's first hit makes its headers' text
        _ = try #require(cache.get("h"))

        // Then the other entry goes, and usage is the headed entry's new cost
        #expect(cache.peek("a") == nil)
        #expect(cache.usage == MemoryCache.cost(of: try #require(cache.peek("h")), key: "h"))
        #expect(cache.usage > headedCost)
    }

    @Test func theOutcomesTextCountsTheURLAnOriginRedirectedTo() throws {
        // Given an entry fetched from a long URL an origin redirected to,
        // filling the cache to its capacity with another entry
        let url = "http://a/" + String(repeating: "p", count: 4_000)
        let response = CachedResponse(
            status: 200, headers: [], url: url, requestTime: Date(timeIntervalSince1970: 0),
            responseTime: Date(timeIntervalSince1970: 0))
        let long = MemoryCache.Entry(response: response, body: [1])
        let longCost = MemoryCache.cost(of: long, key: "l")
        let cache = MemoryCache(capacity: longCost + 2_000, afterPurge: longCost + 2_000)
        cache.set(entry(costing: 2_000, key: "a"), for: "a")
        cache.set(long, for: "l")

        // When its first hit makes the text its outcomes share
        let shared = try #require(cache.get("l")?.sharedHeaders)

        // Then the URL's second copy, in the text, is counted, and the other
        // entry makes room for it
        #expect(shared.byteCount > url.utf8.count)
        #expect(cache.usage == longCost + shared.byteCount)
        #expect(cache.peek("a") == nil)
    }

    /// A cache holding one entry, under "k", whose 3-byte body is stored
    /// on disk, and that stored body.
    private static func cacheHoldingAStoredBody() -> (MemoryCache, MemoryCache.StoredBody) {
        let response = CachedResponse(
            status: 200, headers: [("etag", "\"x\"")], url: "http://a/b", requestTime: Date(), responseTime: Date())
        let stored = MemoryCache.StoredBody(name: "f", length: 3, checksum: 0)
        let cache = MemoryCache(capacity: 10_000, afterPurge: 10_000)
        cache.set(MemoryCache.Entry(response: response, stored: stored), for: "k")
        return (cache, stored)
    }

    @Test func aBodyReadForAStoredEntryKeepsTheTextAndItsCost() throws {
        // Given an entry whose body is stored on disk, hit once
        let (cache, stored) = Self.cacheHoldingAStoredBody()
        let shared = try #require(cache.get("k")?.sharedHeaders)
        let usage = cache.usage

        // When its body is read and held
        cache.hold([1, 2, 3], for: "k", readFrom: stored)

        // Then the hits after share the same text, counted once
        #expect(cache.get("k")?.sharedHeaders === shared)
        #expect(cache.usage == usage)
        #expect(cache.usage == MemoryCache.cost(of: try #require(cache.peek("k")), key: "k"))
    }

    @Test func findGivesTheSameHitOfAHeldBodyUntilTheEntryIsReplaced() throws {
        // Given an entry whose body is held
        let response = CachedResponse(
            status: 200, headers: [("content-type", "text/plain")], url: "http://a/b", requestTime: Date(),
            responseTime: Date())
        let cache = MemoryCache(capacity: 10_000, afterPurge: 10_000)
        cache.set(MemoryCache.Entry(response: response, body: [1, 2]), for: "k")

        // When it is found twice
        guard case .held(let first)? = cache.find("k"), case .held(let second)? = cache.find("k") else {
            Issue.record("no hit of a held body")
            return
        }

        // Then both are one hit, made from the entry as `get` gives it
        #expect(first === second)
        let entry = try #require(cache.peek("k"))
        #expect(first.key == "k" && first.tier == .memory && first.response.url == "http://a/b")
        guard case .bytes(let bytes) = first.body else {
            Issue.record("the body is not held")
            return
        }
        #expect(bytes == [1, 2])
        #expect(first.sharedHeaders === entry.sharedHeaders)
        #expect(first.knownFileName == entry.pathFileName && first.knownFileName != nil)
        #expect(first.response.headerObject == ["content-type": "text/plain"])
        #expect(cache.usage == MemoryCache.cost(of: entry, key: "k"))

        // And an entry stored anew under the key has a hit of its own
        cache.set(MemoryCache.Entry(response: response, body: [3]), for: "k")
        guard case .held(let replaced)? = cache.find("k"), case .bytes(let newBytes) = replaced.body else {
            Issue.record("no hit of the new entry")
            return
        }
        #expect(replaced !== first && newBytes == [3])
        #expect(cache.find("other") == nil)
    }

    @Test func findGivesAStoredEntryAsItIsAndItsHitOnceItsBodyIsHeld() throws {
        // Given an entry whose body is stored on disk
        let (cache, stored) = Self.cacheHoldingAStoredBody()

        // When it is found, then its body read and held, and it is found again
        guard case .entry(let entry)? = cache.find("k") else {
            Issue.record("a stored entry found as a hit")
            return
        }
        let shared = try #require(entry.sharedHeaders)
        #expect(entry.stored == stored)
        let usage = cache.usage
        cache.hold([1, 2, 3], for: "k", readFrom: stored)
        guard case .held(let hit)? = cache.find("k"), case .bytes(let bytes) = hit.body else {
            Issue.record("no hit of the held body")
            return
        }

        // Then the hit holds the body and shares the text, counted once
        #expect(bytes == [1, 2, 3])
        #expect(hit.sharedHeaders === shared)
        #expect(cache.usage == usage)
    }

    @Test func insertOverCapacityPurgesLeastRecentDownToAfterPurge() {
        // Given a cache of 10,000 with an after-purge of 6,000, holding four 2,000-byte entries
        let cache = MemoryCache(capacity: 10_000, afterPurge: 6_000)
        for key in ["a", "b", "c", "d"] { cache.set(entry(costing: 2_000, key: key), for: key) }
        #expect(cache.usage == 8_000)

        // When an insert takes usage to 10,000: not above capacity, nothing goes
        cache.set(entry(costing: 2_000, key: "e"), for: "e")
        #expect(cache.usage == 10_000)
        #expect(cache.count == 5)

        // When the next insert takes it to 12,000
        cache.set(entry(costing: 2_000, key: "f"), for: "f")

        // Then the three least recent go, leaving 6,000
        #expect(cache.keysByRecency == ["f", "e", "d"])
        #expect(cache.usage == 6_000)
    }

    @Test func readRefreshesRecencyAndPeekDoesNot() {
        // Given a cache nearly full where "a" is the oldest (with room for
        // the 80 bytes of text its outcomes share from its first hit on)
        let cache = MemoryCache(capacity: 3_080, afterPurge: 2_080)
        for key in ["a", "b", "c"] { cache.set(entry(costing: 1_000, key: key), for: key) }

        // When "a" is read and "b" only peeked
        #expect(cache.get("a") != nil)
        #expect(cache.peek("b") != nil)
        cache.set(entry(costing: 1_000, key: "d"), for: "d")

        // Then "b" and "c" go, "a" stays
        #expect(cache.keysByRecency == ["d", "a"])
        #expect(cache.get("b") == nil)
        #expect(cache.usage == 2_080)
    }

    @Test func replacingAnEntryAdjustsUsage() {
        let cache = MemoryCache(capacity: 10_000, afterPurge: 5_000)
        cache.set(entry(costing: 3_000, key: "a"), for: "a")
        cache.set(entry(costing: 1_000, key: "b"), for: "b")

        // When "a" is replaced by a smaller entry, then a larger one
        cache.set(entry(costing: 1_500, key: "a"), for: "a")
        #expect(cache.usage == 2_500)
        #expect(cache.count == 2)
        cache.set(entry(costing: 8_500, key: "a"), for: "a")

        // Then usage follows; 9,500 is not above capacity, so nothing is purged
        #expect(cache.usage == 9_500)
        #expect(cache.keysByRecency == ["a", "b"])

        // And a replacement that goes over purges the others, not itself
        cache.set(entry(costing: 9_100, key: "a"), for: "a")
        #expect(cache.keysByRecency == ["a"])
        #expect(cache.usage == 9_100)
    }

    @Test func entryLargerThanCapacityIsNotStored() {
        let cache = MemoryCache(capacity: 4_000, afterPurge: 2_000)
        cache.set(entry(costing: 1_000, key: "a"), for: "a")
        cache.set(entry(costing: 1_000, key: "b"), for: "b")

        #expect(cache.set(entry(costing: 4_001, key: "big"), for: "big") == false)
        #expect(cache.peek("big") == nil)
        #expect(cache.usage == 2_000)

        // An entry of exactly the capacity is stored, and purges the rest
        #expect(cache.set(entry(costing: 4_000, key: "b"), for: "b"))
        #expect(cache.keysByRecency == ["b"])

        // An oversized replacement removes the older entry
        #expect(cache.set(entry(costing: 5_000, key: "b"), for: "b") == false)
        #expect(cache.count == 0)
        #expect(cache.usage == 0)
    }

    @Test func removeRemoveAllAndConfigure() {
        let cache = MemoryCache(capacity: 10_000, afterPurge: 8_000)
        for key in ["a", "b", "c", "d"] { cache.set(entry(costing: 2_000, key: key), for: key) }
        #expect(cache.remove("b") != nil)
        #expect(cache.remove("b") == nil)
        #expect(cache.usage == 6_000)
        #expect(cache.keysByRecency == ["d", "c", "a"])

        // Lowering the capacity below usage purges at once
        cache.configure(capacity: 5_000, afterPurge: 3_000)
        #expect(cache.keysByRecency == ["d"])
        #expect((cache.capacity, cache.afterPurge) == (5_000, 3_000))

        cache.removeAll()
        #expect(cache.count == 0)
        #expect(cache.usage == 0)
        // Freed slots are reused without disturbing the order
        for key in ["x", "y", "z"] { cache.set(entry(costing: 1_000, key: key), for: key) }
        #expect(cache.keysByRecency == ["z", "y", "x"])
    }

    @Test func concurrentUseKeepsUsageConsistent() {
        let cache = MemoryCache(capacity: 50_000, afterPurge: 30_000)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for round in 0..<500 {
                let key = "k\((worker * 7 + round) % 40)"
                if round % 3 == 0 { _ = cache.get(key) } else { cache.set(entry(costing: 1_000 + round % 5 * 100, key: key), for: key) }
            }
        }
        let keys = cache.keysByRecency
        let summed = keys.reduce(0) { $0 + MemoryCache.cost(of: cache.peek($1)!, key: $1) }
        #expect(cache.usage == summed)
        #expect(cache.count == keys.count)
        #expect(cache.usage <= 50_000)
    }
}
