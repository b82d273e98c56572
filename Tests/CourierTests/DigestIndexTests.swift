import Foundation
import Testing

@testable import Courier

@Suite struct DigestIndexTests {
    private static let one = BodyDigests.of(Array("one".utf8), [.sha256, .sha512])
    private static let two = BodyDigests.of(Array("two".utf8), [.sha256])

    @Test func keysAreFoundByEachDigestRecordedTheMostRecentFirst() {
        var index = DigestIndex()
        index.record(key: "url a", digests: Self.one)
        index.record(key: "url b", digests: Self.one)
        index.record(key: "url c", digests: Self.two)
        #expect(index.keys(.sha256, Self.one[.sha256]!) == ["url b", "url a"])
        #expect(index.keys(.sha512, Self.one[.sha512]!) == ["url b", "url a"])
        #expect(index.keys(.sha256, Self.two[.sha256]!) == ["url c"])
        #expect(index.keys(.sha384, Self.one[.sha256]!) == [], "a digest is looked up by its own algorithm")
    }

    @Test func recordingAgainOrRemovingLeavesNoKeyUnderADigestItLost() {
        var index = DigestIndex()
        index.record(key: "url a", digests: Self.one)
        index.record(key: "url a", digests: Self.two)
        #expect(index.keys(.sha256, Self.one[.sha256]!) == [] && index.keys(.sha512, Self.one[.sha512]!) == [])
        #expect(index.keys(.sha256, Self.two[.sha256]!) == ["url a"])
        index.record(key: "url a", digests: BodyDigests())
        #expect(index.keys(.sha256, Self.two[.sha256]!) == [] && index.count == 0)
        index.record(key: "url b", digests: Self.two)
        index.remove(key: "url b")
        index.remove(key: "never recorded")
        #expect(index.keys(.sha256, Self.two[.sha256]!) == [] && index.count == 0)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct DiskCacheDigestIndexTests {
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

    @Test func theFirstSweepIndexesWhatIsStoredAndWritesAndRemovalsKeepTheIndex() throws {
        try withDirectory { directory in
            let body = Array("stored body".utf8)
            let digests = BodyDigests.of(body, [.sha384])
            let writer = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            #expect(writer.store(key: "url a", response: response(digests: digests), body: body))
            #expect(writer.store(key: "url plain", response: response(digests: BodyDigests()), body: body))
            #expect(writer.keys(withDigest: digests[.sha384]!, .sha384) == ["url a"])

            // A process that starts later finds it through its first sweep
            let reader = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            #expect(reader.keys(withDigest: digests[.sha384]!, .sha384) == ["url a"])
            // Another process's later write is found once read by its key
            let later = BodyDigests.of(Array("later".utf8), [.sha256])
            #expect(writer.store(key: "url b", response: response(digests: later), body: Array("later".utf8)))
            #expect(reader.keys(withDigest: later[.sha256]!, .sha256) == [])
            #expect(reader.lookup(key: "url b") != nil)
            #expect(reader.keys(withDigest: later[.sha256]!, .sha256) == ["url b"])
            // A removed entry leaves the index; one removed by another process goes when its key misses
            reader.remove(key: "url b")
            #expect(reader.keys(withDigest: later[.sha256]!, .sha256) == [])
            writer.remove(key: "url a")
            #expect(reader.lookup(key: "url a") == nil)
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
            cache.record(sha512, key: "url a", body: first.bodyPath)
            #expect(cache.lookup(key: "url a")?.response.digests == sha512)
            // Replaced since: the digests of the old body are not recorded for the new one
            #expect(cache.store(key: "url a", response: response(digests: BodyDigests()), body: Array("new".utf8)))
            cache.record(BodyDigests.of(body, [.sha256]), key: "url a", body: first.bodyPath)
            #expect(cache.lookup(key: "url a")?.response.digests == BodyDigests())
            #expect(cache.keys(withDigest: sha512[.sha512]!, .sha512) == [])
        }
    }
}
