import Foundation
import Testing

@testable import Courier

/// The disk tier's body files: hard links of the stored file when they can
/// be, copies otherwise, and never trusted beyond their length and checksum.
@Suite(.timeLimit(.minutes(1)))
struct DiskCacheBodyFileTests {
    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-disk-body-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    private func response(_ url: String = "http://o/x") -> CachedResponse {
        CachedResponse(
            status: 200, headers: [("content-type", "application/octet-stream")], url: url,
            requestTime: Date(timeIntervalSince1970: 1_714_564_800), responseTime: Date(timeIntervalSince1970: 1_714_564_801))
    }

    private func bytes(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 13) ^ seed }
    }

    private func info(_ path: String) -> stat? {
        var result = stat()
        return lstat(path, &result) == 0 ? result : nil
    }

    private func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        chmod(path, mode)
    }

    private func names(_ cache: DiskCache) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: cache.path)) ?? []).sorted()
    }

    @Test func storingAFileLinksItsInode() throws {
        try withDirectory { directory in
            // Given a downloaded file beside its destination, on the cache's file system
            let cache = try DiskCache(cacheDirectory: directory + "/cache", capacity: 1 << 20)
            let downloaded = directory + "/.dest.partial"
            let body = bytes(50_000, seed: 1)
            try write(body, to: downloaded)

            // When it is stored, then renamed to its destination
            #expect(cache.store(key: "k", response: response(), bodyFile: downloaded))
            #expect(rename(downloaded, directory + "/dest") == 0)

            // Then the body file is the destination's inode, and the entry file holds no body
            let entry = try #require(cache.lookup(key: "k"))
            let destination = try #require(info(directory + "/dest"))
            let stored = try #require(info(entry.bodyPath))
            #expect((stored.st_ino, stored.st_dev) == (destination.st_ino, destination.st_dev))
            #expect(destination.st_nlink == 2)
            #expect(try #require(info(entry.path)).st_size < 1_000)
            #expect(try #require(info(entry.path)).st_mode & 0o777 == 0o600)
            #expect(cache.read(key: "k")?.body == body)

            // And usage counts the body once, beside the entry file
            #expect(cache.usage == Int64(body.count) + Int64(try #require(info(entry.path)).st_size))

            // And a hit leaves the client's file alone: recency lives on the entry file
            let before = try #require(info(directory + "/dest")).st_mtim
            let touched = try #require(info(entry.path)).st_mtim
            usleep(20_000)
            #expect(cache.read(key: "k") != nil)
            #expect(try #require(info(directory + "/dest")).st_mtim.tv_nsec == before.tv_nsec)
            #expect(try #require(info(entry.path)).st_mtim.tv_nsec != touched.tv_nsec)
        }
    }

    @Test func changesToTheSharedInodeAreCaughtAndTheEntryDropped() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory + "/cache", capacity: 1 << 20)
            let body = bytes(20_000, seed: 2)
            func linked(_ key: String) throws -> (destination: String, entry: DiskCacheEntry) {
                let destination = directory + "/" + key
                try write(body, to: destination)
                #expect(cache.store(key: key, response: response(), bodyFile: destination))
                return (destination, try #require(cache.lookup(key: key)))
            }

            // A byte rewritten in place: the length holds, the checksum does not
            let rewritten = try linked("rewritten")
            let handle = try #require(FileHandle(forUpdatingAtPath: rewritten.destination))
            try handle.seek(toOffset: 5_000)
            try handle.write(contentsOf: Data([body[5_000] ^ 0xFF]))
            try handle.close()
            #expect(cache.lookup(key: "rewritten") != nil)
            #expect(cache.read(key: "rewritten") == nil)
            #expect(cache.lookup(key: "rewritten") == nil)
            #expect(info(rewritten.entry.path) == nil && info(rewritten.entry.bodyPath) == nil)
            #expect(info(rewritten.destination)?.st_nlink == 1)

            // Appended to, and truncated: the length is checked on every open
            let appended = try linked("appended")
            let appending = try #require(FileHandle(forUpdatingAtPath: appended.destination))
            try appending.seekToEnd()
            try appending.write(contentsOf: Data([1]))
            try appending.close()
            #expect(cache.lookup(key: "appended") == nil)
            let truncated = try linked("truncated")
            #expect(truncate(truncated.destination, 100) == 0)
            #expect(cache.bodyFile(key: "truncated") == nil)

            // And the client's files are as the client left them
            #expect(info(appended.destination)?.st_size == 20_001)
            #expect(info(truncated.destination)?.st_size == 100)
            #expect(cache.count == 0)
            #expect(cache.usage == 0)
        }
    }

    @Test func aFileThatCannotBeLinkedIsCopied() throws {
        // /dev/shm is tmpfs: a link from there into a cache elsewhere fails with EXDEV
        var shm = stat()
        var tmp = stat()
        guard stat("/dev/shm", &shm) == 0, stat(NSTemporaryDirectory(), &tmp) == 0, shm.st_dev != tmp.st_dev else { return }
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let source = "/dev/shm/courier-disk-body-\(getpid())-\(UUID().uuidString)"
            defer { unlink(source) }
            let body = bytes(30_000, seed: 3)
            try write(body, to: source)
            #expect(cache.store(key: "k", response: response(), bodyFile: source))
            let entry = try #require(cache.lookup(key: "k"))
            let stored = try #require(info(entry.bodyPath))
            #expect(stored.st_ino != (try #require(info(source))).st_ino)
            #expect(stored.st_mode & 0o777 == 0o600)
            // A change to the source no longer reaches the cache
            try write(bytes(30_000, seed: 4), to: source)
            #expect(cache.read(key: "k")?.body == body)
        }
    }

    @Test func replacingAndUpdatingKeepOneBodyFile() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let name = DiskCache.entryName(for: "k")
            cache.store(key: "k", response: response(), body: bytes(1_000, seed: 1))
            let first = try #require(cache.lookup(key: "k"))

            // A 304's update rewrites the entry file and keeps the body file
            var refreshed = response()
            refreshed.responseTime = Date(timeIntervalSince1970: 1_800_000_000)
            let bodyInode = try #require(info(first.bodyPath)).st_ino
            let entryInode = try #require(info(first.path)).st_ino
            #expect(cache.update(key: "k", response: refreshed))
            let updated = try #require(cache.lookup(key: "k"))
            #expect(updated.bodyPath == first.bodyPath && info(updated.bodyPath)?.st_ino == bodyInode)
            #expect(info(updated.path)?.st_ino != entryInode)
            #expect(updated.response == refreshed)

            // A new body replaces the old body file
            cache.store(key: "k", response: response(), body: bytes(2_000, seed: 2))
            let replaced = try #require(cache.lookup(key: "k"))
            #expect(replaced.bodyPath != first.bodyPath)
            #expect(names(cache) == [name, (replaced.bodyPath as NSString).lastPathComponent].sorted())
            #expect(cache.count == 1)
            #expect(cache.usage == 2_000 + Int64(try #require(info(replaced.path)).st_size))

            // And remove deletes both
            #expect(cache.remove(key: "k"))
            #expect(names(cache).isEmpty)
            #expect((cache.count, cache.usage) == (0, 0))
        }
    }

    @Test func bodyFilesThatAreNotRegularFilesAreMisses() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let body = bytes(500, seed: 5)
            let outside = directory + "/outside"
            try write(body, to: outside)
            let kinds: [(String, (String) -> Void)] = [
                ("symlink", { symlink(outside, $0) }),
                ("fifo", { mkfifo($0, 0o600) }),
                ("directory", { mkdir($0, 0o700) }),
                ("missing", { _ in }),
            ]
            for (key, make) in kinds {
                // Given an entry whose body file was replaced by something else
                cache.store(key: key, response: response(), body: body)
                let entry = try #require(cache.lookup(key: key))
                #expect(unlink(entry.bodyPath) == 0)
                make(entry.bodyPath)

                // Then it is a miss that drops the entry file, without blocking on a FIFO
                #expect(cache.read(key: key) == nil, "\(key)")
                #expect(info(entry.path) == nil, "\(key)")
                #expect(cache.lookup(key: key) == nil, "\(key)")

                // And a new store for the key works
                #expect(cache.store(key: key, response: response(), body: body), "\(key)")
                #expect(cache.read(key: key)?.body == body, "\(key)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: outside)) == Data(body))
        }
    }

    @Test func sweepsBodiesNoEntryNamesOnceOldEnough() throws {
        try withDirectory { directory in
            let young = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            young.store(key: "kept", response: response(), body: bytes(700, seed: 1))
            let kept = try #require(young.lookup(key: "kept"))
            // Given an orphan beside a live entry (two body files under one
            // entry name), one whose entry is gone, and a stray name
            let stray = kept.path + ".00000000000000aa"
            let lost = young.path + "/" + DiskCache.entryName(for: "lost") + ".00000000000000bb"
            let foreign = young.path + "/" + DiskCache.entryName(for: "x") + ".short"
            for file in [stray, lost, foreign] { try write(bytes(300, seed: 2), to: file, mode: 0o600) }

            // When a sweep finds them younger than the orphan age, they stay and count
            young.sweep()
            #expect(info(stray) != nil && info(lost) != nil)
            #expect(young.count == 1)
            #expect(young.usage == 700 + 600 + Int64(try #require(info(kept.path)).st_size))

            // Then a sweep with no grace deletes both orphans, keeps the named body, and the foreign file until it is abandoned
            let sweeper = try DiskCache(cacheDirectory: directory, capacity: 1 << 20, orphanAge: 0)
            sweeper.waitForFirstSweep()
            #expect(info(stray) == nil && info(lost) == nil)
            #expect(info(foreign) != nil)
            #expect(sweeper.read(key: "kept")?.body == bytes(700, seed: 1))
            #expect(sweeper.usage == 700 + Int64(try #require(info(kept.path)).st_size))

            // And removeAll deletes entry and body files, and nothing else
            sweeper.removeAll()
            #expect(names(sweeper) == [(foreign as NSString).lastPathComponent])
        }
    }

    @Test func evictionDeletesTheBodyWithItsEntry() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 16_000)
            for index in 0..<12 {
                cache.store(key: "k\(index)", response: response(), body: bytes(1_500, seed: UInt8(index)))
                usleep(5_000)
            }
            // Then no body file outlives its entry, and usage is what is on disk
            let files = names(cache)
            let entries = files.filter { $0.utf8.count == 64 }
            let bodies = files.filter { $0.utf8.count == 81 }
            #expect(entries.count == cache.count && bodies.count == entries.count)
            #expect(Set(bodies.map { String($0.prefix(64)) }) == Set(entries))
            let onDisk = files.compactMap { info(cache.path + "/" + $0) }.map { Int64($0.st_size) }.reduce(0, +)
            #expect(cache.usage == onDisk && onDisk <= 16_000)
            #expect(cache.lookup(key: "k11") != nil && cache.lookup(key: "k0") == nil)
        }
    }

    @Test func entryFilesOfTheEarlierFormatAreMisses() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            // A version-1 entry: a 40-byte header, the metadata, then the body inline
            let metadata = DiskCacheEntry.metadata(key: "old", response: response())
            let body = bytes(100, seed: 1)
            var file = DiskCacheEntry.magic
            for field in [UInt64(1) | UInt64(metadata.count) << 32, UInt64(body.count), XXH3.hash(metadata), XXH3.hash(body)] {
                withUnsafeBytes(of: field.littleEndian) { file.append(contentsOf: $0) }
            }
            try write(file + metadata + body, to: cache.filePath(for: "old"), mode: 0o600)
            #expect(cache.lookup(key: "old") == nil)
            #expect(info(cache.filePath(for: "old")) == nil)
        }
    }
}

extension DiskCacheBodyFileTests {
    @Test func entryFilesOfVersionTwoAreMissesAndGo() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            #expect(cache.store(key: "k", response: response(), body: bytes(100, seed: 2)))
            #expect(cache.lookup(key: "k") != nil)
            // The same entry as version 2 wrote it (XXH64 checksums): the version alone turns it away
            var file = try #require(FileManager.default.contents(atPath: cache.filePath(for: "k"))).map { $0 }
            withUnsafeBytes(of: UInt32(2).littleEndian) { file.replaceSubrange(8..<12, with: $0) }
            try write(file, to: cache.filePath(for: "k"), mode: 0o600)
            #expect(cache.lookup(key: "k") == nil)
            #expect(info(cache.filePath(for: "k")) == nil)
        }
    }

    @Test func oneOpeningServesTheEntryAndItsBody() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let body = bytes(3_000, seed: 7)
            cache.store(key: "k", response: response("http://o/k"), body: body)

            // The entry without its body leaves recency alone
            let entry = try #require(cache.lookup(key: "k"))
            let before = try #require(info(entry.path)).st_mtim
            usleep(20_000)
            #expect(cache.withEntry(key: "k") { found, _ in found.response.url } == "http://o/k")
            #expect(try #require(info(entry.path)).st_mtim.tv_nsec == before.tv_nsec)

            // Its body, verified, makes it the most recently used: in memory
            // up to the caller's bound, else left in its file
            let held = cache.withEntry(key: "k") { _, load -> [UInt8]? in
                guard case .bytes(let bytes)? = load(3_000) else { return nil }
                return bytes
            }
            #expect(held == .some(body))
            #expect(try #require(info(entry.path)).st_mtim.tv_nsec != before.tv_nsec)
            let left = cache.withEntry(key: "k") { _, load -> StoredBodyFile? in
                guard case .file(let file)? = load(2_999) else { return nil }
                return file
            }
            let file = try #require(left ?? nil)
            #expect(file.length == 3_000 && file.read() == body)

            // A body that fails its check is nil either way, and the entry goes
            for limit: Int64 in [3_000, 0] {
                cache.store(key: "k", response: response("http://o/k"), body: body)
                let bodyPath = try #require(cache.lookup(key: "k")).bodyPath
                let handle = try #require(FileHandle(forUpdatingAtPath: bodyPath))
                try handle.write(contentsOf: Data([body[0] ^ 1]))
                try handle.close()
                let loaded = cache.withEntry(key: "k") { _, load in load(limit) == nil }
                #expect(loaded == true)
                #expect(cache.withEntry(key: "k") { _, _ in true } == nil)
                #expect(info(entry.path) == nil && info(bodyPath) == nil)
            }
        }
    }
}

/// Bodies described by what a transfer wrote: their length and checksum are
/// taken as given, never by reading the file back.
extension DiskCacheBodyFileTests {
    private func streamed(_ directory: String, _ name: String, _ body: [UInt8], keeping: Bool = false) throws -> CacheBodyFile {
        CacheBodyFile(
            directory: try DirectoryHandle(opening: directory), name: name, length: Int64(body.count),
            checksum: XXH3.hash(body), bytes: keeping ? body : nil)
    }

    @Test func aStreamedBodyIsLinkedWithTheChecksumItCameWith() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory + "/cache", capacity: 1 << 20)
            let body = bytes(40_000, seed: 8)
            try write(body, to: directory + "/.a.partial")

            // Given the file as it was written: linked, and read back whole
            #expect(cache.store(key: "a", response: response(), file: try streamed(directory, ".a.partial", body)))
            let entry = try #require(cache.lookup(key: "a"))
            #expect(info(entry.bodyPath)?.st_ino == info(directory + "/.a.partial")?.st_ino)
            #expect(cache.read(key: "a")?.body == body)

            // When another file was renamed over the name before it was linked
            // (same length, other bytes), the entry is stored but never served
            try write(bytes(40_000, seed: 9), to: directory + "/.b.partial")
            #expect(cache.store(key: "b", response: response(), file: try streamed(directory, ".b.partial", body)))
            #expect(cache.read(key: "b") == nil)
            #expect(cache.lookup(key: "b") == nil)
            // And one of another length is not even an entry
            try write(bytes(100, seed: 9), to: directory + "/.c.partial")
            #expect(cache.store(key: "c", response: response(), file: try streamed(directory, ".c.partial", body)))
            #expect(cache.lookup(key: "c") == nil)
            #expect(cache.count == 1)
        }
    }

    @Test func aStreamedBodyThatCannotBeLinkedIsCopiedFromItsKeptBytesOrCheckedFile() throws {
        // /dev/shm is tmpfs: a link from there into a cache elsewhere fails with EXDEV
        var shm = stat()
        var tmp = stat()
        guard stat("/dev/shm", &shm) == 0, stat(NSTemporaryDirectory(), &tmp) == 0, shm.st_dev != tmp.st_dev else { return }
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let name = "courier-disk-body-\(getpid())-\(UUID().uuidString)"
            defer { unlink("/dev/shm/" + name) }
            let body = bytes(30_000, seed: 5)
            let other = bytes(30_000, seed: 6)

            // Kept bytes are written as they are: the file is not read
            try write(other, to: "/dev/shm/" + name)
            #expect(cache.store(key: "kept", response: response(), file: try streamed("/dev/shm", name, body, keeping: true)))
            #expect(cache.read(key: "kept")?.body == body)

            // Without them the file is copied, and one that no longer hashes to the checksum is refused
            #expect(!cache.store(key: "changed", response: response(), file: try streamed("/dev/shm", name, body)))
            #expect(cache.lookup(key: "changed") == nil)
            #expect(names(cache).count == 2)
            try write(body, to: "/dev/shm/" + name)
            #expect(cache.store(key: "copied", response: response(), file: try streamed("/dev/shm", name, body)))
            #expect(cache.read(key: "copied")?.body == body)
        }
    }

    @Test func aCacheFarFromFullIsNotRescannedAfterEveryFewWrites() throws {
        try withDirectory { directory in
            // Given two caches on one directory, as two processes would have
            let mine = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let other = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            for index in 0..<10 { other.store(key: "other\(index)", response: response(), body: bytes(10_000, seed: 1)) }

            // When this one writes more than `rescanInterval` small entries, far
            // less than a quarter of the room left, it counts only its own
            for index in 0..<(DiskCache.rescanInterval + 6) {
                mine.store(key: "mine\(index)", response: response(), body: bytes(1_000, seed: 2))
            }
            #expect(mine.count == DiskCache.rescanInterval + 6)

            // Then once its writes reach a quarter of the room left, it rescans and counts the other's too
            var large = 0
            while mine.count < DiskCache.rescanInterval + 6 + large + 10, large < 20 {
                mine.store(key: "large\(large)", response: response(), body: bytes(60_000, seed: 3))
                large += 1
            }
            #expect(mine.count == DiskCache.rescanInterval + 6 + large + 10)
            #expect(large > 1 && large < 6)
        }
    }
}
