import Foundation
import JSON
import JSONRPC
import Testing

@testable import Courier

/// A network body the disk tier stored in a body file (one the transfer did
/// not keep in memory, or a kept one linked from its destination) stands in
/// the memory tier as that body file, read and checked on its first hit, so
/// storing it reads nothing back and holds nothing twice.
@Suite(.timeLimit(.minutes(1)))
struct ResponseCacheStoredBodyTests {
    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-stored-body-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    private func cache(in directory: String, diskCapacity: Int = 512 << 20) throws -> ResponseCache {
        var configuration = Configuration(cacheDir: directory + "/cache")
        configuration.diskCapacity = diskCapacity
        return ResponseCache(configuration: configuration, root: try CacheRoot(testing: configuration.cacheDir), logger: .init(label: "test"))
    }

    private func bytes(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed }
    }

    /// Writes `body` as a transfer would have, and stores it as a fresh
    /// response for `url` described by its length and checksum only.
    private func download(
        _ body: [UInt8], url: String, into cache: ResponseCache, directory: String, kept: Bool = false
    ) throws -> (request: DownloadRequest, file: String) {
        let file = directory + "/downloaded-\(UUID().uuidString)"
        try Data(body).write(to: URL(fileURLWithPath: file))
        let request = try DownloadRequest(Params(["url": .string(url)]), defaults: Configuration(cacheDir: directory))
        let head = ResponseHead(status: 200, headers: [("cache-control", "max-age=3600")], finalURL: url)
        let now = Date()
        let described = CacheBodyFile(
            directory: nil, name: file, length: Int64(body.count), checksum: XXH3.hash(body), bytes: kept ? body : nil)
        _ = cache.store(
            keys: [ResponseCache.key(for: request)], request: request, head: head, requestTime: now, responseTime: now,
            body: described)
        return (request, file)
    }

    /// Stores `body` as a transfer that kept it and wrote it to an unnamed
    /// file beside its destination would, then names that file `dest` in
    /// `directory`, as delivery does; returns the request and what the store
    /// handed back.
    private func downloadKeptToDestination(
        _ body: [UInt8], url: String, into cache: ResponseCache, directory: String
    ) throws -> (request: DownloadRequest, returned: [UInt8]?) {
        let beside = try DirectoryHandle(opening: directory)
        let fd = try #require(beside.makeUnnamedFile(mode: 0o644))
        defer { close(fd) }
        #expect(CacheFileIO.write(fd, body))
        let request = try DownloadRequest(Params(["url": .string(url)]), defaults: Configuration(cacheDir: directory))
        let head = ResponseHead(status: 200, headers: [("cache-control", "max-age=3600")], finalURL: url)
        let file = CacheBodyFile(
            directory: beside, name: ".dest.partial", length: Int64(body.count), checksum: XXH3.hash(body), bytes: body,
            unnamed: fd)
        let returned = cache.store(
            keys: [ResponseCache.key(for: request)], request: request, head: head, requestTime: Date(), responseTime: Date(),
            body: file)
        #expect(beside.link(fd, as: "dest") == nil)
        return (request, returned)
    }

    private func served(_ cache: ResponseCache, _ request: DownloadRequest) -> ResponseCache.Hit? {
        if case .hit(let hit) = cache.lookup(request) { return hit }
        return nil
    }

    @Test func aStoredBodyIsReadOnItsFirstHitAndThenHeld() throws {
        try withDirectory { directory in
            // Given a body the transfer did not keep, stored by both tiers
            let cache = try cache(in: directory)
            let body = bytes(300_000, seed: 1)
            let (request, _) = try download(body, url: "http://o/large", into: cache, directory: directory)
            let key = ResponseCache.key(for: request)

            // Then the memory tier names the disk tier's body file and holds no bytes, yet counts them
            let entry = try #require(cache.memory.peek(key))
            let stored = try #require(entry.stored)
            #expect(entry.body.isEmpty)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory + "/cache/http") == [stored.name])
            #expect(stored.length == body.count)
            #expect(cache.memory.usage >= body.count + MemoryCache.entryOverhead)
            let usage = cache.memory.usage

            // When it is asked for
            let hit = try #require(served(cache, request))

            // Then the memory tier serves the bytes, and holds them from now on at the same cost,
            // besides the text of its outcomes the hit made
            #expect(hit.tier == .memory && hit.body.bytes == body)
            let held = try #require(cache.memory.peek(key))
            #expect(held.stored == nil && held.body == body)
            #expect(cache.memory.usage == usage + (try #require(held.sharedHeaders)).byteCount)
        }
    }

    @Test func aStoredBodyChangedInPlaceIsNeverServed() throws {
        try withDirectory { directory in
            // Given a stored body linked to the downloaded file, which the client then changes in place
            let cache = try cache(in: directory)
            let body = bytes(200_000, seed: 2)
            let (request, file) = try download(body, url: "http://o/rewritten", into: cache, directory: directory)
            let key = ResponseCache.key(for: request)
            let stored = try #require(cache.memory.peek(key)?.stored)
            var linked = stat()
            var downloaded = stat()
            #expect(stat(try #require(cache.disk).directory.path(of: stored.name), &linked) == 0 && stat(file, &downloaded) == 0)
            #expect(linked.st_ino == downloaded.st_ino)
            let fd = open(file, O_WRONLY)
            #expect(fd >= 0)
            #expect(pwrite(fd, "XXXXXXXXXX", 10, 1000) == 10)
            close(fd)

            // When it is asked for, then it is a miss, and the memory entry is gone
            #expect(served(cache, request) == nil)
            #expect(cache.memory.peek(key) == nil)
        }
    }

    @Test func aStoredBodyWhoseFileIsGoneIsAMiss() throws {
        try withDirectory { directory in
            // Given a stored body whose disk entry another process deleted
            let cache = try cache(in: directory)
            let (request, _) = try download(bytes(100_000, seed: 3), url: "http://o/gone", into: cache, directory: directory)
            let key = ResponseCache.key(for: request)
            let stored = try #require(cache.memory.peek(key)?.stored)
            #expect(unlink(try #require(cache.disk).directory.path(of: stored.name)) == 0)

            // Then it is a miss, and the memory entry is removed
            #expect(served(cache, request) == nil)
            #expect(cache.memory.peek(key) == nil)
        }
    }

    @Test func withoutTheDiskTierTheBodyIsReadWhenStored() throws {
        try withDirectory { directory in
            // Given a disk tier that takes no body
            let cache = try cache(in: directory, diskCapacity: 0)
            let body = bytes(150_000, seed: 4)
            let (request, file) = try download(body, url: "http://o/memory-only", into: cache, directory: directory)

            // Then the memory tier holds the bytes at once, whatever happens to the file
            let entry = try #require(cache.memory.peek(ResponseCache.key(for: request)))
            #expect(entry.stored == nil && entry.body == body)
            #expect(unlink(file) == 0)
            #expect(served(cache, request)?.body.bytes == body)
        }
    }

    @Test func keptBytesAreHeldAsTheyAre() throws {
        try withDirectory { directory in
            let cache = try cache(in: directory)
            let body = bytes(5_000, seed: 5)
            let (request, _) = try download(body, url: "http://o/small", into: cache, directory: directory, kept: true)
            let entry = try #require(cache.memory.peek(ResponseCache.key(for: request)))
            #expect(entry.stored == nil && entry.body == body)
        }
    }

    @Test func aKeptBodyLinkedFromItsDestinationIsNotHeldTwice() throws {
        try withDirectory { directory in
            // Given a small body the transfer kept, written to an unnamed file beside its destination
            let cache = try cache(in: directory)
            let body = bytes(8_192, seed: 8)

            // When both tiers store it, and the file is named at its destination
            let (request, returned) = try downloadKeptToDestination(body, url: "http://o/file", into: cache, directory: directory)

            // Then the bytes are handed back for the receipts, but the memory tier stands for the
            // disk tier's body file (the destination's inode) instead of holding them, and counts them
            #expect(returned == body)
            let key = ResponseCache.key(for: request)
            let entry = try #require(cache.memory.peek(key))
            let stored = try #require(entry.stored)
            #expect(entry.body.isEmpty && stored.length == body.count)
            #expect(cache.memory.usage >= body.count + MemoryCache.entryOverhead)
            var destination = stat()
            var linked = stat()
            #expect(stat(directory + "/dest", &destination) == 0 && stat(directory + "/cache/http/" + stored.name, &linked) == 0)
            #expect(destination.st_ino == linked.st_ino)

            // And its first hit serves the bytes from memory, read from that file
            let hit = try #require(served(cache, request))
            #expect(hit.tier == .memory && hit.body.bytes == body)
            #expect(cache.memory.peek(key)?.body == body)
        }
    }

    @Test func aKeptBodyWhoseDestinationChangedInPlaceIsNeverServed() throws {
        try withDirectory { directory in
            // Given a small kept body stored as the hard link of its destination
            let cache = try cache(in: directory)
            let body = bytes(4_000, seed: 9)
            let (request, _) = try downloadKeptToDestination(body, url: "http://o/changed", into: cache, directory: directory)

            // When the destination is rewritten in place before any hit
            let handle = try #require(FileHandle(forUpdatingAtPath: directory + "/dest"))
            try handle.write(contentsOf: Data([body[0] ^ 0xFF]))
            try handle.close()

            // Then neither tier serves the changed bytes: the lookup is a miss
            #expect(served(cache, request) == nil)
            #expect(cache.memory.peek(ResponseCache.key(for: request)) == nil)
        }
    }

    @Test func clearingTheDiskTierDropsTheMemoryEntriesStandingForItsFiles() throws {
        try withDirectory { directory in
            // Given one stored and one held memory entry
            let cache = try cache(in: directory)
            let (large, _) = try download(bytes(100_000, seed: 6), url: "http://o/a", into: cache, directory: directory)
            let small = bytes(1_000, seed: 7)
            let (kept, _) = try download(small, url: "http://o/b", into: cache, directory: directory, kept: true)

            // When only the disk tier is cleared
            _ = cache.clear(memory: false, disk: true)

            // Then the held entry still serves from memory, and the stored one is gone
            #expect(cache.memory.peek(ResponseCache.key(for: large)) == nil)
            #expect(served(cache, kept)?.tier == .memory)
            #expect(served(cache, kept)?.body.bytes == small)
            #expect(cache.memory.count == 1)
        }
    }
}
