import Foundation
import SQLite
import Testing

/// The SQLite connection's statements: parameters bound in order, whatever
/// their kinds and however they alternate.
@Suite(.timeLimit(.minutes(1)))
struct SQLiteDatabaseTests {
    private func withDatabase(_ body: (Database) throws -> Void) throws {
        let directory = NSTemporaryDirectory() + "courier-sqlite-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try Database(openingDefensively: directory + "/test.db")
        defer { database.close() }
        try body(database)
    }

    @Test func everyKindOfParameterIsBoundAtItsPlace() throws {
        try withDatabase { database in
            // Given numbers, nulls, texts and blobs in every order, an empty
            // blob among them
            try database.execute("CREATE TABLE t (a, b, c, d, e, f, g, h, i)")
            let long = String(repeating: "long text ", count: 40)
            let values: [SQLiteValue] = [
                .integer(1), .null, .text("é"), .integer(-2), .blob([1, 2, 3]), .blob([]), .real(0.5), .text(long), .integer(9),
            ]
            // When they are bound to one statement
            #expect(try database.run("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", values) == 1)
            // Then each column holds its own parameter
            let rows = try database.rows("SELECT a, b, c, d, e, f, g, h, i FROM t")
            #expect(rows == [values])
        }
    }

    @Test func parametersAfterTheLastTextOrBlobAreBound() throws {
        try withDatabase { database in
            // Given numbers only, and numbers after a blob
            try database.execute("CREATE TABLE t (a, b, c)")
            try database.run("INSERT INTO t VALUES (?, ?, ?)", [.integer(7), .real(1.5), .null])
            try database.run("INSERT INTO t VALUES (?, ?, ?)", [.blob([0xFF]), .integer(8), .integer(9)])
            // Then the rows hold them all, in order
            let rows = try database.rows("SELECT a, b, c FROM t ORDER BY rowid")
            #expect(rows == [[.integer(7), .real(1.5), .null], [.blob([0xFF]), .integer(8), .integer(9)]])
            // And a statement run again binds its new parameters, not the old
            let found = try database.rows("SELECT count(*) FROM t WHERE b = ? AND c IS ?", [.integer(8), .integer(9)])
            #expect(found == [[.integer(1)]])
            let none = try database.rows("SELECT count(*) FROM t WHERE b = ? AND c IS ?", [.integer(8), .null])
            #expect(none == [[.integer(0)]])
        }
    }

    @Test func aParameterBoundAfterTheListIsBoundAfterItWhateverItsKind() throws {
        try withDatabase { database in
            // Given a list of a blob and a number, and one of numbers only
            try database.execute("CREATE TABLE t (a, b, c)")
            let lists: [[SQLiteValue]] = [[.blob([1]), .integer(2)], [.integer(3), .real(0.25)]]
            let lasts: [SQLiteValue] = [.integer(-4), .real(2.5), .null, .text("five"), .blob([6, 6])]
            // When each is run with every kind of value bound after it
            for list in lists {
                for last in lasts { #expect(try database.run("INSERT INTO t VALUES (?, ?, ?)", list, then: last) == 1) }
            }
            // Then the rows hold the list and then the value, the statement's earlier bindings gone
            let rows = try database.rows("SELECT a, b, c FROM t ORDER BY rowid")
            #expect(rows == lists.flatMap { list in lasts.map { list + [$0] } })
            #expect(try database.run("INSERT INTO t VALUES (?, ?, ?)", [.integer(7)], then: .integer(8)) == 1)
            #expect(try database.rows("SELECT a, b, c FROM t ORDER BY rowid DESC LIMIT 1") == [[.integer(7), .integer(8), .null]])
        }
    }
}
