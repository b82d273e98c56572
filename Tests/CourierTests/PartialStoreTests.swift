import Dispatch
import Foundation
import Locking
import Logging
import SQLite
import Testing

@testable import Courier

/// The partial store keeps what it can prove: checkpoints survive a process
/// that never ended its attempt, a kept body is checked before a byte of it
/// is used, files another process holds are left alone, and the kept bytes
/// stay within the capacity, the oldest going first. Its database, like the
/// rest of the cache directory, is hostile input.
@Suite(.timeLimit(.minutes(1)))
struct PartialStoreTests {
    private let logger = Logger(label: "test")
    private let validator = ResumeValidator.entityTag(Array("\"v1\"".utf8))

    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-partials-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    /// A store on `directory`, as a new process would open it, once its
    /// database is open.
    private func store(_ directory: String, capacity: Int64 = 1 << 30) throws -> PartialStore {
        let store = try PartialStore(root: CacheRoot(testing: directory), capacity: capacity, logger: logger)
        store.flush()
        return store
    }

    private func bytes(_ count: Int, seed: UInt8 = 7) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
    }

    /// Writes `body` into a new file for `key` and keeps it, as an attempt
    /// that ended after `body` would: the file's name.
    @discardableResult
    private func keep(_ body: [UInt8], of complete: Int64, as key: String, in store: PartialStore) throws -> String {
        let file = try #require(store.makeFile())
        #expect(pwrite(file.fd, body, body.count, 0) == body.count)
        file.describe(key: Array(key.utf8), url: "http://origin/\(key)", validator: validator, completeLength: complete)
        let hasher = XXH3()
        hasher.update(body)
        file.keep(length: Int64(body.count), hashState: hasher.state, firstBytes: Array(body.prefix(32)))
        store.flush()
        return file.name
    }

    private func take(_ key: String, from store: PartialStore, url: String? = nil) -> ResumePoint? {
        let taken = Locked<ResumePoint?>(nil)
        let done = DispatchSemaphore(value: 0)
        store.take(key: Array(key.utf8), url: url ?? "http://origin/\(key)", proven: false) { point in
            taken.withLock { $0 = point }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        return taken.withLock { $0 }
    }

    private func path(_ directory: String, _ name: String) -> String { directory + "/partials/" + name }

    @Test func aKeptBodyIsTakenByAnotherProcessWithItsHashStateAndFirstBytes() throws {
        try withDirectory { directory in
            // Given 100 bytes of a 300-byte body kept by one process
            let body = bytes(300)
            try keep(Array(body[..<100]), of: 300, as: "k", in: store(directory))

            // When another takes it
            let point = try #require(take("k", from: try store(directory)))

            // Then it continues at byte 100 under the validator and length kept
            #expect(point.kept == KeptBody(offset: 100, completeLength: 300, validator: validator))
            #expect(point.firstBytes == Array(body[..<100].prefix(ImageInfo.sniffLength)))
            // And hashing the rest gives the whole body's checksum
            let hasher = XXH3(continuing: point.hashState)
            hasher.update(Array(body[100...]))
            #expect(hasher.finalize() == XXH3.hash(body))
        }
    }

    @Test func checkpointsSurviveAnAttemptThatNeverEnded() throws {
        try withDirectory { directory in
            // Given a body streaming in a process that recorded a checkpoint at 64 bytes and wrote 100, then died
            let body = bytes(100)
            do {
                let first = try store(directory)
                let file = try #require(first.makeFile())
                file.describe(key: Array("k".utf8), url: "http://origin/k", validator: validator, completeLength: 1000)
                #expect(pwrite(file.fd, body, body.count, 0) == body.count)
                file.checkpoint(length: 64, checksum: XXH3.hash(Array(body[..<64])))
                first.flush()
            }

            // When another process takes it
            let point = try #require(take("k", from: try store(directory)))

            // Then it continues from the checkpoint, the bytes after it cut away
            #expect(point.kept.offset == 64)
            let files = try FileManager.default.contentsOfDirectory(atPath: directory + "/partials")
            #expect(files.count == 1)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path(directory, files[0]))) == Data(body[..<64]))
        }
    }

    @Test(arguments: ["truncated", "rewritten", "replaced"])
    func aKeptBodyChangedOnDiskIsDropped(change: String) throws {
        try withDirectory { directory in
            let name = try keep(bytes(100), of: 300, as: "k", in: store(directory))
            let file = path(directory, name)
            switch change {
            case "truncated": truncate(file, 99)
            case "rewritten":
                let fd = open(file, O_WRONLY)
                #expect(pwrite(fd, [0xFF], 1, 50) == 1)
                close(fd)
            default:
                unlink(file)
                FileManager.default.createFile(atPath: file, contents: Data(bytes(100, seed: 9)))
            }
            let other = try store(directory)
            #expect(take("k", from: other) == nil)
            other.flush()
            // Its row and file are gone
            #expect(take("k", from: other) == nil)
            #expect(!FileManager.default.fileExists(atPath: file))
        }
    }

    @Test func aRewriteInThisProcessIsCaughtToo() throws {
        try withDirectory { directory in
            // Given a body this process kept (its hash state remembered)
            let kept = try store(directory)
            let name = try keep(bytes(100), of: 300, as: "k", in: kept)
            // When the file is rewritten in place, its length unchanged
            let fd = open(path(directory, name), O_WRONLY)
            #expect(pwrite(fd, [0xFF], 1, 50) == 1)
            close(fd)
            // Then it is read again, and dropped
            #expect(take("k", from: kept) == nil)
        }
    }

    @Test func bytesAppendedToAKeptBodyAreNeverTrusted() throws {
        try withDirectory { directory in
            let body = bytes(100)
            let name = try keep(body, of: 300, as: "k", in: store(directory))
            let handle = try #require(FileHandle(forWritingAtPath: path(directory, name)))
            handle.seekToEndOfFile()
            handle.write(Data(repeating: 0xEE, count: 50))
            handle.closeFile()
            let point = try #require(take("k", from: try store(directory)))
            #expect(point.kept.offset == 100)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path(directory, name))) == Data(body))
        }
    }

    @Test func aFileAnotherProcessHoldsIsNotTaken() throws {
        try withDirectory { directory in
            // Given a body kept by one process and taken by another, which holds it
            try keep(bytes(100), of: 300, as: "k", in: store(directory))
            let holder = try #require(take("k", from: try store(directory)))
            // Then a third cannot take it meanwhile
            #expect(take("k", from: try store(directory)) == nil)
            // And can once it is let go
            withExtendedLifetime(holder) {}
        }
    }

    @Test func aBodyKeptFromAnotherURLUnderADateAloneIsNotTakenThere() throws {
        try withDirectory { directory in
            let store = try store(directory)
            do {
                let file = try #require(store.makeFile())
                #expect(pwrite(file.fd, bytes(10), 10, 0) == 10)
                file.describe(
                    key: Array("k".utf8), url: "http://a/k", validator: .lastModified(Array("Mon, 14 Sep 2020 12:26:40 GMT".utf8)),
                    completeLength: 20)
                let hasher = XXH3()
                hasher.update(bytes(10))
                file.keep(length: 10, hashState: hasher.state, firstBytes: [])
            }
            store.flush()
            #expect(take("k", from: store, url: "http://b/k") == nil)
            #expect(take("k", from: store, url: "http://a/k")?.kept.offset == 10)
        }
    }

    @Test func theOldestKeptBodiesGoFirstPastTheCapacity() throws {
        try withDirectory { directory in
            // Given a capacity of 250 bytes and three bodies of 100 kept in turn
            let store = try store(directory, capacity: 250)
            let oldest = try keep(bytes(100), of: 300, as: "a", in: store)
            try keep(bytes(100), of: 300, as: "b", in: store)
            try keep(bytes(100), of: 300, as: "c", in: store)
            // Then the oldest went, file and all
            #expect(take("a", from: store) == nil)
            #expect(!FileManager.default.fileExists(atPath: path(directory, oldest)))
            #expect(take("b", from: store) != nil)
            #expect(take("c", from: store) != nil)
        }
    }

    @Test func aBodyPastTheCapacityKeepsItsLastCheckpointWithinIt() throws {
        try withDirectory { directory in
            let store = try store(directory, capacity: 150)
            let body = bytes(200)
            do {
                let file = try #require(store.makeFile())
                #expect(pwrite(file.fd, body, body.count, 0) == body.count)
                file.describe(key: Array("k".utf8), url: "http://origin/k", validator: validator, completeLength: 1000)
                file.checkpoint(length: 128, checksum: XXH3.hash(Array(body[..<128])))
                let hasher = XXH3()
                hasher.update(body)
                file.keep(length: 200, hashState: hasher.state, firstBytes: [])
            }
            store.flush()
            #expect(take("k", from: store)?.kept.offset == 128)
        }
    }

    @Test func rowsCourierDoesNotWriteAreDropped() throws {
        try withDirectory { directory in
            let store = try store(directory)
            let name = try keep(bytes(100), of: 300, as: "k", in: store)
            // Rows naming paths, impossible lengths or unknown validators
            let database = try Database(openingDefensively: directory + "/Cache.db")
            for (key, file, kind, kept, complete) in [
                ("up", "../Cache.db", 1, 10, 20), ("full", name, 1, 20, 20), ("kind", name, 3, 10, 20), ("none", name, 1, 0, 20),
            ] {
                try database.run(
                    "INSERT INTO partial_bodies VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, 0)",
                    [.blob(Array(key.utf8)), .blob(Array(file.utf8)), .blob(Array("http://origin/k".utf8)), .integer(Int64(kind)),
                     .blob(Array("\"v1\"".utf8)), .integer(Int64(complete)), .integer(Int64(kept))])
                #expect(take(key, from: store) == nil)
                #expect(try database.rows("SELECT count(*) FROM partial_bodies WHERE key = ?", [.blob(Array(key.utf8))]) == [[.integer(0)]])
            }
            database.close()
            #expect(FileManager.default.fileExists(atPath: directory + "/Cache.db"))
        }
    }

    @Test func filesNoRowNamesGoOnceUnheldHoweverNew() throws {
        try withDirectory { directory in
            _ = try store(directory)
            let unheld = path(directory, PartialStore.fileName(1))
            let held = path(directory, PartialStore.fileName(2))
            let stranger = path(directory, "notes.txt")
            for file in [unheld, held, stranger] { FileManager.default.createFile(atPath: file, contents: Data([1])) }
            let holder = open(held, O_RDWR | O_CLOEXEC)
            defer { close(holder) }
            #expect(flock(holder, LOCK_EX) == 0)
            _ = try store(directory)
            #expect(!FileManager.default.fileExists(atPath: unheld))
            #expect(FileManager.default.fileExists(atPath: held))
            #expect(!FileManager.default.fileExists(atPath: stranger))
        }
    }

    @Test func aStoreWithoutFilesHasNoBodyToTakeUntilOneIsMade() throws {
        try withDirectory { directory in
            let store = try store(directory)
            // Given partials/ empty and last changed an hour ago
            let past = Date(timeIntervalSinceNow: -3600)
            try FileManager.default.setAttributes([.modificationDate: past], ofItemAtPath: directory + "/partials")
            // Then no body may be taken, twice (the second time without listing it)
            #expect(!store.mayHoldBodies())
            #expect(!store.mayHoldBodies())
            // And once a file is made there, one may
            let file = try #require(store.makeFile())
            #expect(store.mayHoldBodies())
            file.drop()
            store.flush()
            #expect(!store.mayHoldBodies())
        }
    }

    @Test func aListingMadeSoonAfterAChangeIsKept() throws {
        try withDirectory { directory in
            let store = try store(directory)
            // Given partials/ empty and last changed a tenth of a second ago
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            var changed = now
            changed.tv_nsec -= 100_000_000
            if changed.tv_nsec <= 0 {
                changed.tv_sec -= 1
                changed.tv_nsec += 999_999_999
            }
            let path = directory + "/partials"
            let times = [changed, changed]
            try #require(utimensat(AT_FDCWD, path, times, 0) == 0)
            #expect(!store.mayHoldBodies())
            // When a file appears there and the directory keeps its time
            // (what no change made after the listing can do)
            try #require(FileManager.default.createFile(atPath: path + "/0000000000000001", contents: Data()))
            try #require(utimensat(AT_FDCWD, path, times, 0) == 0)
            // Then the listing is not made again
            #expect(!store.mayHoldBodies())
        }
    }

    @Test func aNewFileIsHeldBeforeItHasItsName() throws {
        try withDirectory { directory in
            let store = try store(directory)
            let file = try #require(store.makeFile())
            let other = open(path(directory, file.name), O_RDWR | O_CLOEXEC)
            defer { close(other) }
            #expect(other >= 0)
            #expect(flock(other, LOCK_EX | LOCK_NB) != 0)
            _ = try self.store(directory)
            #expect(FileManager.default.fileExists(atPath: path(directory, file.name)))
        }
    }

    @Test func keysAreBytesAndACacheKeyNamesNoURL() {
        func request(_ url: String, headers: [(name: String, value: String)] = [], cacheKey: String? = nil) -> DownloadRequest {
            DownloadRequest(
                url: url, scheme: "http", hasUserInfo: false, headers: headers, slot: nil, priority: .normal,
                cachePolicy: .default, accept: nil, body: .none, textEncoding: nil, destination: nil, maxBytes: nil,
                timeout: 300, cacheKey: cacheKey, wait: false)
        }
        #expect(PartialStore.key(for: request("http://a/é")) != PartialStore.key(for: request("http://a/e\u{301}")))
        #expect(PartialStore.key(for: request("http://a/x", cacheKey: "http://a/x")) != PartialStore.key(for: request("http://a/x")))
        #expect(PartialStore.key(for: request("http://a/x", cacheKey: "k")) == PartialStore.key(for: request("http://b/y", cacheKey: "k")))
        #expect(PartialStore.key(for: request("http://a/x", headers: [("Accept", "a"), ("X", "1")]))
            == PartialStore.key(for: request("http://a/x", headers: [("x", "1"), ("accept", "a")])))
        #expect(PartialStore.key(for: request("http://a/x", headers: [("Accept", "a")])) != PartialStore.key(for: request("http://a/x")))
    }
}

/// `Cache.db` is made anew, with a log line, whatever stands in its place.
@Suite(.timeLimit(.minutes(1)))
struct CacheDatabaseTests {
    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-cachedb-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    private func open(_ directory: String) throws -> CacheDatabase {
        CacheDatabase(root: try DirectoryHandle(opening: directory), logger: Logger(label: "test"))
    }

    private func works(_ database: CacheDatabase) -> Bool {
        database.use { database throws(SQLiteError) in try database.rows("SELECT count(*) FROM partial_bodies") } == [[.integer(0)]]
    }

    @Test(arguments: ["garbage", "truncated", "foreign", "newer", "symlink", "directory", "wal symlink"])
    func whateverStandsThereIsReplaced(kind: String) throws {
        try withDirectory { directory in
            let path = directory + "/Cache.db"
            let outside = directory + "/outside"
            FileManager.default.createFile(atPath: outside, contents: Data("keep me".utf8))
            switch kind {
            case "garbage":
                FileManager.default.createFile(atPath: path, contents: Data(repeating: 0xAB, count: 8192))
            case "truncated":
                _ = try open(directory)
                truncate(path, 100)
            case "foreign", "newer":
                let database = try Database(openingDefensively: path)
                if kind == "foreign" {
                    try database.execute("CREATE TABLE accounts (name TEXT)")
                } else {
                    try database.execute("PRAGMA application_id = \(CacheDatabase.applicationID); PRAGMA user_version = 99")
                }
                database.close()
            case "symlink":
                symlink(outside, path)
            case "directory":
                try FileManager.default.createDirectory(atPath: path + "/inner", withIntermediateDirectories: true)
            default:
                symlink(outside, path + "-wal")
            }
            let database = try open(directory)
            #expect(works(database))
            var info = stat()
            #expect(lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_mode & 0o777 == 0o600)
            #expect(try String(contentsOfFile: outside, encoding: .utf8) == "keep me")
        }
    }

    @Test func aCacheDirectoryThatIsALinkIsOpenedThroughItsRealPath() throws {
        try withDirectory { directory in
            try FileManager.default.createDirectory(atPath: directory + "/real", withIntermediateDirectories: true)
            symlink(directory + "/real", directory + "/link")
            #expect(works(try open(directory + "/link")))
            #expect(FileManager.default.fileExists(atPath: directory + "/real/Cache.db"))
        }
    }

    @Test func twoOpeningsOfANewDatabaseAgree() throws {
        try withDirectory { directory in
            let first = try open(directory)
            let second = try open(directory)
            #expect(works(first) && works(second))
            #expect(first.use { database throws(SQLiteError) in try database.integerPragma("application_id") } == CacheDatabase.applicationID)
        }
    }
}
