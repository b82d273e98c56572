import Foundation
import Logging
import SQLite
import Testing

@testable import Courier

/// `Cache.db` of schema version 2, which kept the recorded digests in
/// indexed columns of `responses`, brought to version 3 (a table of their
/// own) when courier opens it, with a courier of version 2 still using it.
@Suite(.timeLimit(.minutes(1)))
struct CacheDatabaseVersionTests {
    /// Version 2's tables, as a courier of that version made them.
    private static let versionTwo = """
        CREATE TABLE responses (
            id INTEGER PRIMARY KEY, key BLOB UNIQUE NOT NULL, used INTEGER NOT NULL, size INTEGER NOT NULL,
            body_length INTEGER NOT NULL, body_checksum INTEGER NOT NULL, body_file INTEGER,
            sha256 BLOB, sha384 BLOB, sha512 BLOB, head BLOB NOT NULL, head_checksum INTEGER NOT NULL, body BLOB);
        CREATE INDEX responses_by_use ON responses (used);
        CREATE INDEX responses_by_sha256 ON responses (sha256) WHERE sha256 IS NOT NULL;
        CREATE INDEX responses_by_sha384 ON responses (sha384) WHERE sha384 IS NOT NULL;
        CREATE INDEX responses_by_sha512 ON responses (sha512) WHERE sha512 IS NOT NULL;
        CREATE TABLE response_usage (id INTEGER PRIMARY KEY CHECK (id = 0), bytes INTEGER NOT NULL, entries INTEGER NOT NULL);
        CREATE TABLE partial_bodies (
            key BLOB PRIMARY KEY NOT NULL, file BLOB NOT NULL, url BLOB NOT NULL, validator_kind INTEGER NOT NULL,
            validator BLOB NOT NULL, complete_length INTEGER NOT NULL, kept_length INTEGER NOT NULL,
            checksum INTEGER NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL) WITHOUT ROWID;
        """

    /// Version 2's insert, as its courier ran it.
    private static let versionTwoInsert: SQL = """
        INSERT INTO responses (
            key, used, size, body_length, body_checksum, body_file, sha256, sha384, sha512, head, head_checksum, body)
        VALUES (?, (SELECT coalesce(max(used), 0) + 1 FROM responses), ?, ?, ?, NULL, ?, NULL, NULL, ?, ?, ?)
        ON CONFLICT (key) DO NOTHING
        """

    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-cache-version-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    private func store(_ directory: String) throws -> ResponseStore {
        let root = try CacheRoot(testing: directory)
        return ResponseStore(
            database: root.database, directory: try root.directory("http"), capacity: 1 << 20, evictionTarget: 0.5,
            maximumBodyLength: 1 << 19)
    }

    /// A version 2 database at `path`, open as its courier holds it, with
    /// `rows` stored: each a key and, when it has one, its body's SHA-256.
    private func versionTwoDatabase(at path: String, rows: [(key: String, sha256: [UInt8]?)]) throws -> Database {
        let database = try Database(openingDefensively: path)
        try database.execute("PRAGMA application_id = \(CacheDatabase.applicationID); PRAGMA user_version = 2")
        try database.execute(Self.versionTwo)
        for row in rows { try insertAsVersionTwo(row.key, sha256: row.sha256, into: database) }
        try database.execute("INSERT INTO response_usage VALUES (0, \(rows.count * 4), \(rows.count))")
        return database
    }

    /// Stores `key` (a head and a body of one byte each, 4 bytes counted)
    /// as a courier of version 2 did.
    private func insertAsVersionTwo(_ key: String, sha256: [UInt8]?, into database: Database) throws {
        let head: [UInt8] = [1, 2, 3]
        try database.run(
            Self.versionTwoInsert,
            [
                .blob(Array(key.utf8)), .integer(4), .integer(1), .integer(Int64(bitPattern: XXH3.hash([9]))),
                sha256.map { .blob($0) } ?? .null, .blob(head), .integer(Int64(bitPattern: XXH3.hash(head))), .blob([9]),
            ])
    }

    private func names(of kind: String, in store: ResponseStore) -> [String] {
        let rows = store.database.use { database throws(SQLiteError) in
            try database.rows("SELECT name FROM sqlite_schema WHERE type = ? ORDER BY name", [.text(kind)])
        }
        return (rows ?? []).compactMap { if case .text(let name) = $0.first { name } else { nil } }
    }

    @Test func aDatabaseOfVersionTwoKeepsItsRowsAndFindsTheirDigestsInTheirOwnTable() throws {
        try withDirectory { directory in
            // Given a Cache.db of version 2 with two rows, one with a recorded digest
            let digest = [UInt8](repeating: 7, count: 32)
            try versionTwoDatabase(at: directory + "/Cache.db", rows: [("a", digest), ("b", nil)]).close()

            // When courier opens it
            let store = try store(directory)

            // Then it is of version 3, without the old digest indexes, and its rows are served
            #expect(store.database.use { database throws(SQLiteError) in try database.integerPragma("user_version") } == 3)
            #expect(names(of: "index", in: store).filter { $0.contains("sha") }.allSatisfy { $0.hasPrefix("response_digests_") })
            #expect(names(of: "index", in: store).contains("response_digests_by_sha256"))
            #expect(store.find(key: Array("a".utf8))?.body == .inline([9]))
            #expect(store.find(key: Array("b".utf8))?.body == .inline([9]))
            #expect(store.totals() == (8, 2))

            // And the recorded digest is found by its own table, the row without one is not there
            #expect(store.keys(withDigest: digest, .sha256) == [Array("a".utf8)])
            let digestRows = store.database.use { database throws(SQLiteError) in
                try database.rows("SELECT count(*) FROM response_digests").first?.first
            }
            #expect(digestRows == .integer(1))

            // And a store, a replacement and a removal work and keep the digests in step
            var digests = BodyDigests()
            digests[.sha256] = digest
            #expect(store.insert(insert("c", digests: digests)).inserted == .stored(nil))
            #expect(store.keys(withDigest: digest, .sha256) == [Array("c".utf8), Array("a".utf8)])
            #expect(store.insert(insert("a", digests: BodyDigests())).inserted == .stored(nil))
            #expect(store.remove(key: Array("c".utf8)))
            #expect(store.keys(withDigest: digest, .sha256) == [])
        }
    }

    private func insert(_ key: String, digests: BodyDigests) -> ResponseStore.Insert {
        ResponseStore.Insert(
            key: Array(key.utf8), head: [1, 2, 3], bodyLength: 1, checksum: XXH3.hash([9]), digests: digests, body: .bytes([9]))
    }

    @Test func aCourierOfVersionTwoStillUsingItGoesOnAndWhatItLeavesIsRemovedAtTheNextStart() throws {
        try withDirectory { directory in
            // Given a courier of version 2 that has its database open, its insert prepared
            let digest = [UInt8](repeating: 7, count: 32)
            let old = try versionTwoDatabase(at: directory + "/Cache.db", rows: [("a", nil), ("b", digest)])
            defer { old.close() }

            // When a courier of this version opens the database meanwhile
            let store = try store(directory)
            #expect(store.database.use { database throws(SQLiteError) in try database.integerPragma("user_version") } == 3)

            // Then the old courier still stores, finds by digest (its column) and removes
            let other = [UInt8](repeating: 8, count: 32)
            try insertAsVersionTwo("c", sha256: other, into: old)
            #expect(try old.rows("SELECT key FROM responses WHERE sha256 = ? ORDER BY used DESC", [.blob(other)]) == [[.blob(Array("c".utf8))]])
            #expect(try old.run("DELETE FROM responses WHERE key = ?", [.blob(Array("b".utf8))]) == 1)

            // And this courier serves what the old one stored, and finds by digest no row that is gone
            #expect(store.find(key: Array("c".utf8))?.body == .inline([9]))
            #expect(store.keys(withDigest: digest, .sha256) == [])
            #expect(store.keys(withDigest: other, .sha256) == [])

            // And the next start removes the digests of the row the old one deleted
            let next = try self.store(directory)
            next.recount()
            let left = next.database.use { database throws(SQLiteError) in
                try database.rows("SELECT count(*) FROM response_digests").first?.first
            }
            #expect(left == .integer(0))
            #expect(next.totals() == (8, 2))
        }
    }
}
