import CLibsqlite3
import CSQLiteShim

/// What SQLite said went wrong.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The extended result code.
    public let code: Int32
    public let message: String

    public init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }

    /// `SQLITE_NOTADB`, for a file that is not the database its caller
    /// expects.
    public static func notADatabase(_ message: String) -> SQLiteError {
        SQLiteError(code: SQLITE_NOTADB, message: message)
    }

    /// The primary result code (`SQLITE_BUSY`, `SQLITE_CORRUPT`, …).
    public var primaryCode: Int32 { code & 0xFF }

    /// The file is not a database, or a damaged one: it can only be
    /// dropped and made again.
    public var isDamaged: Bool { primaryCode == SQLITE_CORRUPT || primaryCode == SQLITE_NOTADB }

    public var description: String { "SQLite error \(code): \(message)" }
}

/// A value of a row's column, or of a statement's parameter.
public enum SQLiteValue: Equatable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    public var integer: Int64? {
        if case .integer(let value) = self { value } else { nil }
    }

    public var real: Double? {
        switch self {
        case .real(let value): value
        case .integer(let value): Double(value)
        default: nil
        }
    }

    public var blob: [UInt8]? {
        if case .blob(let bytes) = self { bytes } else { nil }
    }
}

/// The text of one SQL statement. A literal is found among the prepared
/// statements by where it is in the program, without reading its text; a
/// text made as courier runs (interpolated or built) by its text.
public struct SQL: ExpressibleByStringInterpolation, Sendable {
    fileprivate enum Key: Hashable {
        /// A literal's address and length in bytes.
        case literal(UInt, Int)
        case text(String)
    }

    fileprivate let key: Key
    private let literal: StaticString?

    public init(stringLiteral literal: StaticString) {
        guard literal.hasPointerRepresentation else {
            key = .text(literal.description)
            self.literal = nil
            return
        }
        key = .literal(UInt(bitPattern: literal.utf8Start), literal.utf8CodeUnitCount)
        self.literal = literal
    }

    public init(stringInterpolation: Interpolation) {
        self.init(stringInterpolation.text)
    }

    /// The text of an interpolated literal.
    public struct Interpolation: StringInterpolationProtocol {
        fileprivate var text = ""

        public init(literalCapacity: Int, interpolationCount: Int) {
            text.reserveCapacity(literalCapacity + 16 * interpolationCount)
        }

        public mutating func appendLiteral(_ literal: StaticString) {
            text += literal.description
        }

        public mutating func appendInterpolation(_ value: some CustomStringConvertible) {
            text += value.description
        }
    }

    /// A statement made as courier runs.
    public init(_ text: String) {
        key = .text(text)
        literal = nil
    }

    /// Prepares the statement on `handle`.
    fileprivate func prepare(on handle: OpaquePointer?, _ statement: inout OpaquePointer?) -> Int32 {
        let flags = UInt32(SQLITE_PREPARE_PERSISTENT)
        if let literal {
            return literal.withUTF8Buffer { text in
                text.withMemoryRebound(to: CChar.self) {
                    sqlite3_prepare_v3(handle, $0.baseAddress, Int32(clamping: $0.count), flags, &statement, nil)
                }
            }
        }
        guard case .text(let text) = key else { return SQLITE_MISUSE }
        return sqlite3_prepare_v3(handle, text, -1, flags, &statement, nil)
    }
}

/// One connection to one SQLite database file, opened as a file found in a
/// directory that others may write should be: see `init(openingDefensively:)`.
///
/// A connection is used by one thread at a time; its owner serialises the
/// calls. Prepared statements are kept for reuse, found as `SQL` says.
public final class Database {
    private var handle: OpaquePointer?
    /// The prepared statements of literals, found by the literal's address
    /// and length in a scan: a program holds a few dozen at most, and two
    /// integers compared for each cost less than the key hashed once.
    private var literalStatements: [(address: UInt, count: Int, statement: OpaquePointer)] = []
    /// The prepared statements of texts made as courier runs, by their text.
    private var statements: [SQL.Key: OpaquePointer] = [:]

    /// The longest text or blob a row may hold: what a hostile file can
    /// make courier allocate for one value.
    public static let valueLengthLimit: Int32 = 16 << 20

    /// Opens the database at `path`, creating an empty one when there is no
    /// file, with every guard SQLite offers against a file it did not write:
    /// no symbolic link anywhere in `path` (`SQLITE_OPEN_NOFOLLOW` refuses
    /// one in any component, so `path` must be a resolved one), defensive
    /// mode (no writes to the schema or to shadow tables by SQL), no
    /// extension loading, no triggers or views, no functions with side
    /// effects called from the schema, cell sizes checked as pages are
    /// read, values at most `valueLengthLimit` bytes; then WAL journaling
    /// (readers never wait for the writer; several processes may share the
    /// file) with `synchronous = NORMAL`, and `busyTimeout` milliseconds of
    /// waiting for another connection's lock before `SQLITE_BUSY`.
    ///
    /// Temporary storage is memory (`temp_store`): a statement or a
    /// savepoint inside a transaction keeps the pages it changes, to undo
    /// them, in a journal that would otherwise spill to a file of its own in
    /// `/var/tmp` past 64 KiB, made and unlinked for each statement.
    ///
    /// A new database gets pages of `pageSize` bytes (one that exists keeps
    /// its own); the WAL is copied back into the database once it holds
    /// `checkpointBytes` of pages, whatever their size (SQLite's default is
    /// 1,000 pages).
    public init(
        openingDefensively path: String, busyTimeout: Int32 = 5000, pageSize: Int = 4096, checkpointBytes: Int = 4 << 20
    ) throws(SQLiteError) {
        Self.configured
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX
            | SQLITE_OPEN_EXRESCODE
        let code = sqlite3_open_v2(path, &opened, flags, nil)
        handle = opened
        guard code == SQLITE_OK, opened != nil else {
            let error = SQLiteError(code: code, message: opened.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory")
            close()
            throw error
        }
        do throws(SQLiteError) {
            for (option, value) in [
                (SQLITE_DBCONFIG_DEFENSIVE, 1), (SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0),
                (SQLITE_DBCONFIG_ENABLE_TRIGGER, 0), (SQLITE_DBCONFIG_ENABLE_VIEW, 0), (SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0),
            ] {
                try check(courier_sqlite_db_config_flag(opened, option, Int32(value)))
            }
            sqlite3_limit(opened, SQLITE_LIMIT_LENGTH, Self.valueLengthLimit)
            try check(sqlite3_busy_timeout(opened, busyTimeout))
            // The page size first: a database in WAL mode keeps the one it has.
            try execute("PRAGMA page_size = \(pageSize)")
            try execute(
                "PRAGMA cell_size_check = ON; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY")
            let pages = max(1, checkpointBytes / Int(max(512, try integerPragma("page_size") ?? 4096)))
            try execute("PRAGMA wal_autocheckpoint = \(pages)")
        } catch {
            close()
            throw error
        }
    }

    /// SQLite's process-wide settings, made once before any connection is
    /// opened: no memory statistics, which take a mutex on every allocation
    /// SQLite makes (a savepoint's journal alone makes about 32 for each
    /// 32 KiB page it keeps), and which courier never reads. It only makes
    /// SQLite faster: when SQLite refuses it (it was in use already), it
    /// works as before.
    private static let configured: Void = {
        _ = courier_sqlite_disable_memory_statistics()
    }()

    deinit { close() }

    /// Finalizes the kept statements and closes the connection; nothing
    /// may be asked of it afterwards.
    public func close() {
        literalStatements.forEach { sqlite3_finalize($0.statement) }
        literalStatements = []
        statements.values.forEach { sqlite3_finalize($0) }
        statements = [:]
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Runs `sql`, one statement or several separated by `;`, without
    /// parameters; rows they return are ignored.
    public func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        defer { sqlite3_free(message) }
        guard code == SQLITE_OK else {
            throw SQLiteError(code: code, message: message.map { String(cString: $0) } ?? errorMessage)
        }
    }

    /// Runs one statement with `parameters` bound in order; returns the
    /// rows it changed. Kept prepared, like every statement but
    /// `execute`'s: transaction control too (`BEGIN`, `COMMIT`,
    /// `SAVEPOINT`), which a write per response would otherwise parse anew.
    @discardableResult
    public func run(_ sql: SQL, _ parameters: [SQLiteValue] = []) throws(SQLiteError) -> Int {
        _ = try rows(sql, parameters)
        return Int(sqlite3_changes(handle))
    }

    /// Runs one statement with `parameters` bound in order, then `last`
    /// after them; returns the rows it changed. For a statement whose
    /// parameters are the same but for one, which a caller keeps in a list
    /// and binds with that one, without a list made for each run (a number
    /// or a null is bound as it is; a text or a blob goes through a list).
    @discardableResult
    public func run(_ sql: SQL, _ parameters: [SQLiteValue], then last: SQLiteValue) throws(SQLiteError) -> Int {
        switch last {
        case .text, .blob: _ = try rows(sql, parameters + [last])
        case .null, .integer, .real: _ = try rows(sql, parameters, then: last)
        }
        return Int(sqlite3_changes(handle))
    }

    /// Runs one statement with `parameters` bound in order; returns its
    /// rows, each a value per column. Texts and blobs are bound where
    /// `parameters` holds them, not copied: the statement runs, and its
    /// bindings are cleared, while they are in reach.
    public func rows(_ sql: SQL, _ parameters: [SQLiteValue] = []) throws(SQLiteError) -> [[SQLiteValue]] {
        try rows(sql, parameters, then: nil)
    }

    /// `rows`, with `last`, a number or a null when there is one, bound
    /// after `parameters`.
    private func rows(_ sql: SQL, _ parameters: [SQLiteValue], then last: SQLiteValue?) throws(SQLiteError) -> [[SQLiteValue]] {
        let statement = try prepared(sql)
        do throws(SQLiteError) {
            return try binding(parameters[...], at: 1, in: statement) { () throws(SQLiteError) in
                defer {
                    sqlite3_reset(statement)
                    sqlite3_clear_bindings(statement)
                }
                let index = Int32(parameters.count + 1)
                switch last {
                case nil, .text?, .blob?: break
                case .null?: try check(sqlite3_bind_null(statement, index))
                case .integer(let number)?: try check(sqlite3_bind_int64(statement, index, number))
                case .real(let number)?: try check(sqlite3_bind_double(statement, index, number))
                }
                var rows: [[SQLiteValue]] = []
                while true {
                    let code = sqlite3_step(statement)
                    if code == SQLITE_DONE { return rows }
                    guard code == SQLITE_ROW else { throw SQLiteError(code: code, message: errorMessage) }
                    rows.append((0..<sqlite3_column_count(statement)).map { column(at: $0, of: statement) })
                }
            }
        } catch {
            // A parameter that could not be bound: the ones before it go too.
            sqlite3_clear_bindings(statement)
            throw error
        }
    }

    /// Runs `body` in a write transaction (`BEGIN IMMEDIATE`, so the lock
    /// is taken before the first read and no upgrade can fail half way),
    /// committed when `body` returns and rolled back when it throws.
    ///
    /// Inside a transaction already open (`isInTransaction`) it is a
    /// savepoint of that one: what `body` wrote is undone when it throws,
    /// and otherwise kept for the enclosing transaction to commit.
    public func transaction<Result>(_ body: () throws(SQLiteError) -> Result) throws(SQLiteError) -> Result {
        let nested = isInTransaction
        try run(nested ? "SAVEPOINT nested" : "BEGIN IMMEDIATE")
        do throws(SQLiteError) {
            let result = try body()
            try run(nested ? "RELEASE nested" : "COMMIT")
            return result
        } catch {
            // An error may have ended the whole transaction already.
            if nested, isInTransaction {
                _ = try? run("ROLLBACK TO nested")
                _ = try? run("RELEASE nested")
            } else if !nested {
                _ = try? run("ROLLBACK")
            }
            throw error
        }
    }

    /// The rows changed by every `INSERT`, `UPDATE` and `DELETE` on this
    /// connection since it was opened, undone ones too: a count that did
    /// not move means nothing was written.
    public var totalChanges: Int64 { handle.map { sqlite3_total_changes64($0) } ?? 0 }

    /// A transaction is open: SQLite left autocommit mode.
    public var isInTransaction: Bool { handle.map { sqlite3_get_autocommit($0) == 0 } ?? false }

    /// A `PRAGMA` that answers one integer (`application_id`,
    /// `user_version`); nil when it answers anything else.
    public func integerPragma(_ name: String) throws(SQLiteError) -> Int64? {
        try rows("PRAGMA \(name)").first?.first?.integer
    }

    private var errorMessage: String { handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed" }

    private func check(_ code: Int32) throws(SQLiteError) {
        guard code == SQLITE_OK else { throw SQLiteError(code: code, message: errorMessage) }
    }

    private func prepared(_ sql: SQL) throws(SQLiteError) -> OpaquePointer {
        if case .literal(let address, let count) = sql.key {
            for kept in literalStatements where kept.address == address && kept.count == count { return kept.statement }
        } else if let statement = statements[sql.key] {
            return statement
        }
        var statement: OpaquePointer?
        let code = sql.prepare(on: handle, &statement)
        guard code == SQLITE_OK, let statement else { throw SQLiteError(code: code, message: errorMessage) }
        if case .literal(let address, let count) = sql.key {
            literalStatements.append((address, count, statement))
        } else {
            statements[sql.key] = statement
        }
        return statement
    }

    /// Binds `parameters` from `index` on, then runs `body` while the bytes
    /// of each text and blob bound stay where they were bound. Numbers and
    /// nulls are bound in a loop; only a text or a blob, whose bytes are in
    /// reach inside a closure alone, takes a call of its own for the
    /// parameters after it (most statements bind one or two).
    private func binding<Returned>(
        _ parameters: ArraySlice<SQLiteValue>, at index: Int32, in statement: OpaquePointer,
        _ body: () throws(SQLiteError) -> Returned
    ) throws(SQLiteError) -> Returned {
        var index = index
        var position = parameters.startIndex
        while position < parameters.endIndex {
            switch parameters[position] {
            case .null:
                try check(sqlite3_bind_null(statement, index))
            case .integer(let number):
                try check(sqlite3_bind_int64(statement, index, number))
            case .real(let number):
                try check(sqlite3_bind_double(statement, index, number))
            case .text, .blob:
                return try bindingBytes(parameters[position...], at: index, in: statement, body)
            }
            position += 1
            index += 1
        }
        return try body()
    }

    /// `binding` from a text or a blob, the first of `parameters`.
    private func bindingBytes<Returned>(
        _ parameters: ArraySlice<SQLiteValue>, at index: Int32, in statement: OpaquePointer,
        _ body: () throws(SQLiteError) -> Returned
    ) throws(SQLiteError) -> Returned {
        guard let value = parameters.first else { return try body() }
        let rest = parameters.dropFirst()
        switch value {
        case .null, .integer, .real:
            return try binding(parameters, at: index, in: statement, body)
        case .text(let text):
            return try text.utf8CString.withUnsafeBufferPointer { text in
                let code = courier_sqlite_bind_text_static(statement, index, text.baseAddress, Int32(clamping: text.count - 1))
                return bound(code, then: rest, at: index, in: statement, body)
            }.get()
        case .blob(let bytes):
            // A blob of no bytes bound from a null pointer would be NULL.
            guard !bytes.isEmpty else {
                try check(sqlite3_bind_zeroblob(statement, index, 0))
                break
            }
            return try bytes.withUnsafeBytes { bytes in
                let code = courier_sqlite_bind_blob_static(statement, index, bytes.baseAddress, Int32(clamping: bytes.count))
                return bound(code, then: rest, at: index, in: statement, body)
            }.get()
        }
        return try binding(rest, at: index + 1, in: statement, body)
    }

    /// After binding the parameter at `index` gave `code`: the parameters
    /// after it bound and `body` run, inside the caller's reach of the bytes
    /// just bound; the failure when `code` is one.
    private func bound<Returned>(
        _ code: Int32, then rest: ArraySlice<SQLiteValue>, at index: Int32, in statement: OpaquePointer,
        _ body: () throws(SQLiteError) -> Returned
    ) -> Result<Returned, SQLiteError> {
        guard code == SQLITE_OK else { return .failure(SQLiteError(code: code, message: errorMessage)) }
        return Result { () throws(SQLiteError) in try binding(rest, at: index + 1, in: statement, body) }
    }

    private func column(at index: Int32, of statement: OpaquePointer) -> SQLiteValue {
        switch sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER:
            return .integer(sqlite3_column_int64(statement, index))
        case SQLITE_FLOAT:
            return .real(sqlite3_column_double(statement, index))
        case SQLITE_TEXT:
            let count = Int(sqlite3_column_bytes(statement, index))
            guard let text = sqlite3_column_text(statement, index) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, index))
            guard count > 0, let bytes = sqlite3_column_blob(statement, index) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default:
            return .null
        }
    }
}

@available(*, unavailable)
extension Database: Sendable {}
