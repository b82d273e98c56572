import Foundation
import Testing

@testable import Courier

/// The disk tier's body files, for bodies too large to keep inline: hard
/// links of the stored file when they can be, copies otherwise, and never
/// trusted beyond their length and checksum.
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

    /// The path of the one body file in `cache`.
    private func bodyPath(_ cache: DiskCache) throws -> String {
        let names = names(cache)
        try #require(names.count == 1)
        return cache.path + "/" + names[0]
    }

    /// Longer than what is kept inline.
    private let size = ResponseStore.inlineLimit + 1_000

    @Test func storingAFileLinksItsInode() throws {
        try withDirectory { directory in
            // Given a downloaded file beside its destination, on the cache's file system
            let cache = try DiskCache(cacheDirectory: directory + "/cache", capacity: 1 << 20)
            let downloaded = directory + "/.dest.partial"
            let body = bytes(size, seed: 1)
            try write(body, to: downloaded)

            // When it is stored, then renamed to its destination
            #expect(cache.store(key: "k", response: response(), bodyFile: downloaded))
            #expect(rename(downloaded, directory + "/dest") == 0)

            // Then the body file is the destination's inode
            let destination = try #require(info(directory + "/dest"))
            let stored = try #require(info(try bodyPath(cache)))
            #expect((stored.st_ino, stored.st_dev) == (destination.st_ino, destination.st_dev))
            #expect(destination.st_nlink == 2)
            #expect(cache.read(key: "k")?.body == body)
            #expect(try #require(info(directory + "/cache/Cache.db")).st_mode & 0o777 == 0o600)
            #expect(try #require(info(directory + "/cache/http")).st_mode & 0o777 == 0o700)

            // And usage counts the body once, with its head
            #expect(cache.usage > Int64(body.count) && cache.usage < Int64(body.count) + 1_000)

            // And a hit leaves the client's file alone: recency lives in the row
            let before = try #require(info(directory + "/dest")).st_mtim
            usleep(20_000)
            #expect(cache.read(key: "k") != nil)
            #expect(try #require(info(directory + "/dest")).st_mtim.tv_nsec == before.tv_nsec)
        }
    }

    @Test func changesToTheSharedInodeAreCaughtAndTheEntryDropped() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory + "/cache", capacity: 1 << 20)
            let body = bytes(size, seed: 2)
            func linked(_ key: String) throws -> String {
                let destination = directory + "/" + key
                try write(body, to: destination)
                #expect(cache.store(key: key, response: response(), bodyFile: destination))
                return destination
            }

            // A byte rewritten in place: the length holds, the checksum does not
            let rewritten = try linked("rewritten")
            let handle = try #require(FileHandle(forUpdatingAtPath: rewritten))
            try handle.seek(toOffset: 5_000)
            try handle.write(contentsOf: Data([body[5_000] ^ 0xFF]))
            try handle.close()
            #expect(cache.lookup(key: "rewritten") != nil)
            #expect(cache.read(key: "rewritten") == nil)
            #expect(cache.lookup(key: "rewritten") == nil)
            #expect(info(rewritten)?.st_nlink == 1)

            // Appended to, and truncated: the length is checked on every open
            let appended = try linked("appended")
            let appending = try #require(FileHandle(forUpdatingAtPath: appended))
            try appending.seekToEnd()
            try appending.write(contentsOf: Data([1]))
            try appending.close()
            #expect(cache.lookup(key: "appended") == nil)
            let truncated = try linked("truncated")
            #expect(truncate(truncated, 100) == 0)
            #expect(cache.bodyFile(key: "truncated") == nil)

            // And the client's files are as the client left them
            #expect(info(appended)?.st_size == off_t(size + 1))
            #expect(info(truncated)?.st_size == 100)
            #expect(cache.count == 0)
            #expect(cache.usage == 0)
            #expect(names(cache).isEmpty)
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
            let body = bytes(size, seed: 3)
            try write(body, to: source)
            #expect(cache.store(key: "k", response: response(), bodyFile: source))
            let stored = try #require(info(try bodyPath(cache)))
            #expect(stored.st_ino != (try #require(info(source))).st_ino)
            #expect(stored.st_mode & 0o777 == 0o600)
            // A change to the source no longer reaches the cache
            try write(bytes(size, seed: 4), to: source)
            #expect(cache.read(key: "k")?.body == body)
        }
    }

    @Test func replacingAndUpdatingKeepOneBodyFile() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            cache.store(key: "k", response: response(), body: bytes(size, seed: 1))
            let first = try bodyPath(cache)

            // A 304's update rewrites the head and keeps the body file
            var refreshed = response()
            refreshed.responseTime = Date(timeIntervalSince1970: 1_800_000_000)
            let bodyInode = try #require(info(first)).st_ino
            #expect(cache.update(key: "k", response: refreshed))
            #expect(try bodyPath(cache) == first && info(first)?.st_ino == bodyInode)
            #expect(cache.lookup(key: "k")?.response == refreshed)

            // A new body replaces the old body file
            cache.store(key: "k", response: response(), body: bytes(size + 1, seed: 2))
            #expect(try bodyPath(cache) != first)
            #expect(cache.count == 1)
            #expect(cache.read(key: "k")?.body == bytes(size + 1, seed: 2))

            // And a small one replaces it with a body kept inline
            cache.store(key: "k", response: response(), body: bytes(10, seed: 2))
            #expect(names(cache).isEmpty)

            // And remove deletes it
            #expect(cache.remove(key: "k"))
            #expect((cache.count, cache.usage) == (0, 0))
        }
    }

    @Test func bodyFilesThatAreNotRegularFilesAreMisses() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let body = bytes(size, seed: 5)
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
                let path = try bodyPath(cache)
                #expect(unlink(path) == 0)
                make(path)

                // Then it is a miss that drops the row, without blocking on a FIFO
                #expect(cache.read(key: key) == nil, "\(key)")
                #expect(cache.lookup(key: key) == nil, "\(key)")
                #expect(cache.count == 0, "\(key)")
                rmdir(path)
                unlink(path)

                // And a new store for the key works
                #expect(cache.store(key: key, response: response(), body: body), "\(key)")
                #expect(cache.read(key: key)?.body == body, "\(key)")
                cache.remove(key: key)
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: outside)) == Data(body))
        }
    }

    @Test func evictionDeletesTheBodyWithItsEntry() throws {
        try withDirectory { directory in
            // Given 13 stores of a head and a 66,536-byte body each, past a capacity of 12 bodies
            let cache = try DiskCache(cacheDirectory: directory, capacity: 800_000)
            for index in 0..<13 {
                cache.store(key: "k\(index)", response: response(), body: bytes(size, seed: UInt8(index)))
            }
            // Then no body file outlives its row, and usage is within the capacity
            #expect(names(cache).count == cache.count)
            #expect(cache.usage <= 800_000)
            #expect(cache.lookup(key: "k12") != nil && cache.lookup(key: "k0") == nil)
        }
    }

    @Test func oneFindingServesTheEntryAndItsBody() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
            let body = bytes(size, seed: 7)
            cache.store(key: "k", response: response("http://o/k"), body: body)
            cache.store(key: "other", response: response("http://o/other"), body: body)

            // The entry without its body leaves recency alone
            #expect(cache.withEntry(key: "k") { found, _ in found.response.url } == "http://o/k")

            // Its body, verified: in memory up to the caller's bound, else left in its file
            let held = cache.withEntry(key: "k") { _, load -> [UInt8]? in
                guard case .bytes(let bytes)? = load(Int64(size)) else { return nil }
                return bytes
            }
            #expect(held == .some(body))
            let left = cache.withEntry(key: "k") { _, load -> StoredBodyFile? in
                guard case .file(let file)? = load(Int64(size - 1)) else { return nil }
                return file
            }
            let file = try #require(left ?? nil)
            #expect(file.length == Int64(size) && file.read() == body)
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
            let body = bytes(size, seed: 8)
            try write(body, to: directory + "/.a.partial")

            // Given the file as it was written: linked, and read back whole
            #expect(cache.store(key: "a", response: response(), file: try streamed(directory, ".a.partial", body)))
            #expect(info(try bodyPath(cache))?.st_ino == info(directory + "/.a.partial")?.st_ino)
            #expect(cache.read(key: "a")?.body == body)

            // When another file was renamed over the name before it was linked
            // (same length, other bytes), the entry is stored but never served
            try write(bytes(size, seed: 9), to: directory + "/.b.partial")
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

    @Test func aSmallBodyWrittenToAnUnnamedFileIsLinkedNotInline() throws {
        try withDirectory { directory in
            let cache = try DiskCache(cacheDirectory: directory + "/cache", capacity: 1 << 20)
            let beside = try DirectoryHandle(opening: directory)
            let body = bytes(8_192, seed: 10)
            func written(_ bytes: [UInt8]) throws -> Int32 {
                let fd = try #require(beside.makeUnnamedFile(mode: 0o644))
                #expect(CacheFileIO.write(fd, bytes))
                return fd
            }
            func file(_ fd: Int32) -> CacheBodyFile {
                CacheBodyFile(
                    directory: beside, name: ".dest.partial", length: Int64(body.count), checksum: XXH3.hash(body), bytes: body,
                    unnamed: fd)
            }

            // Given a small body held in memory and written to an unnamed file beside its destination
            let fd = try written(body)
            defer { close(fd) }

            // When it is stored, then the file is named at its destination
            #expect(cache.store(key: "k", response: response(), file: file(fd)))
            #expect(beside.link(fd, as: "dest") == nil)

            // Then the body file is the destination's inode, and its row holds no copy
            let destination = try #require(info(directory + "/dest"))
            #expect(info(try bodyPath(cache))?.st_ino == destination.st_ino && destination.st_nlink == 2)
            #expect(cache.read(key: "k")?.body == body)
            #expect(cache.usage > Int64(body.count) && cache.usage < Int64(body.count) + 1_000)

            // And the destination rewritten in place makes the entry a miss, never a wrong hit
            let handle = try #require(FileHandle(forUpdatingAtPath: directory + "/dest"))
            try handle.write(contentsOf: Data([body[0] ^ 0xFF]))
            try handle.close()
            #expect(cache.read(key: "k") == nil)
            #expect(cache.count == 0 && names(cache).isEmpty)

            // And a body whose file cannot be linked here (another file system) is kept inline
            var shm = stat()
            guard stat("/dev/shm", &shm) == 0, shm.st_dev != destination.st_dev else { return }
            let elsewhere = try DirectoryHandle(opening: "/dev/shm")
            let far = try #require(elsewhere.makeUnnamedFile(mode: 0o600))
            defer { close(far) }
            #expect(CacheFileIO.write(far, body))
            #expect(cache.store(key: "far", response: response(), file: file(far)))
            #expect(names(cache).isEmpty && cache.read(key: "far")?.body == body)
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
            let body = bytes(size, seed: 5)
            let other = bytes(size, seed: 6)

            // Kept bytes are written as they are: the file is not read
            try write(other, to: "/dev/shm/" + name)
            #expect(cache.store(key: "kept", response: response(), file: try streamed("/dev/shm", name, body, keeping: true)))
            #expect(cache.read(key: "kept")?.body == body)

            // Without them the file is copied, and one that no longer hashes to the checksum is refused
            #expect(!cache.store(key: "changed", response: response(), file: try streamed("/dev/shm", name, body)))
            #expect(cache.lookup(key: "changed") == nil)
            #expect(names(cache).count == 1)
            try write(body, to: "/dev/shm/" + name)
            #expect(cache.store(key: "copied", response: response(), file: try streamed("/dev/shm", name, body)))
            #expect(cache.read(key: "copied")?.body == body)
        }
    }
}
