import Foundation
import Testing

@testable import Courier

/// Content addressing's lookup: the keys of entries by their recorded
/// digests, indexed in `response_digests`.
@Suite(.timeLimit(.minutes(1)))
struct DiskCacheDigestTests {
    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-digest-index-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    private func response(digests: BodyDigests) -> CachedResponse {
        CachedResponse(
            status: 200, headers: [], url: "http://o/x", requestTime: Date(timeIntervalSince1970: 1_714_564_800),
            responseTime: Date(timeIntervalSince1970: 1_714_564_801), digests: digests)
    }

    @Test func everyProcessFindsWhatAnyStoredAndRemovedByItsDigest() throws {
        try withDirectory { directory in
            let body = Array("stored body".utf8)
            let digests = BodyDigests.of(body, [.sha384])
            let writer = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            #expect(writer.store(key: "url a", response: response(digests: digests), body: body))
            #expect(writer.store(key: "url plain", response: response(digests: BodyDigests()), body: body))
            #expect(writer.keys(withDigest: digests[.sha384]!, .sha384) == ["url a"])

            // Another process finds it, and another's later write at once
            let reader = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            #expect(reader.keys(withDigest: digests[.sha384]!, .sha384) == ["url a"])
            let later = BodyDigests.of(Array("later".utf8), [.sha256])
            #expect(writer.store(key: "url b", response: response(digests: later), body: Array("later".utf8)))
            #expect(reader.keys(withDigest: later[.sha256]!, .sha256) == ["url b"])
            // The same body under two keys: the most recently used first
            #expect(writer.store(key: "url c", response: response(digests: later), body: Array("later".utf8)))
            #expect(reader.keys(withDigest: later[.sha256]!, .sha256) == ["url c", "url b"])
            // A removed entry is no longer found, whichever process removed it
            reader.remove(key: "url b")
            writer.remove(key: "url c")
            #expect(reader.keys(withDigest: later[.sha256]!, .sha256) == [])
            writer.remove(key: "url a")
            #expect(reader.keys(withDigest: digests[.sha384]!, .sha384) == [])
        }
    }

    @Test func digestsTakenFromAReadBodyAreRecordedOnlyWhileTheEntryNamesThatBody() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let body = Array("proved".utf8)
            #expect(cache.store(key: "url a", response: response(digests: BodyDigests()), body: body))
            let first = try #require(cache.lookup(key: "url a"))
            let sha512 = BodyDigests.of(body, [.sha512])
            cache.record(sha512, key: "url a", write: first.write)
            #expect(cache.lookup(key: "url a")?.response.digests == sha512)
            #expect(cache.keys(withDigest: sha512[.sha512]!, .sha512) == ["url a"])
            // Replaced since: the digests of the old body are not recorded for the new one
            #expect(cache.store(key: "url a", response: response(digests: BodyDigests()), body: Array("new".utf8)))
            cache.record(BodyDigests.of(body, [.sha256]), key: "url a", write: first.write)
            #expect(cache.lookup(key: "url a")?.response.digests == BodyDigests())
            #expect(cache.keys(withDigest: sha512[.sha512]!, .sha512) == [])
        }
    }
}
