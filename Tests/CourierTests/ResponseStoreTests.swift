import Foundation
import Logging
import SQLite
import Testing

@testable import Courier

/// The disk tier's rows in `Cache.db`: small bodies inline, large ones in
/// files that exist before the row naming them commits, usage kept in step
/// by every write, and least recently used rows evicted first.
@Suite(.timeLimit(.minutes(1)))
struct ResponseStoreTests {
    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-response-store-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    private func store(_ directory: String, capacity: Int64 = 1 << 20) throws -> ResponseStore {
        let root = try CacheRoot(testing: directory)
        return ResponseStore(
            database: root.database, directory: try root.directory("http"), capacity: capacity, evictionTarget: 0.5,
            maximumBodyLength: capacity / 2)
    }

    private func insert(_ key: String, _ body: [UInt8], head: [UInt8] = [1, 2, 3]) -> ResponseStore.Insert {
        ResponseStore.Insert(
            key: Array(key.utf8), head: head, bodyLength: Int64(body.count), checksum: XXH3.hash(body), digests: BodyDigests(),
            body: .bytes(body))
    }

    private func files(_ store: ResponseStore) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: store.directory.path)) ?? []).sorted()
    }

    @Test func smallBodiesAreRowsAndLargeOnesFilesNamedOnlyOnceComplete() throws {
        try withDirectory { directory in
            let store = try store(directory)

            // A small body is inline
            #expect(store.insert(insert("small", [7, 8, 9])).inserted == .stored(nil))
            let small = try #require(store.find(key: Array("small".utf8)))
            #expect(small.body == .inline([7, 8, 9]) && small.head == [1, 2, 3] && small.bodyLength == 3)
            #expect(files(store).isEmpty)

            // A large one is an unnamed file given its name with the row
            let large = [UInt8](repeating: 5, count: ResponseStore.inlineLimit + 1)
            let fd = openat(store.directory.fd, ".", 0o20_000_000 | O_DIRECTORY | O_RDWR, 0o600)
            try #require(fd >= 0)
            defer { close(fd) }
            #expect(CacheFileIO.write(fd, large))
            #expect(files(store).isEmpty)
            var request = insert("large", large)
            request.body = .unnamed(fd: fd)
            guard case .stored(let id?) = store.insert(request).inserted else {
                Issue.record("not stored as a file")
                return
            }
            #expect(files(store) == [ResponseStore.fileName(id)])
            #expect(store.find(key: Array("large".utf8))?.body == .file(id))
            #expect(try Data(contentsOf: URL(fileURLWithPath: store.directory.path(of: ResponseStore.fileName(id)))) == Data(large))

            // Usage counts heads and bodies
            #expect(store.totals() == (Int64(3 + 3 + 3 + large.count), 2))

            // A file that cannot be linked changes nothing
            var missing = insert("missing", large)
            missing.body = .link(CacheBodyFile(directory: store.directory, name: "absent", length: 1, checksum: 0))
            #expect(store.insert(missing).inserted == .notLinked)
            #expect(store.totals().entries == 2)

            // Replacing and removing unlink the file after the row goes
            #expect(store.insert(insert("large", [1])).inserted == .stored(nil))
            #expect(files(store).isEmpty)
            #expect(store.remove(key: Array("large".utf8)))
            #expect(!store.remove(key: Array("large".utf8)))
            #expect(store.totals() == (6, 1))
            #expect(store.removeAll() == 1)
            #expect(store.totals() == (0, 0))
        }
    }

    @Test func leastRecentlyUsedRowsGoFirstDownToTheTarget() throws {
        try withDirectory { directory in
            // Given room for 10 rows of 100 bytes, evicting down to half
            let store = try store(directory, capacity: 1_000)
            for index in 0..<10 { #expect(store.insert(insert("k\(index)", [UInt8](repeating: 0, count: 97))).inserted == .stored(nil)) }
            #expect(store.totals() == (1_000, 10))

            // When the oldest two are used, then an eleventh goes over the capacity
            for key in ["k0", "k1"] { store.touch(try #require(store.find(key: Array(key.utf8)))) }
            #expect(store.find(key: Array("k1".utf8))?.isMostRecentlyUsed == true)
            #expect(store.find(key: Array("k0".utf8))?.isMostRecentlyUsed == false)
            #expect(store.insert(insert("k10", [UInt8](repeating: 0, count: 97))).inserted == .stored(nil))

            // Then the least recently used go until usage is at most half
            let left = (0...10).filter { store.find(key: Array("k\($0)".utf8)) != nil }
            #expect(left == [0, 1, 8, 9, 10])
            #expect(store.totals() == (500, 5))
        }
    }

    @Test func aBatchOverTheCapacityEvictsLeastRecentlyUsedBeforeItCommits() throws {
        try withDirectory { directory in
            // Given room for 10 rows of 100 bytes, evicting down to half, and 8 rows
            let store = try store(directory, capacity: 1_000)
            let other = try Database(openingDefensively: directory + "/Cache.db")
            defer { other.close() }
            for index in 0..<8 { #expect(store.insert(insert("k\(index)", [UInt8](repeating: 0, count: 97))).inserted == .stored(nil)) }

            // When one batch stores 4 more, taking usage to 1,200
            store.database.batch {
                for index in 8..<12 { #expect(store.insert(insert("k\(index)", [UInt8](repeating: 0, count: 97))).inserted == .stored(nil)) }
            }

            // Then what another connection sees is down to half, the least recently used gone
            #expect(try rowsSeen(by: other) == 5)
            let left = (0..<12).filter { store.find(key: Array("k\($0)".utf8)) != nil }
            #expect(left == [7, 8, 9, 10, 11])
            #expect(store.totals() == (500, 5))
            store.recount()
            #expect(store.totals() == (500, 5))
        }
    }

    @Test func aBatchWritesTheUsageOnceForAllItsStores() throws {
        try withDirectory { directory in
            let store = try store(directory)
            #expect(store.insert(insert("a", [1])).inserted == .stored(nil))
            let before = store.database.use { $0.totalChanges }

            // When a batch stores 5 new responses and replaces one
            store.database.batch {
                for index in 0..<5 { #expect(store.insert(insert("k\(index)", [1, 2])).inserted == .stored(nil)) }
                #expect(store.insert(insert("a", [1, 2, 3])).inserted == .stored(nil))
            }

            // Then it changed the 6 rows it inserted, the one it replaced, and the usage once
            let after = store.database.use { $0.totalChanges }
            #expect(after.flatMap { after in before.map { after - $0 } } == 8)
            #expect(store.totals() == (Int64(5 * 5 + 6), 6))
        }
    }

    /// Each row's `used` stamp, by key.
    private func stamps(_ store: ResponseStore) -> [String: SQLiteValue] {
        let rows = store.database.use { database throws(SQLiteError) in try database.rows("SELECT key, used FROM responses") } ?? []
        return Dictionary(uniqueKeysWithValues: rows.map { (String(decoding: $0[0].blob ?? [], as: UTF8.self), $0[1]) })
    }

    @Test func aBatchStampsItsRowsAsOneByOneAndAWriteBetweenThemKeepsTheOrder() throws {
        try withDirectory { directory in
            // Given two rows, x the least recently used
            let store = try store(directory)
            #expect(store.insert(insert("x", [1])).inserted == .stored(nil))
            #expect(store.insert(insert("y", [1])).inserted == .stored(nil))
            let x = try #require(store.find(key: Array("x".utf8)))

            // When a batch stores two, then uses x, then stores another
            store.database.batch {
                #expect(store.insert(insert("a", [1])).inserted == .stored(nil))
                #expect(store.insert(insert("b", [1])).inserted == .stored(nil))
                store.touch(x)
                #expect(store.insert(insert("c", [1])).inserted == .stored(nil))
            }

            // Then each is one more than the last, as stores one by one would make them
            #expect(stamps(store) == ["y": .integer(2), "a": .integer(3), "b": .integer(4), "x": .integer(5), "c": .integer(6)])
            #expect(store.find(key: Array("c".utf8))?.isMostRecentlyUsed == true)
        }
    }

    @Test func aStampAnotherProgramWroteAsTextIsReadForEachRowOfABatch() throws {
        try withDirectory { directory in
            // Given a row whose stamp is text, which SQL takes as larger than any number
            let store = try store(directory)
            #expect(store.insert(insert("x", [1])).inserted == .stored(nil))
            store.database.use { database throws(SQLiteError) in try database.run("UPDATE responses SET used = 'late'") }

            // When a batch stores two
            store.database.batch {
                #expect(store.insert(insert("a", [1])).inserted == .stored(nil))
                #expect(store.insert(insert("b", [1])).inserted == .stored(nil))
            }

            // Then each got what SQL makes of it, as when stored one by one
            #expect(stamps(store) == ["x": .text("late"), "a": .integer(1), "b": .integer(1)])
        }
    }

    @Test func aUsageCountAnotherProgramWroteIsRecounted() throws {
        try withDirectory { directory in
            let store = try store(directory)
            #expect(store.insert(insert("a", [1, 2])).inserted == .stored(nil))
            for forged in ["UPDATE response_usage SET bytes = -5", "UPDATE response_usage SET entries = 1 << 40", "DELETE FROM response_usage"] {
                store.database.use { database throws(SQLiteError) in try database.run(SQL(forged)) }
                #expect(store.totals() == (5, 1), "\(forged)")
            }
            store.database.use { database throws(SQLiteError) in try database.run("UPDATE response_usage SET bytes = 1 << 50") }
            store.recount()
            #expect(store.totals() == (5, 1))
        }
    }

    @Test func aWriteOverAUsageCountAnotherProgramWroteRecountsIt() throws {
        try withDirectory { directory in
            let store = try store(directory)
            #expect(store.insert(insert("a", [1, 2])).inserted == .stored(nil))
            let forgeries = [
                "UPDATE response_usage SET bytes = -5", "UPDATE response_usage SET entries = 1 << 40",
                "UPDATE response_usage SET bytes = 'many'", "UPDATE response_usage SET entries = 1.5",
                "DELETE FROM response_usage",
            ]
            for forged in forgeries {
                store.database.use { database throws(SQLiteError) in try database.run(SQL(forged)) }
                #expect(store.insert(insert("b", [3])).inserted == .stored(nil), "\(forged)")
                #expect(store.totals() == (9, 2), "\(forged)")
                store.database.use { database throws(SQLiteError) in try database.run(SQL(forged)) }
                #expect(store.remove(key: Array("b".utf8)), "\(forged)")
                #expect(store.totals() == (5, 1), "\(forged)")
            }
        }
    }

    @Test func filesNoRowNamesAreRemovedAndNamedOnesKept() throws {
        try withDirectory { directory in
            // Given two rows with body files, three files of courier's form no row
            // names, one of another form, and a file beside the directory
            let store = try store(directory)
            let large = [UInt8](repeating: 5, count: ResponseStore.inlineLimit + 1)
            var named: [String] = []
            for key in ["a", "b"] {
                let fd = try unnamedFile(store, large)
                defer { close(fd) }
                var request = insert(key, large)
                request.body = .unnamed(fd: fd)
                guard case .stored(let id?) = store.insert(request).inserted else {
                    Issue.record("not stored as a file")
                    return
                }
                named.append(ResponseStore.fileName(id))
            }
            let strays = [UInt64(1), 2, 0xFFFF_FFFF_FFFF_FFFF].map(ResponseStore.fileName)
            for name in strays + ["notes.txt"] {
                #expect(FileManager.default.createFile(atPath: store.directory.path(of: name), contents: Data([1])))
            }
            let beside = directory + "/" + ResponseStore.fileName(3)
            #expect(FileManager.default.createFile(atPath: beside, contents: Data([1])))

            // When the files no row names are removed
            let removed = store.removeUnnamedFiles()

            // Then the strays went, the named files and the file beside stayed
            #expect(removed.unnamed == 3 && removed.foreign == 1)
            #expect(files(store) == named.sorted())
            #expect(FileManager.default.fileExists(atPath: beside))
            #expect(store.totals().entries == 2)
        }
    }

    @Test func bodyIDsAreNeverZeroNorRepeatedAndDifferByProcess() {
        // Given two processes' draws (two seeds)
        let ids = BodyIDs()
        let other = BodyIDs()
        // When each draws many ids
        let drawn = (0..<10_000).map { _ in ids.next() }
        let others = (0..<10_000).map { _ in other.next() }
        // Then none is 0 (no file), none repeats, and the two meet nowhere
        #expect(!drawn.contains(0))
        #expect(Set(drawn).count == drawn.count)
        #expect(Set(drawn).isDisjoint(with: others))
    }

    @Test func rowsOutOfRangeAreNotTaken() {
        let head = SQLiteValue.integer(Int64(bitPattern: XXH3.hash([1])))
        let cases: [[SQLiteValue]] = [
            [.integer(1), .blob([1]), .integer(3), .integer(0), .null, .blob([1, 2]), head],  // inline of another length
            [.integer(1), .blob([1]), .integer(-1), .integer(0), .null, .blob([]), head],  // negative
            [.integer(1), .blob([1]), .integer(1 << 40), .integer(0), .integer(7), .null, head],  // past the maximum
            [.integer(1), .blob([1]), .integer(1), .integer(0), .integer(7), .blob([1]), head],  // both
            [.integer(1), .text("x"), .integer(1), .integer(0), .null, .blob([1]), head],  // a head that is text
            [.integer(1), .blob([2]), .integer(1), .integer(0), .null, .blob([1]), head],  // a head changed
            [.integer(1), .blob([1]), .integer(1), .real(0.5), .null, .blob([1]), head],  // a checksum that is not an integer
            [.integer(1), .blob([1]), .integer(1), .integer(0), .null, .blob([1])],  // a column short
        ]
        for values in cases { #expect(ResponseStore.Row(values, maximumBodyLength: 1 << 20) == nil, "\(values)") }
        let good: [SQLiteValue] = [.integer(1), .blob([1]), .integer(1), .integer(-1), .null, .blob([1]), head]
        #expect(ResponseStore.Row(good, maximumBodyLength: 1 << 20) != nil)
        // A small body may be a file: one written beside its destination is linked, not copied inline
        let smallFile: [SQLiteValue] = [.integer(1), .blob([1]), .integer(10), .integer(0), .integer(7), .null, head]
        #expect(ResponseStore.Row(smallFile, maximumBodyLength: 1 << 20)?.body == .file(7))
    }

    @Test func bodyFileNamesAreSixteenHexDigits() {
        #expect(ResponseStore.fileName(0xAB) == "00000000000000ab")
        #expect(ResponseStore.fileName(0x0123_4567_89AB_CDEF) == "0123456789abcdef")
        #expect(ResponseStore.fileName(.max) == "ffffffffffffffff" && ResponseStore.fileName(1 << 63) == "8000000000000000")
        #expect(ResponseStore.fileID(Array("00000000000000ab".utf8)) == 0xAB)
        for name in ["00000000000000AB", "0000000000000ab", "00000000000000ab.part", "../0000000000000a", ""] {
            #expect(ResponseStore.fileID(Array(name.utf8)) == nil, "\(name)")
        }
    }

    @Test func aDatabaseOfSchemaOneKeepsItsPartialBodiesAndGainsTheDiskTier() throws {
        try withDirectory { directory in
            // Given a Cache.db as schema version 1 made it, with a kept partial body's row
            let path = directory + "/Cache.db"
            do {
                let old = try Database(openingDefensively: path)
                try old.execute(
                    """
                    PRAGMA application_id = \(CacheDatabase.applicationID); PRAGMA user_version = 1;
                    CREATE TABLE partial_bodies (key BLOB PRIMARY KEY NOT NULL, file BLOB NOT NULL, url BLOB NOT NULL,
                    validator_kind INTEGER NOT NULL, validator BLOB NOT NULL, complete_length INTEGER NOT NULL,
                    kept_length INTEGER NOT NULL, checksum INTEGER NOT NULL, created_at REAL NOT NULL,
                    updated_at REAL NOT NULL) WITHOUT ROWID;
                    INSERT INTO partial_bodies VALUES (x'6b', x'00', x'00', 0, x'00', 10, 5, 0, 0, 0);
                    """)
                old.close()
            }

            // When courier opens it
            let store = try store(directory)

            // Then it is of this version, its partial body rows are kept, and the disk tier works
            let found = store.database.use { database throws(SQLiteError) in
                (try database.integerPragma("user_version"), try database.rows("SELECT count(*) FROM partial_bodies").first?.first)
            }
            #expect(found?.0 == CacheDatabase.schemaVersion && found?.1 == .integer(1))
            #expect(store.insert(insert("a", [1])).inserted == .stored(nil))
            #expect(store.find(key: Array("a".utf8)) != nil)
        }
    }

    /// The rows another connection (another process) sees.
    private func rowsSeen(by other: Database) throws -> Int64? {
        try other.rows("SELECT count(*) FROM responses").first?.first?.integer
    }

    @Test func aBatchCommitsItsStoresInOneTransactionBeforeItReturns() throws {
        try withDirectory { directory in
            let store = try store(directory)
            let other = try Database(openingDefensively: directory + "/Cache.db")
            defer { other.close() }
            let large = [UInt8](repeating: 5, count: ResponseStore.inlineLimit + 1)
            let fd = openat(store.directory.fd, ".", 0o20_000_000 | O_DIRECTORY | O_RDWR, 0o600)
            try #require(fd >= 0)
            defer { close(fd) }
            #expect(CacheFileIO.write(fd, large))
            var request = insert("large", large)
            request.body = .unnamed(fd: fd)
            guard case .stored(let id?) = store.insert(request).inserted else {
                Issue.record("not stored as a file")
                return
            }

            // When a batch stores three responses, one of them replacing the body file's
            try store.database.batch { () throws in
                #expect(store.insert(insert("a", [1])).inserted == .stored(nil))
                #expect(store.insert(insert("b", [2, 2])).inserted == .stored(nil))
                #expect(store.insert(insert("large", [3])).inserted == .stored(nil))

                // Then inside it this thread reads them, no other connection does yet,
                // and the replaced body file is still there for rows others read
                #expect(store.find(key: Array("b".utf8))?.body == .inline([2, 2]))
                #expect(store.totals() == (13, 3))
                #expect(try rowsSeen(by: other) == 1)
                #expect(files(store) == [ResponseStore.fileName(id)])
            }

            // And once it returns, all three are committed and the file is gone
            #expect(try rowsSeen(by: other) == 3)
            #expect(files(store).isEmpty)
            #expect(store.database.use { $0.isInTransaction } == false)
        }
    }

    @Test func aWriteThatFailsInABatchIsUndoneAloneAndTheRestCommits() throws {
        try withDirectory { directory in
            let store = try store(directory)
            let other = try Database(openingDefensively: directory + "/Cache.db")
            defer { other.close() }

            store.database.batch {
                #expect(store.insert(insert("a", [1])).inserted == .stored(nil))
                // A write that fails half way, after it changed a row and the usage
                let failed: Void? = store.database.use { database throws(SQLiteError) in
                    try database.transaction { () throws(SQLiteError) in
                        try database.run("UPDATE response_usage SET bytes = bytes + 1000")
                        try database.run("DELETE FROM responses")
                        throw SQLiteError(code: 1, message: "failed half way")
                    }
                }
                #expect(failed == nil)
                // A body file that cannot be linked
                var missing = insert("missing", [UInt8](repeating: 1, count: ResponseStore.inlineLimit + 1))
                missing.body = .link(CacheBodyFile(directory: store.directory, name: "absent", length: 1, checksum: 0))
                #expect(store.insert(missing).inserted == .notLinked)
                #expect(store.insert(insert("b", [2, 2])).inserted == .stored(nil))
            }

            // Then what did not fail is committed, and the usage agrees with the rows
            #expect(try rowsSeen(by: other) == 2)
            #expect(store.totals() == (9, 2))
            store.recount()
            #expect(store.totals() == (9, 2))
            #expect(files(store).isEmpty)
        }
    }

    @Test func anInsertNamesTheBodyFileItPutInPlace() throws {
        try withDirectory { directory in
            let store = try store(directory)
            // Given a body in an unnamed file, and one kept inline
            let large = [UInt8](repeating: 4, count: ResponseStore.inlineLimit + 1)
            let fd = try unnamedFile(store, large)
            defer { close(fd) }
            var file = insert("large", large)
            file.body = .unnamed(fd: fd)

            // When each is inserted
            let (inserted, name) = store.insert(file)
            let (inline, noName) = store.insert(insert("small", [1, 2]))

            // Then the file's name is the one its row names, and is there;
            // a body kept inline has none
            guard case .stored(let id?) = inserted else {
                Issue.record("not stored as a file")
                return
            }
            #expect(name == ResponseStore.fileName(id))
            #expect(files(store) == [ResponseStore.fileName(id)])
            #expect(inline == .stored(nil))
            #expect(noName == nil)
        }
    }

    /// An unnamed file in `store`'s directory holding `bytes`, as a body to link.
    private func unnamedFile(_ store: ResponseStore, _ bytes: [UInt8]) throws -> Int32 {
        let fd = openat(store.directory.fd, ".", 0o20_000_000 | O_DIRECTORY | O_RDWR, 0o600)
        try #require(fd >= 0)
        #expect(CacheFileIO.write(fd, bytes))
        return fd
    }

    @Test func aStoreThatFailsHalfWayInABatchIsUndoneAloneAndTheOthersCommit() throws {
        try withDirectory { directory in
            let store = try store(directory)
            let other = try Database(openingDefensively: directory + "/Cache.db")
            defer { other.close() }
            #expect(store.insert(insert("kept", [9, 9, 9])).inserted == .stored(nil))
            let large = [UInt8](repeating: 5, count: ResponseStore.inlineLimit + 1)
            let first = try unnamedFile(store, large)
            defer { close(first) }
            let second = try unnamedFile(store, large)
            defer { close(second) }
            var stored: UInt64?

            store.database.batch {
                #expect(store.insert(insert("a", [1])).inserted == .stored(nil))
                var file = insert("large", large)
                file.body = .unnamed(fd: first)
                guard case .stored(let id?) = store.insert(file).inserted else {
                    Issue.record("not stored as a file")
                    return
                }
                stored = id
                // A store that would replace "kept" and fails: SQLite refuses
                // its head, longer than a value may be
                var failing = insert("kept", large, head: [UInt8](repeating: 0, count: Int(Database.valueLengthLimit) + 1))
                failing.body = .unnamed(fd: second)
                #expect(store.insert(failing).inserted == .failed)
                #expect(store.insert(insert("b", [2, 2])).inserted == .stored(nil))
            }

            // Then the stores before and after it are committed, the row it
            // replaced is intact, its body file is gone, and usage agrees with the rows
            #expect(try rowsSeen(by: other) == 4)
            #expect(store.find(key: Array("kept".utf8))?.body == .inline([9, 9, 9]))
            #expect(store.find(key: Array("a".utf8))?.body == .inline([1]))
            #expect(store.find(key: Array("b".utf8))?.body == .inline([2, 2]))
            #expect(stored.map { store.find(key: Array("large".utf8))?.body == .file($0) } == true)
            #expect(files(store) == stored.map { [ResponseStore.fileName($0)] })
            let sizes: Int64 = 6 + 4 + 5 + 3 + Int64(large.count)
            #expect(store.totals() == (sizes, 4))
            store.recount()
            #expect(store.totals() == (sizes, 4))
        }
    }

    @Test func lookupsReadTogetherShareOneSnapshotThatAnyWriteHereEnds() throws {
        try withDirectory { directory in
            let store = try store(directory)
            // Another process's store, with a connection of its own
            let elsewhere = try self.store(directory)
            let found = { (key: String) in store.find(key: Array(key.utf8)) != nil }
            #expect(store.insert(insert("a", [1])).inserted == .stored(nil))

            store.database.readingTogether {
                // Given a lookup that began the shared read
                #expect(found("a"))
                // When another process commits meanwhile (a reader never holds a writer back)
                #expect(elsewhere.insert(insert("b", [2])).inserted == .stored(nil))
                // Then the lookups that follow see the database as the first did
                #expect(!found("b"))
                // And a write of this process's ends the read: it and what came before are seen
                #expect(store.insert(insert("c", [3])).inserted == .stored(nil))
                #expect(found("b") && found("c"))
                // So does a write on another thread, which does not wait for the read
                #expect(elsewhere.insert(insert("d", [4])).inserted == .stored(nil))
                #expect(!found("d"))
                DispatchQueue.global().sync {
                    store.database.batch { #expect(store.insert(insert("e", [5])).inserted == .stored(nil)) }
                }
                #expect(found("d") && found("e"))
                #expect(elsewhere.insert(insert("f", [6])).inserted == .stored(nil))
            }

            // And the read ends with `readingTogether`: a lookup after it sees every commit
            #expect(store.database.use { $0.isInTransaction } == false)
            #expect(found("f"))
        }
    }

    @Test func anotherThreadsWriteDoesNotWaitAndCommitsWithTheBatch() throws {
        try withDirectory { directory in
            let store = try store(directory)
            let other = try Database(openingDefensively: directory + "/Cache.db")
            defer { other.close() }
            let started = DispatchSemaphore(value: 0)
            let written = DispatchSemaphore(value: 0)

            store.database.batch {
                #expect(store.insert(insert("a", [1])).inserted == .stored(nil))
                DispatchQueue.global().async {
                    started.signal()
                    #expect(store.insert(insert("b", [2])).inserted == .stored(nil))
                    written.signal()
                }
                started.wait()
                // The other thread's write is made while the batch runs, and
                // no other connection sees either yet
                #expect(written.wait(timeout: .now() + .seconds(10)) == .success)
                #expect((try? rowsSeen(by: other)) == 0)
                #expect(store.totals() == (8, 2))
            }

            #expect(try rowsSeen(by: other) == 2)
        }
    }

    @Test func aNewDatabaseHasItsPageSizeAndAnOlderOneKeepsItsOwn() throws {
        try withDirectory { directory in
            // Given a database of schema version 1 made with SQLite's default
            // pages, one of this schema version made with 32 KiB pages (as
            // courier made them before), and one made new
            let (v1, v2) = (directory + "/v1", directory + "/v2")
            for path in [v1, v2] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
            do {
                let old = try Database(openingDefensively: v1 + "/Cache.db")
                try old.execute("PRAGMA application_id = \(CacheDatabase.applicationID); PRAGMA user_version = 1")
                old.close()
            }
            do {
                let old = try Database(openingDefensively: v2 + "/Cache.db", pageSize: 32 << 10)
                try old.transaction { () throws(SQLiteError) in
                    try old.execute(
                        "PRAGMA application_id = \(CacheDatabase.applicationID); PRAGMA user_version = \(CacheDatabase.schemaVersion)")
                    try old.execute(CacheDatabase.schema)
                }
                old.close()
            }
            let new = try store(directory + "/new")
            let stores = [new, try store(v1), try store(v2)]

            // Then each has its page size and a WAL copied back every 4 MiB of pages
            let pragmas = { (store: ResponseStore) in
                store.database.use { database throws(SQLiteError) in
                    [try database.integerPragma("page_size"), try database.integerPragma("wal_autocheckpoint")]
                }
            }
            #expect(stores.map(pragmas) == [[8192, 512], [4096, 1024], [32768, 128]])

            // And each stores, replaces and finds responses
            for store in stores {
                #expect(store.insert(insert("a", [UInt8](repeating: 1, count: 8192))).inserted == .stored(nil))
                #expect(store.insert(insert("b", [UInt8](repeating: 2, count: 100))).inserted == .stored(nil))
                #expect(store.insert(insert("a", [UInt8](repeating: 3, count: 9000))).inserted == .stored(nil))
                #expect(store.find(key: Array("a".utf8))?.body == .inline([UInt8](repeating: 3, count: 9000)))
                #expect(store.find(key: Array("b".utf8))?.bodyLength == 100)
                #expect(store.totals() == (9000 + 100 + 6, 2))
            }
        }
    }
}
