import Foundation
import Testing

@testable import Courier
import Locking
import SQLite

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

    @Test func hashes() {
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
            #expect(b.bodyLength == 70_000)
            #expect(try #require(cache.read(key: "http://o/b")).body == fileBody)

            // And the small body is inline in Cache.db, the large one a file in http/
            let names = try FileManager.default.contentsOfDirectory(atPath: cache.path)
            #expect(names.count == 1)
            #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: cache.path + "/" + names[0]))) == fileBody)

            // And a body left in its file is placed in another directory, checked
            let file = try #require(cache.bodyFile(key: "http://o/b"))
            #expect(file.place(in: try DirectoryHandle(opening: directory), as: "copy.bin"))
            #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/copy.bin"))) == fileBody)

            // And usage counts heads and bodies, which a new instance finds again
            #expect(cache.count == 2)
            #expect(cache.usage > 80_000)
            #expect(cache.usage < 82_000)
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

    @Test func storedValidatorsAndVaryValuesKeepTheirBytes() throws {
        try withDirectory { directory in
            // Given a response whose entity tag and Vary'd value hold text that
            // Unicode equivalence would merge with other bytes
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            var stored = response(headers: [("etag", "\"e\u{301}\""), ("vary", "accept-language")])
            stored.varyValues = ["accept-language": "\u{E9}"]
            #expect(cache.store(key: "k", response: stored, body: [1]))

            // Then another process reads back the same bytes
            let read = try #require(try DiskCache(cacheDirectory: directory, capacity: 1 << 20).lookup(key: "k"))
            #expect(read.response.header("etag").map { Array($0.utf8) } == Array("\"e\u{301}\"".utf8))
            #expect(read.response.varyValues["accept-language"].map { Array($0.utf8) } == [0xC3, 0xA9])
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

    @Test func anEntryWhoseHeadIsTheJSONEarlierCouriersWroteIsServed() throws {
        try withDirectory { directory in
            // Given an entry whose head an earlier courier wrote as JSON text
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let body = bytes(5_000, seed: 4)
            cache.store(key: "k", response: response(), body: body)
            let text = Array(
                (#"{"digests":{},"headers":[["content-type","application/octet-stream"]],"key":"k","requestTime":1714564800.25,"#
                    + #""responseTime":1714564801.5,"status":200,"storedAt":1714564801.5,"url":"http://o/x","vary":{"accept":"*/*"}}"#).utf8)
            let database = try CacheRoot(testing: directory).database
            database.use { database throws(SQLiteError) in
                try database.run(
                    "UPDATE responses SET head = ?, head_checksum = ? WHERE key = ?",
                    [.blob(text), .integer(Int64(bitPattern: XXH3.hash(text))), .blob(Array("k".utf8))])
            }
            // Then it reads as the response it describes, with its body
            let read = try #require(cache.read(key: "k"))
            #expect(read.entry.response == response())
            #expect(read.body == body)
            // And a 304's update writes its head in the binary form, body kept
            var refreshed = response(headers: [("etag", "\"v2\"")])
            refreshed.responseTime = Date(timeIntervalSince1970: 1_800_000_000)
            #expect(cache.update(key: "k", response: refreshed))
            let head = database.use { database throws(SQLiteError) in
                try database.rows("SELECT head FROM responses WHERE key = ?", [.blob(Array("k".utf8))]).first?.first?.blob
            }
            #expect(head??.starts(with: StoredHead.magic) == true)
            #expect(try #require(cache.read(key: "k")).entry.response == refreshed)
        }
    }

    @Test func damagedRowsAndBodyFilesAreMissesAndRemoved() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let database = try CacheRoot(testing: directory).database
            func sql(_ statement: String, _ parameters: [SQLiteValue] = []) {
                database.use { database throws(SQLiteError) in try database.run(SQL(statement), parameters) }
            }
            func keyBytes(_ key: String) -> SQLiteValue { .blob(Array(key.utf8)) }

            // A flipped inline body byte: lookup takes the row, a read finds the checksum wrong
            cache.store(key: "flipped", response: response(), body: bytes(4_000, seed: 5))
            sql("UPDATE responses SET body = ? WHERE key = ?", [.blob(bytes(3_999, seed: 5) + [0]), keyBytes("flipped")])
            #expect(cache.lookup(key: "flipped") != nil)
            #expect(cache.read(key: "flipped") == nil)
            #expect(cache.lookup(key: "flipped") == nil)

            // A body file changed in place: lookup checks its length, a read its checksum
            cache.store(key: "file", response: response(), body: bytes(100_000, seed: 5))
            let name = try #require(FileManager.default.contentsOfDirectory(atPath: cache.path).first)
            let path = cache.path + "/" + name
            var contents = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            contents[contents.count - 1] ^= 1
            try Data(contents).write(to: URL(fileURLWithPath: path))
            #expect(cache.lookup(key: "file") != nil)
            #expect(cache.bodyFile(key: "file") == nil)
            #expect(!exists(path))
            #expect(cache.lookup(key: "file") == nil)

            // A body file gone, or cut short
            cache.store(key: "gone", response: response(), body: bytes(100_000, seed: 6))
            for name in try FileManager.default.contentsOfDirectory(atPath: cache.path) {
                try FileManager.default.removeItem(atPath: cache.path + "/" + name)
            }
            #expect(cache.lookup(key: "gone") == nil)

            // A head that is not courier's, a stored key that is another's, impossible lengths
            for (key, change) in [
                ("head", "UPDATE responses SET head = x'7b7d' WHERE key = ?"),
                ("checksum", "UPDATE responses SET head_checksum = head_checksum + 1 WHERE key = ?"),
                (
                    "other",
                    """
                    UPDATE responses SET (head, head_checksum) = (SELECT head, head_checksum FROM responses WHERE key = x'6865')
                    WHERE key = ?
                    """
                ),
                ("length", "UPDATE responses SET body_length = 1 << 40 WHERE key = ?"),
                ("negative", "UPDATE responses SET body_length = -1 WHERE key = ?"),
                ("text", "UPDATE responses SET body = 'x' WHERE key = ?"),
                ("both", "UPDATE responses SET body_file = 7 WHERE key = ?"),
            ] {
                cache.store(key: "he", response: response(), body: bytes(10, seed: 1))
                cache.store(key: key, response: response(), body: bytes(1_000, seed: 5))
                sql(change, [keyBytes(key)])
                #expect(cache.read(key: key) == nil, "\(key)")
                #expect(cache.lookup(key: key) == nil, "\(key)")
            }

            // Then only the row left intact counts
            #expect(cache.count == 1)
            #expect(cache.read(key: "he") != nil)
        }
    }

    @Test func bodyFilesNoRowNamesAndEarlierFormatsGoWhenOpened() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            cache.store(key: "kept", response: response(), body: bytes(100_000, seed: 5))
            let kept = try FileManager.default.contentsOfDirectory(atPath: cache.path)
            // Given a body file no row names (a writer died between its link and its commit),
            // an entry and body file of the earlier format, a temporary file, a directory
            let stray = ["00000000000000aa", String(repeating: "a", count: 64), String(repeating: "a", count: 64) + ".0000000000000001",
                ".tmp-1-1", "notes"]
            for name in stray { #expect(FileManager.default.createFile(atPath: cache.path + "/" + name, contents: Data([1]))) }
            try FileManager.default.createDirectory(atPath: cache.path + "/sub", withIntermediateDirectories: false)

            // When another instance opens the directory
            let reopened = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)

            // Then only the named body file is left, and its entry still reads
            #expect(try FileManager.default.contentsOfDirectory(atPath: cache.path) == kept)
            #expect(reopened.read(key: "kept")?.body == bytes(100_000, seed: 5))
        }
    }

    @Test func evictsLeastRecentlyUsedDownToTheEvictionTarget() throws {
        try withDirectory { directory in
            // Given room for 7 entries of 1,000-byte bodies (each head and body ~1,230 bytes)
            let cache = try DiskCache(cacheDirectory: directory, capacity: 9_000)
            let keys = (0..<8).map { "http://o/\($0)" }
            for key in keys.prefix(7) {
                #expect(cache.store(key: key, response: response(key), body: bytes(1_000, seed: 1)))
            }
            let entrySize = cache.usage / 7
            #expect(cache.usage <= 9_000)

            // When the oldest is read, then an eighth entry goes over the capacity
            #expect(cache.read(key: keys[0]) != nil)
            cache.store(key: keys[7], response: response(keys[7]), body: bytes(1_000, seed: 1))

            // Then the least recently used go, oldest first, until usage is at most 80%
            #expect(cache.usage <= 7_200)
            let survivors = keys.filter { cache.lookup(key: $0) != nil }
            let evicted = Int((8 * entrySize - 7_200 + entrySize - 1) / entrySize)
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
            #expect(cache.read(key: "fits") != nil)
        }
    }

    @Test func concurrentWritersOnOverlappingKeys() throws {
        try withDirectory { directory in
            // Given two caches on one directory, as two processes would have, small enough to evict
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
            // And usage stays within the capacity, every body file named by a row
            #expect(caches[0].usage <= 400_000)
            let files = try FileManager.default.contentsOfDirectory(atPath: caches[0].path)
            #expect(try DiskCache(cacheDirectory: directory, capacity: 400_000).count == caches[0].count)
            #expect(try FileManager.default.contentsOfDirectory(atPath: caches[0].path).sorted() == files.sorted())
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
