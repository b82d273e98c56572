import Foundation
import JSON
import JSONRPC
import Testing

@testable import Courier

/// For a request with `integrity`, a stored body is served only when it
/// matches: the memory tier by the digests taken from the bytes it holds,
/// the disk tier by hashing the body as it is read, whatever digest its
/// entry records.
@Suite(.timeLimit(.minutes(1)))
struct ResponseCacheIntegrityTests {
    static let body = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    static let other = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 37) }

    private func withCache(_ test: (ResponseCache, String) throws -> Void) throws {
        let directory = NSTemporaryDirectory() + "courier-integrity-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try test(try cache(in: directory), directory)
    }

    private func cache(in directory: String) throws -> ResponseCache {
        let configuration = Configuration(cacheDir: directory + "/cache")
        return ResponseCache(configuration: configuration, root: try CacheRoot(testing: configuration.cacheDir), logger: .init(label: "test"))
    }

    private func request(integrity: String? = nil, policy: String = "default") throws -> DownloadRequest {
        var params: [String: JSON] = ["url": "http://o/doc", "cachePolicy": .string(policy)]
        if let integrity { params["integrity"] = .string(integrity) }
        return try DownloadRequest(Params(.object(params)), defaults: Configuration(cacheDir: "/nonexistent"))
    }

    private static func sri(_ algorithm: HashAlgorithm, _ bytes: [UInt8]) -> String {
        BodyDigests.text(algorithm, DigestHasher.hash(bytes, algorithm))
    }

    /// Stores `body` as a transfer that took `digests` would, with `headers`.
    private func store(
        _ body: [UInt8], digests: BodyDigests = BodyDigests(), headers: [(String, String)] = [("cache-control", "max-age=3600")],
        in cache: ResponseCache, directory: String
    ) throws {
        let file = directory + "/downloaded-\(UUID().uuidString)"
        try Data(body).write(to: URL(fileURLWithPath: file))
        let now = Date()
        _ = cache.store(
            keys: [ResponseCache.key(for: try request())], request: try request(),
            head: ResponseHead(status: 200, headers: headers, finalURL: "http://o/doc"), requestTime: now, responseTime: now,
            body: CacheBodyFile(
                directory: nil, name: file, length: Int64(body.count), checksum: XXH3.hash(body), bytes: body, digests: digests))
    }

    private func tier(_ lookup: ResponseCache.Lookup) -> String {
        switch lookup {
        case .hit(let hit): hit.tier.rawValue
        case .stale: "stale"
        case .miss: "miss"
        }
    }

    @Test func aStoredBodyIsServedOnlyToIntegrityItMatches() throws {
        try withCache { cache, directory in
            // Given a body stored without any digest
            try store(Self.body, in: cache, directory: directory)

            // Then requests whose integrity it matches are served from memory, by any algorithm
            for algorithm in HashAlgorithm.allCases {
                #expect(tier(cache.lookup(try request(integrity: Self.sri(algorithm, Self.body)))) == "memory")
            }
            // And one it does not match is a miss in both tiers, even for cacheOnly
            #expect(tier(cache.lookup(try request(integrity: Self.sri(.sha256, Self.other)))) == "miss")
            #expect(tier(cache.lookup(try request(integrity: Self.sri(.sha256, Self.other), policy: "cacheOnly"))) == "miss")
            // While one without integrity is served as before
            #expect(tier(cache.lookup(try request())) == "memory")
        }
    }

    @Test func aBodyKnownNotToMatchIsNotRevalidated() throws {
        try withCache { cache, directory in
            // Given a stale body stored with its digest
            try store(
                Self.body, digests: BodyDigests.of(Self.body, [.sha384]), headers: [("cache-control", "no-cache"), ("etag", "\"v\"")],
                in: cache, directory: directory)

            // Then a request its recorded digest matches is served it as it
            // is (the digest, not its age, says it is the body asked for),
            // and one it does not is a miss
            #expect(tier(cache.lookup(try request(integrity: Self.sri(.sha384, Self.body)))) == "memory")
            #expect(tier(cache.lookup(try request(integrity: Self.sri(.sha384, Self.other)))) == "miss")
            #expect(tier(cache.lookup(try request())) == "stale")
        }
    }

    @Test func theDiskTiersRecordedDigestsAreNotTakenOnTheirWord() throws {
        try withCache { cache, directory in
            // Given a disk entry whose body is `other` but whose metadata records the digests of `body`
            let disk = try #require(cache.disk)
            var response = CachedResponse(
                head: ResponseHead(status: 200, headers: [("cache-control", "max-age=3600")], finalURL: "http://o/doc"),
                requestURL: "http://o/doc", requestHeaders: [], requestTime: Date(), responseTime: Date())
            response.digests = BodyDigests.of(Self.body, [.sha256, .sha512])
            #expect(disk.store(key: ResponseCache.key(for: try request()), response: response, body: Self.other))
            #expect(cache.memory.count == 0)

            // When it is asked for with the digest it records
            let claimed = cache.lookup(try request(integrity: Self.sri(.sha256, Self.body)))

            // Then it is a miss: the body read does not hash to it
            #expect(tier(claimed) == "miss")
            // And the memory tier took the body with the digest taken from its bytes, not the recorded one
            let key = ResponseCache.key(for: try request())
            #expect(cache.memory.peek(key)?.response.digests == BodyDigests.of(Self.other, [.sha256]))
            // And asked for with the body's true digest by an algorithm the entry records, it is
            // refused on that record; by one it does not, the disk tier serves it
            cache.memory.removeAll()
            #expect(tier(cache.lookup(try request(integrity: Self.sri(.sha512, Self.other)))) == "miss")
            #expect(tier(cache.lookup(try request(integrity: Self.sri(.sha384, Self.other)))) == "disk")
            #expect(cache.memory.peek(key)?.response.digests == BodyDigests.of(Self.other, [.sha384]))
        }
    }

    @Test func aStoredBodyRecordsTheDigestsTakenInBothTiers() throws {
        try withCache { cache, directory in
            // Given a body stored with the digests its transfer took
            let digests = BodyDigests.of(Self.body, [.sha256, .sha384])
            try store(Self.body, digests: digests, in: cache, directory: directory)
            let key = ResponseCache.key(for: try request())

            // Then both tiers record them, the disk tier's read back from its entry
            #expect(cache.memory.peek(key)?.response.digests == digests)
            #expect(cache.disk?.lookup(key: key)?.response.digests == digests)
        }
    }
}
