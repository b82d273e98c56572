import Foundation
import Testing

@testable import Courier
import Locking

@Suite(.timeLimit(.minutes(1)))
struct DiskCacheTests {
    /// A fresh directory, removed when the test's `body` returns.
    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-disk-cache-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    private func response(_ url: String = "http://o/x", headers: [(name: String, value: String)] = []) -> CachedResponse {
        CachedResponse(
            status: 200, headers: [("content-type", "application/octet-stream")] + headers, url: url,
            requestTime: Date(timeIntervalSince1970: 1_714_564_800.25), responseTime: Date(timeIntervalSince1970: 1_714_564_801.5),
            varyValues: ["accept": "*/*"])
    }

    private func bytes(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed }
    }

    private func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    private func pause() { usleep(20_000) }

    @Test func hashes() {
        #expect(DiskCache.entryName(for: "") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(DiskCache.entryName(for: "abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            DiskCache.entryName(for: String(repeating: "a", count: 1000))
                == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
        #expect(XXH3.hash([]) == 0x2D06_8005_38D3_94C2)
        #expect(XXH3.hash(Array("abc".utf8)) == 0x78AF_5F94_892F_3950)
        // Fed in pieces, the same digest as at once
        let data = bytes(1000, seed: 3)
        let pieces = XXH3()
        for range in [0..<1, 1..<33, 33..<40, 40..<97, 97..<1000] { pieces.update(Array(data[range])) }
        #expect(pieces.finalize() == XXH3.hash(data))
    }

    @Test func roundTrip() throws {
        try withDirectory { directory in
            // Given a cache with one entry stored from bytes and one from a file
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let body = bytes(10_000, seed: 1)
            #expect(cache.store(key: "http://o/a", response: response("http://o/a"), body: body))
            let source = directory + "/source"
            let fileBody = bytes(70_000, seed: 2)
            try Data(fileBody).write(to: URL(fileURLWithPath: source))
            #expect(cache.store(key: "http://o/b", response: response("http://o/b2"), bodyFile: source))

            // Then both read back whole, with their metadata
            let a = try #require(cache.read(key: "http://o/a"))
            #expect(a.body == body)
            #expect(a.entry.response == response("http://o/a"))
            #expect(a.entry.bodyLength == 10_000)
            let b = try #require(cache.lookup(key: "http://o/b"))
            #expect(b.response.url == "http://o/b2")
            #expect(b.path == cache.path + "/" + DiskCache.entryName(for: "http://o/b"))
            #expect(b.bodyPath.hasPrefix(b.path + "."))
            #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: b.bodyPath))) == fileBody)

            // And a body left in its file is placed in another directory, checked
            let file = try #require(cache.bodyFile(key: "http://o/b"))
            #expect(file.place(in: try DirectoryHandle(opening: directory), as: "copy.bin"))
            #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/copy.bin"))) == fileBody)

            // And usage counts the entry and body files, which a new instance finds again
            #expect(cache.count == 2)
            let sizes = try [a.entry.path, a.entry.bodyPath, b.path, b.bodyPath].map {
                try FileManager.default.attributesOfItem(atPath: $0)[.size] as! Int
            }
            #expect(sizes.reduce(0, +) == 10_000 + 70_000 + sizes[0] + sizes[2])
            #expect(cache.usage == Int64(sizes.reduce(0, +)))
            let reopened = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            #expect((reopened.count, reopened.usage) == (2, cache.usage))
            #expect(reopened.read(key: "http://o/a")?.body == body)

            // And missing keys, removal and clearing behave
            #expect(cache.read(key: "http://o/none") == nil)
            #expect(cache.remove(key: "http://o/a"))
            #expect(cache.read(key: "http://o/a") == nil)
            #expect(cache.count == 1)
            cache.removeAll()
            #expect((cache.count, cache.usage) == (0, 0))
            #expect(cache.lookup(key: "http://o/b") == nil)
        }
    }

    @Test func updateKeepsTheBody() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let body = bytes(5_000, seed: 9)
            cache.store(key: "k", response: response(), body: body)
            var refreshed = response(headers: [("etag", "\"v2\"")])
            refreshed.responseTime = Date(timeIntervalSince1970: 1_800_000_000)
            #expect(cache.update(key: "k", response: refreshed))
            let read = try #require(cache.read(key: "k"))
            #expect(read.entry.response == refreshed)
            #expect(read.body == body)
            #expect(cache.update(key: "missing", response: refreshed) == false)
        }
    }

    @Test func corruptEntriesAreMissesAndRemoved() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let body = bytes(4_000, seed: 5)
            func fresh(_ key: String) -> String {
                cache.store(key: key, response: response(), body: body)
                return cache.filePath(for: key)
            }
            func bodyFile(_ key: String) throws -> String { try #require(cache.lookup(key: key)).bodyPath }
            func mutate(_ path: String, _ change: (inout [UInt8]) -> Void) throws {
                var contents = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
                change(&contents)
                try Data(contents).write(to: URL(fileURLWithPath: path))
            }

            // A truncated entry file: it goes, and the body file its header names
            let truncated = fresh("truncated")
            let truncatedBody = try bodyFile("truncated")
            try mutate(truncated) { $0.removeLast(100) }
            #expect(cache.read(key: "truncated") == nil)
            #expect(!exists(truncated))
            #expect(!exists(truncatedBody))

            // A flipped body byte: lookup checks the body file's length, read its checksum too
            let flipped = fresh("flipped")
            let flippedBody = try bodyFile("flipped")
            try mutate(flippedBody) { $0[$0.count - 10] ^= 0x40 }
            #expect(cache.lookup(key: "flipped") != nil)
            #expect(cache.read(key: "flipped") == nil)
            #expect(!exists(flipped))
            #expect(!exists(flippedBody))

            // The same for a body checked in bounded chunks and left in its file
            let copied = fresh("copied")
            let copiedBody = try bodyFile("copied")
            try mutate(copiedBody) { $0[$0.count - 1] ^= 1 }
            #expect(cache.lookup(key: "copied") != nil)
            #expect(cache.bodyFile(key: "copied") == nil)
            #expect(!exists(copied))
            #expect(!exists(copiedBody))

            // A flipped metadata byte
            let metadata = fresh("metadata")
            try mutate(metadata) { $0[DiskCacheEntry.headerLength + 3] ^= 0x01 }
            #expect(cache.lookup(key: "metadata") == nil)
            #expect(!exists(metadata))

            // Garbage, and an empty file
            let garbage = cache.filePath(for: "garbage")
            try Data(bytes(3_000, seed: 77)).write(to: URL(fileURLWithPath: garbage))
            #expect(cache.read(key: "garbage") == nil)
            #expect(!exists(garbage))
            let empty = cache.filePath(for: "empty")
            #expect(FileManager.default.createFile(atPath: empty, contents: nil))
            #expect(cache.lookup(key: "empty") == nil)
            #expect(!exists(empty))

            // An intact entry under another key's name: its body file is left to the sweep
            let misplaced = fresh("real")
            let misplacedBody = try bodyFile("real")
            try FileManager.default.moveItem(atPath: misplaced, toPath: cache.filePath(for: "other"))
            #expect(cache.read(key: "other") == nil)
            #expect(!exists(cache.filePath(for: "other")))

            cache.sweep()
            #expect((cache.count, cache.usage) == (0, 4_000))
            #expect(try FileManager.default.contentsOfDirectory(atPath: cache.path) == [(misplacedBody as NSString).lastPathComponent])
            let sweeper = try DiskCache(cacheDirectory: directory, capacity: 1 << 20, orphanAge: 0)
            #expect((sweeper.count, sweeper.usage) == (0, 0))
            #expect(try FileManager.default.contentsOfDirectory(atPath: cache.path).isEmpty)
        }
    }

    @Test func evictsLeastRecentlyUsedDownToTheSweepTarget() throws {
        try withDirectory { directory in
            // Given room for about 7 entries of 1,000-byte bodies (each entry and body ~1,300 bytes)
            let cache = try DiskCache(cacheDirectory: directory, capacity: 10_000)
            let keys = (0..<8).map { "http://o/\($0)" }
            for key in keys.prefix(7) {
                #expect(cache.store(key: key, response: response(key), body: bytes(1_000, seed: 1)))
                pause()
            }
            let entrySize = cache.usage / 7
            #expect(cache.usage <= 10_000)

            // When the oldest is read, then an eighth entry goes over the capacity
            #expect(cache.read(key: keys[0]) != nil)
            pause()
            cache.store(key: keys[7], response: response(keys[7]), body: bytes(1_000, seed: 1))

            // Then the least recently used go, oldest first, until usage is at most 80%
            #expect(cache.usage <= 8_000)
            let survivors = keys.filter { cache.lookup(key: $0) != nil }
            let evicted = Int((8 * entrySize - 8_000 + entrySize - 1) / entrySize)
            #expect(survivors == [keys[0]] + Array(keys[(1 + evicted)...]))
            #expect(cache.count == survivors.count)
        }
    }

    @Test func refusesBodiesOverAnEighthOfTheCapacity() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 80_000)
            #expect(cache.maximumBodyLength == 10_000)
            #expect(cache.store(key: "fits", response: response(), body: bytes(10_000, seed: 1)))
            cache.store(key: "big", response: response(), body: bytes(1_000, seed: 1))
            #expect(!cache.store(key: "big", response: response(), body: bytes(10_001, seed: 1)))
            #expect(cache.lookup(key: "big") == nil)
            let source = directory + "/big"
            try Data(bytes(10_001, seed: 1)).write(to: URL(fileURLWithPath: source))
            #expect(!cache.store(key: "big", response: response(), bodyFile: source))
            #expect(cache.count == 1)
            let names = try FileManager.default.contentsOfDirectory(atPath: cache.path).sorted()
            #expect(names.count == 2)
            #expect(names.first == DiskCache.entryName(for: "fits"))
            #expect(names.last?.hasPrefix(DiskCache.entryName(for: "fits") + ".") == true)
        }
    }

    @Test func sweepsAbandonedTemporaryFiles() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let old = cache.path + "/.tmp-\(getpid())-1000001"
            let young = cache.path + "/.tmp-\(getpid())-1000002"
            let stray = cache.path + "/notes.txt"
            let orphan = cache.path + "/.tmp-2000000000-7"
            for path in [old, young, stray, orphan] { #expect(FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3]))) }
            let twoHoursAgo = Date(timeIntervalSinceNow: -7_200)
            for path in [old, stray] {
                try FileManager.default.setAttributes([.modificationDate: twoHoursAgo], ofItemAtPath: path)
            }
            cache.sweep()
            #expect(!exists(old))
            #expect(!exists(stray))
            #expect(!exists(orphan))
            #expect(exists(young))
            #expect(cache.count == 0)
        }
    }

    @Test func concurrentWritersOnOverlappingKeys() throws {
        try withDirectory { directory in
            // Given two caches on one directory, as two processes would have, small enough to sweep
            let caches = try (0..<2).map { _ in try DiskCache(cacheDirectory: directory, capacity: 400_000) }
            let keys = (0..<12).map { "http://o/shared/\($0)" }
            let bad = Locked(0)
            let served = Locked(0)

            // When eight threads store and read the same keys at once
            DispatchQueue.concurrentPerform(iterations: 8) { worker in
                let cache = caches[worker % 2]
                for round in 0..<60 {
                    let key = keys[(worker * 5 + round) % keys.count]
                    if round % 2 == 0 {
                        let body = Self.selfDescribing(key: key, worker: worker, round: round)
                        cache.store(key: key, response: response(key), body: body)
                    }
                    // Then every body read back is one some writer stored for that key
                    if let hit = cache.read(key: key) {
                        served.withLock { $0 += 1 }
                        if !Self.isValid(hit.body, key: key) || hit.entry.response.url != key { bad.withLock { $0 += 1 } }
                    }
                }
            }
            #expect(bad.withLock { $0 } == 0)
            #expect(served.withLock { $0 } > 0)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: caches[0].path).filter { $0.hasPrefix(".") }
            #expect(leftovers.isEmpty)
            caches[0].sweep()
            #expect(caches[0].usage <= 400_000)
            for key in keys {
                if let hit = caches[1].read(key: key) { #expect(Self.isValid(hit.body, key: key)) }
            }
        }
    }

    /// A body that names its key and repeats a pattern seeded by its writer.
    private static func selfDescribing(key: String, worker: Int, round: Int) -> [UInt8] {
        let seed = UInt8(truncatingIfNeeded: worker * 61 + round)
        let prefix = Array("\(key)|\(seed)|".utf8)
        let length = 2_000 + (worker * 977 + round * 131) % 30_000
        return prefix + (0..<length).map { UInt8(truncatingIfNeeded: $0 * 7) ^ seed }
    }

    private static func isValid(_ body: [UInt8], key: String) -> Bool {
        let text = String(decoding: body.prefix(200), as: UTF8.self)
        let fields = text.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
        guard fields.count == 3, fields[0] == key, let seed = UInt8(fields[1]) else { return false }
        let prefixLength = fields[0].utf8.count + fields[1].utf8.count + 2
        let rest = body[prefixLength...]
        return rest.enumerated().allSatisfy { $0.element == UInt8(truncatingIfNeeded: $0.offset * 7) ^ seed }
    }
}
