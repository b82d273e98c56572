#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Locking
import Logging
import SQLite

/// `Cache.db` in the cache directory: the SQLite database where courier
/// keeps what it indexes there (the disk tier's responses, with their small
/// bodies inline, and the partial bodies kept for resuming), in WAL mode so
/// that every courier sharing the directory reads and writes it at once.
/// One per cache directory and process (`CacheRoot.database`).
///
/// The file is hostile input like everything in the cache directory. It is
/// opened through the cache directory's real path (resolved from the
/// descriptor `CacheRoot` holds, so a cache directory that is a symbolic
/// link works) with `SQLITE_OPEN_NOFOLLOW`, which refuses a symbolic link
/// anywhere in the path, and with `Database`'s defensive settings. Before
/// that, each of its names (`Cache.db` and its `-wal`, `-shm` and `-journal`
/// files) that is not a regular file of this user's (a symbolic link, a
/// FIFO, a directory, another user's file) is removed, and `Cache.db` is
/// made 0600 when missing: the files SQLite makes beside it take its mode.
/// A database that cannot be opened, that is damaged, truncated or not a
/// database at all, or that is another program's (its `application_id`
/// is not courier's, or it holds tables without one) or of a schema
/// version courier does not know (a newer one), is dropped with its side
/// files and made anew, with one line in the log: never a crash, and never
/// a byte of it trusted. One of an earlier version is brought to this one
/// (`adopt`).
final class CacheDatabase: Sendable {
    static let fileName = "Cache.db"
    static let sideFiles = ["-wal", "-shm", "-journal"]
    /// The page size of a new database (one that exists keeps its own).
    /// A commit writes each page it changed whole to the WAL, and SQLite
    /// checksums every byte of it there: a store whose body is a file
    /// changes a few hundred bytes in each of four or five pages (the row,
    /// the key and recency indexes, the usage), so the page size is most
    /// of what its commit costs. With 8 KiB pages the commit of a batch of
    /// such stores costs about half the instructions it did with 32 KiB.
    /// A body kept inline of more than about 8 KiB takes overflow pages:
    /// more system calls into the WAL than one large leaf, fewer bytes.
    static let pageSize = 8 << 10
    /// `PRAGMA application_id` of courier's database: "cour".
    static let applicationID: Int64 = 0x636F_7572
    /// `PRAGMA user_version` of the schema below.
    static let schemaVersion: Int64 = 3
    /// Every table of `schemaVersion`. Version 1 had `partial_bodies` alone;
    /// a database of it is brought to this version by making the others.
    /// Version 2 kept the recorded digests in columns of `responses`, each
    /// with an index: see `fromVersion2`.
    ///
    /// `responses` holds the disk tier (see `ResponseStore`): per key, the
    /// stored head (`DiskCacheEntry`'s metadata) and its XXH3-64, the body's
    /// length and XXH3-64, and the body itself inline, or the id of its
    /// body file in `http/`; `used` orders entries by their last use and
    /// `size` is what an entry counts against the capacity.
    /// `response_digests` holds the recorded digests of the bodies that
    /// have any, by the id of their row in `responses`, each indexed for
    /// the digest lookups: a table of its own, so that storing a response
    /// without digests (most are) writes no index of them.
    /// `response_usage` holds the sum of `size` and the count of rows, kept
    /// in step by every write, so that no write scans the table.
    static let schema = """
        CREATE TABLE IF NOT EXISTS responses (
            id INTEGER PRIMARY KEY,
            key BLOB UNIQUE NOT NULL,
            used INTEGER NOT NULL,
            size INTEGER NOT NULL,
            body_length INTEGER NOT NULL,
            body_checksum INTEGER NOT NULL,
            body_file INTEGER,
            head BLOB NOT NULL,
            head_checksum INTEGER NOT NULL,
            body BLOB
        );
        CREATE INDEX IF NOT EXISTS responses_by_use ON responses (used);
        CREATE TABLE IF NOT EXISTS response_digests (
            id INTEGER PRIMARY KEY,
            sha256 BLOB,
            sha384 BLOB,
            sha512 BLOB
        );
        CREATE INDEX IF NOT EXISTS response_digests_by_sha256 ON response_digests (sha256) WHERE sha256 IS NOT NULL;
        CREATE INDEX IF NOT EXISTS response_digests_by_sha384 ON response_digests (sha384) WHERE sha384 IS NOT NULL;
        CREATE INDEX IF NOT EXISTS response_digests_by_sha512 ON response_digests (sha512) WHERE sha512 IS NOT NULL;
        CREATE TABLE IF NOT EXISTS response_usage (
            id INTEGER PRIMARY KEY CHECK (id = 0),
            bytes INTEGER NOT NULL,
            entries INTEGER NOT NULL
        );
        CREATE TABLE IF NOT EXISTS partial_bodies (
            key BLOB PRIMARY KEY NOT NULL,
            file BLOB NOT NULL,
            url BLOB NOT NULL,
            validator_kind INTEGER NOT NULL,
            validator BLOB NOT NULL,
            complete_length INTEGER NOT NULL,
            kept_length INTEGER NOT NULL,
            checksum INTEGER NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        ) WITHOUT ROWID
        """

    /// What brings a database of version 2, once `schema` has made
    /// `response_digests`, to this version: the digests its rows recorded
    /// are copied there, and the indexes of its digest columns dropped, so
    /// that its inserts no longer write them. The columns stay, unread, in
    /// its `responses` (dropping them would rewrite every row, inline
    /// bodies and all); this version's inserts leave them NULL. Rows
    /// without a digest are not touched, so the migration costs a pass over
    /// the rows and the freed index pages, in one transaction.
    ///
    /// A courier of version 2 that has the database open meanwhile goes on
    /// working with it: its statements are prepared again against the new
    /// schema, in which every column they name still is. Its digest
    /// lookups find what it records in the old columns by a scan rather
    /// than an index, and this version's lookups do not see those digests
    /// (they are hints, which a lookup confirms against the entry, so
    /// nothing is served wrongly either way); the rows it deletes leave
    /// their `response_digests` rows, which point at no row, or at a row
    /// that took the same id, whose own record then refutes them, until
    /// the next start removes them (`ResponseStore.recount`). A courier of
    /// version 2 that opens it afterwards finds another version, and drops
    /// it and makes it anew, as with any version it does not know.
    static let fromVersion2 = """
        INSERT OR IGNORE INTO response_digests (id, sha256, sha384, sha512)
            SELECT id, sha256, sha384, sha512 FROM responses
            WHERE sha256 IS NOT NULL OR sha384 IS NOT NULL OR sha512 IS NOT NULL;
        DROP INDEX IF EXISTS responses_by_sha256;
        DROP INDEX IF EXISTS responses_by_sha384;
        DROP INDEX IF EXISTS responses_by_sha512
        """

    private let root: DirectoryHandle
    private let connection: Monitor<Connection>
    private let logger: Logger

    /// The connection, and the batch holding a write transaction open on
    /// it, if any.
    private struct Connection {
        var database: Database?
        /// The thread whose `batch` is running; another thread's `batch`
        /// waits for it to end.
        var batchThread: pthread_t?
        /// What waits for the batch's transaction to end.
        var afterCommit: [@Sendable () -> Void] = []
        var afterRollback: [@Sendable () -> Void] = []
        /// The writes the batch's transaction holds that were made without
        /// a savepoint of their own, with what each does once committed:
        /// when one of them fails half way, the transaction is rolled back
        /// and these are run again, one by one.
        var unsaved: [(write: Write, committed: @Sendable () -> Void)] = []
        /// Each write to the batch's transaction is made in a savepoint of
        /// its own: one that cannot be run again (made through `use`) is
        /// in it, or one failed already.
        var savesEachWrite = false
        /// What the batch's bare writes hand from one to the next (see
        /// `Write.statements`): nil when its transaction begins, and
        /// whenever anything else has written in it since.
        var carried: Int64?
        /// The change of `response_usage` that the batch's bare writes left
        /// to it, and what makes it: made before anything else is read or
        /// written in the transaction, and before it commits.
        var unsettled: (change: UsageChange, settle: Write.Settle)?
        /// The thread whose lookups share one read transaction
        /// (`readingTogether`), if any.
        var readThread: pthread_t?
        /// A read transaction `read` began for `readThread` is open.
        var readOpen = false

        /// The calling thread's batch is running.
        var isInCallersBatch: Bool {
            guard let batchThread else { return false }
            return pthread_equal(batchThread, pthread_self()) != 0
        }
    }

    /// Opens (or makes) the database in `root`; `use` says whether that
    /// worked. `CacheRoot.database` makes the one a process uses.
    init(root: DirectoryHandle, logger: Logger) {
        self.root = root
        self.logger = logger
        connection = Monitor(Connection())
        connection.withLock { $0.database = open() }
    }

    /// Runs `body` with the connection, one caller at a time; nil when
    /// there is no database or `body` failed (logged). A database found
    /// damaged meanwhile is dropped and made anew; `body` is not run again.
    /// While a `batch` runs, `body` runs inside its transaction, whichever
    /// thread calls, once the usage change the batch's writes left is made
    /// (so `body` reads `response_usage` as it stands). `body` gets the
    /// connection `inout sending`, so the compiler checks that it keeps
    /// nothing of it (a reassignment is not kept either).
    @discardableResult
    func use<Result: Sendable>(_ body: (inout sending Database) throws(SQLiteError) -> Result) -> Result? {
        use(sharingRead: false, body)
    }

    /// Runs `body`, which only reads, as `use` does; in the calling
    /// thread's `readingTogether`, outside a batch, inside the read
    /// transaction its lookups share (begun by the first).
    @discardableResult
    func read<Result: Sendable>(_ body: (inout sending Database) throws(SQLiteError) -> Result) -> Result? {
        use(sharingRead: true, body)
    }

    /// Runs `body`, in which the calling thread's lookups (`read`) share
    /// one read transaction: two locks taken on the WAL's shared memory for
    /// all of them rather than two for each. The transaction is begun by
    /// the first lookup and ended when `body` ends, or as soon as anything
    /// else uses the connection (a write, a batch, another thread's read),
    /// so it never holds back this process's writes, and each lookup sees
    /// the database as it was at the first lookup or later, with what this
    /// process wrote before it. For lookups of requests received before
    /// `body` began, that is everything committed before they arrived,
    /// which is what a lookup of its own would see. Only one thread's
    /// lookups share at a time; another's, or a `readingTogether` inside
    /// this one, runs `body` as it is.
    func readingTogether<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        let sharing = connection.withLock(wake: false) { connection -> Bool in
            guard connection.readThread == nil else { return false }
            connection.readThread = pthread_self()
            return true
        }
        guard sharing else { return try body() }
        defer {
            connection.withLock(wake: false) { connection in
                endRead(&connection)
                connection.readThread = nil
            }
        }
        return try body()
    }

    /// `use` and `read`: with `sharingRead`, in the calling thread's
    /// `readingTogether` and outside a batch, `body` runs in the read
    /// transaction it shares; otherwise that transaction is ended first.
    private func use<Result: Sendable>(
        sharingRead: Bool, _ body: (inout sending Database) throws(SQLiteError) -> Result
    ) -> Result? {
        let (result, settle) = connection.withLock(wake: false) { connection -> (Result?, [@Sendable () -> Void]) in
            if sharingRead, connection.batchThread == nil, let reader = connection.readThread, pthread_equal(reader, pthread_self()) != 0 {
                beginRead(&connection)
            } else {
                endRead(&connection)
            }
            var settle: [@Sendable () -> Void] = []
            if connection.batchThread != nil {
                begin(&connection)
                settle = settleUsage(&connection)
            }
            guard var database = connection.database else { return (nil, settle) }
            let changes = database.totalChanges
            defer {
                if connection.batchThread != nil {
                    // What `body` wrote cannot be run again: a write that fails
                    // later must be undone alone, not with the transaction.
                    if database.totalChanges != changes {
                        connection.savesEachWrite = true
                        connection.carried = nil
                    }
                    settleIfEnded(&connection)
                }
            }
            do throws(SQLiteError) {
                return (try body(&database), settle)
            } catch {
                failed(error, &connection)
                return (nil, settle)
            }
        }
        settle.forEach { $0() }
        return result
    }

    /// The rows and bytes a write adds to `response_usage` (frees, when
    /// negative).
    struct UsageChange: Equatable, Sendable {
        var bytes: Int64 = 0
        var entries = 0

        static func + (left: UsageChange, right: UsageChange) -> UsageChange {
            UsageChange(bytes: left.bytes + right.bytes, entries: left.entries + right.entries)
        }
    }

    /// A write of several statements that must be made together or not at
    /// all, which a batch may run again.
    struct Write: Sendable {
        /// Makes a change of `response_usage`, with what follows from it
        /// (eviction); returns what to do once it is committed.
        typealias Settle = @Sendable (Database, UsageChange) throws(SQLiteError) -> @Sendable () -> Void

        /// What the statements did.
        struct Made: Sendable {
            /// What to do once they are committed.
            var committed: @Sendable () -> Void
            /// The change of `response_usage` they left to `settle`.
            var unsettled = UsageChange()
        }

        /// What is done once, holding the write lock, before the statements
        /// first run (a body file linked into place); false when it could
        /// not be, and nothing is to be written.
        var prepare: @Sendable () -> Bool = { true }
        /// The statements, run in a transaction or a savepoint, or, in a
        /// batch, bare (and again when another write of the batch fails).
        /// Run bare, they are told they may leave their change of
        /// `response_usage` unmade (`Made.unsettled`): the batch makes the
        /// sum of its writes' changes once, through `settle`. Run bare,
        /// they also get `carried`, which they may set for the next bare
        /// write of the transaction to read (`ResponseStore`'s next `used`
        /// stamp, read from the table once rather than once per row): it
        /// is nil for the first, after anything else wrote in the
        /// transaction (so what they carry is what the table would say),
        /// and for a write that is not bare, whose setting is dropped.
        var statements: @Sendable (Database, _ leavingUsage: Bool, _ carried: inout Int64?) throws(SQLiteError) -> Made
        /// What to do when they are rolled back or fail.
        var rolledBack: @Sendable () -> Void
        /// What makes the usage change the statements leave; nil when they
        /// make their own.
        var settle: Settle?
    }

    /// How a write went.
    enum Written {
        /// Committed, or to be with the batch.
        case made
        /// Its `prepare` returned false.
        case unprepared
        case failed
    }

    /// Makes `write`: first its `prepare`, once, holding the write lock (in
    /// the transaction its statements join), then the statements, unless
    /// `prepare` returned false. `write.rolledBack` runs when they fail or
    /// are rolled back after `prepare` succeeded.
    ///
    /// In a batch's transaction, the statements are not wrapped in a
    /// savepoint of their own, which would copy every page they change to
    /// a journal: when one of them fails, the whole transaction is rolled
    /// back and the batch's earlier writes are made again, each in a
    /// savepoint, as is every later write of the batch. A write that fails
    /// is thus undone alone either way. Bare, they leave their change of
    /// `response_usage` to the batch, which makes the sum once (one
    /// statement, not one per write), before anything else reads or writes
    /// in its transaction and before it commits; when that fails, it is
    /// recovered from as from a failed write.
    func write(_ write: Write) -> Written {
        let (written, settle) = connection.withLock(wake: false) { connection -> (Written, [@Sendable () -> Void]) in
            endRead(&connection)
            guard let database = connection.database else { return (.failed, []) }
            var prepared = false
            func once() -> Bool {
                prepared = write.prepare()
                return prepared
            }
            let inBatch = connection.batchThread != nil
            if inBatch { begin(&connection) }
            if inBatch, database.isInTransaction, !connection.savesEachWrite {
                do throws(SQLiteError) {
                    guard once() else { return (.unprepared, []) }
                    let made = try write.statements(database, write.settle != nil, &connection.carried)
                    connection.unsaved.append((write, made.committed))
                    if let settle = write.settle {
                        connection.unsettled = ((connection.unsettled?.change ?? UsageChange()) + made.unsettled, settle)
                    }
                    return (.made, [])
                } catch {
                    return (.failed, recover(from: error, &connection) + [write.rolledBack])
                }
            }
            let lost = inBatch ? settleUsage(&connection) : []
            defer { if inBatch { settleIfEnded(&connection) } }
            do throws(SQLiteError) {
                let committed = try database.transaction { () throws(SQLiteError) -> (@Sendable () -> Void)? in
                    guard once() else { return nil }
                    var carried: Int64?
                    return try write.statements(database, false, &carried).committed
                }
                guard let committed else { return (.unprepared, lost) }
                guard inBatch, database.isInTransaction else { return (.made, lost + [committed]) }
                connection.afterCommit.append(committed)
                connection.afterRollback.append(write.rolledBack)
                return (.made, lost)
            } catch {
                failed(error, &connection)
                return (.failed, lost + (prepared ? [write.rolledBack] : []))
            }
        }
        settle.forEach { $0() }
        return written
    }

    /// Makes the usage change the batch's bare writes left to it; when that
    /// fails, recovers as from a failed write (`recover`). What waits for
    /// the writes lost then, to run once the lock is let go.
    private func settleUsage(_ connection: inout Connection) -> [@Sendable () -> Void] {
        guard let (change, settle) = connection.unsettled, let database = connection.database else { return [] }
        connection.unsettled = nil
        // It may delete rows (eviction): the next bare write reads the table again.
        connection.carried = nil
        do throws(SQLiteError) {
            connection.afterCommit.append(try settle(database, change))
            return []
        } catch {
            return recover(from: error, &connection)
        }
    }

    /// After a write of a batch failed without a savepoint of its own:
    /// rolls back the transaction (unless the failure ended it already)
    /// and makes the batch's earlier writes again in another, each in a
    /// savepoint, as every later write of the batch will be. What waits for
    /// the writes that were lost, or made alone when the transaction could
    /// not be begun again, to run once the lock is let go.
    private func recover(from error: SQLiteError, _ connection: inout Connection) -> [@Sendable () -> Void] {
        let unsaved = connection.unsaved
        connection.unsaved = []
        connection.unsettled = nil
        connection.carried = nil
        if connection.database?.isInTransaction == true { _ = try? connection.database?.run("ROLLBACK") }
        var settle = connection.afterRollback
        connection.afterCommit = []
        connection.afterRollback = []
        failed(error, &connection)
        begin(&connection)
        connection.savesEachWrite = true
        guard let database = connection.database else { return settle + unsaved.map(\.write.rolledBack) }
        for (write, _) in unsaved {
            do throws(SQLiteError) {
                let committed = try database.transaction { () throws(SQLiteError) in
                    var carried: Int64?
                    return try write.statements(database, false, &carried).committed
                }
                if database.isInTransaction {
                    connection.afterCommit.append(committed)
                    connection.afterRollback.append(write.rolledBack)
                } else {
                    settle.append(committed)
                }
            } catch {
                logger.warning("\(root.path(of: Self.fileName)): \(error.message)")
                settle.append(write.rolledBack)
            }
        }
        return settle
    }

    /// Logs `error`; a database it found damaged is dropped and made anew.
    private func failed(_ error: SQLiteError, _ connection: inout Connection) {
        guard error.isDamaged else {
            logger.warning("\(root.path(of: Self.fileName)): \(error.message)")
            return
        }
        logger.warning("\(root.path(of: Self.fileName)) is damaged (\(error.message)): dropped it and made it anew")
        connection.database?.close()
        drop()
        connection.database = open()
        connection.readOpen = false
    }

    /// Runs `body`, in which every write made through `use` joins one
    /// write transaction, begun by the first and committed when `body` ends,
    /// before `batch` returns: many small writes cost one commit (one lock
    /// taken, the pages they share written once), and a batch that writes
    /// nothing costs nothing. Each write keeps its own
    /// atomicity: one that fails is undone alone (a `Database.transaction`
    /// inside is a savepoint; a `write` has none, and its failure rolls the
    /// transaction back and makes the batch's earlier writes again, see
    /// `write`). What waits for a write to be committed (`afterCommit`)
    /// waits for the batch.
    ///
    /// The database stays locked against other processes' writers while
    /// `body` runs: a batch is for writes made together, not for waiting.
    /// What other threads of this process do with it meanwhile runs inside
    /// the transaction, without waiting: their reads see the batch's writes,
    /// and their writes commit with it (what the batch's thread stores is
    /// what must be committed before its outcomes go out). A batch inside a
    /// batch is part of it; another thread's batch waits for this one to
    /// end. When the transaction cannot be begun (another process holds
    /// the lock past the busy timeout), each write is its own.
    func batch<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        let outermost = connection.wait(until: { $0.batchThread == nil || $0.isInCallersBatch }) { connection -> Bool in
            guard connection.batchThread == nil else { return false }
            endRead(&connection)
            connection.batchThread = pthread_self()
            return true
        }
        guard outermost else { return try body() }
        defer {
            let (committed, rolledBack) = connection.withLock { connection in
                defer { connection.batchThread = nil }
                return finish(&connection)
            }
            committed.forEach { $0() }
            rolledBack.forEach { $0() }
        }
        return try body()
    }

    /// Runs `committed` once what this thread wrote through `use` is
    /// committed: now, or when its batch commits; `rolledBack` instead when
    /// the batch's transaction is rolled back.
    func afterCommit(_ committed: @escaping @Sendable () -> Void, rolledBack: @escaping @Sendable () -> Void = {}) {
        let now = connection.withLock(wake: false) { connection -> Bool in
            endRead(&connection)
            guard connection.isInCallersBatch, connection.database?.isInTransaction == true else { return true }
            connection.afterCommit.append(committed)
            connection.afterRollback.append(rolledBack)
            return false
        }
        if now { committed() }
    }

    /// Begins the batch's transaction unless it is open; a failure
    /// (logged) leaves the write at hand its own.
    private func begin(_ connection: inout Connection) {
        endRead(&connection)
        guard let database = connection.database, !database.isInTransaction else { return }
        do throws(SQLiteError) {
            try database.run("BEGIN IMMEDIATE")
            connection.savesEachWrite = false
            connection.carried = nil
        } catch {
            logger.warning("\(root.path(of: Self.fileName)): \(error.message)")
        }
    }

    /// Begins the read transaction the calling thread's lookups share,
    /// unless it is open; a failure (logged) leaves the lookup at hand its
    /// own. `BEGIN` takes no lock: the first read does.
    private func beginRead(_ connection: inout Connection) {
        guard !connection.readOpen, let database = connection.database, !database.isInTransaction else { return }
        do throws(SQLiteError) {
            try database.run("BEGIN")
            connection.readOpen = true
        } catch {
            logger.warning("\(root.path(of: Self.fileName)): \(error.message)")
        }
    }

    /// Ends the read transaction that lookups share, if it is open, before
    /// anything else uses the connection.
    private func endRead(_ connection: inout Connection) {
        guard connection.readOpen else { return }
        connection.readOpen = false
        guard let database = connection.database, database.isInTransaction else { return }
        do throws(SQLiteError) {
            try database.run("COMMIT")
        } catch {
            _ = try? database.run("ROLLBACK")
        }
    }

    /// After a use in a batch: when an error ended the batch's transaction
    /// (SQLite rolls back the whole of it on a full disk or an I/O error),
    /// or the database was made anew, what waited for it is settled as
    /// rolled back; the next write begins another.
    private func settleIfEnded(_ connection: inout Connection) {
        guard connection.database?.isInTransaction != true else { return }
        let rolledBack = connection.afterRollback + connection.unsaved.map(\.write.rolledBack)
        connection.afterCommit = []
        connection.afterRollback = []
        connection.unsaved = []
        connection.unsettled = nil
        connection.carried = nil
        rolledBack.forEach { $0() }
    }

    /// Makes the usage change the batch's writes left, then commits the
    /// batch's transaction (rolls it back when that fails); what waited for
    /// it, to run once the lock is let go.
    private func finish(_ connection: inout Connection) -> (committed: [@Sendable () -> Void], rolledBack: [@Sendable () -> Void]) {
        defer {
            connection.afterCommit = []
            connection.afterRollback = []
            connection.unsaved = []
            connection.unsettled = nil
            connection.carried = nil
        }
        endRead(&connection)
        guard connection.database?.isInTransaction == true else { return ([], []) }
        let lost = settleUsage(&connection)
        let unsaved = connection.unsaved
        guard let database = connection.database, database.isInTransaction else {
            return ([], lost + connection.afterRollback + unsaved.map(\.write.rolledBack))
        }
        do throws(SQLiteError) {
            try database.run("COMMIT")
            return (connection.afterCommit + unsaved.map(\.committed), lost)
        } catch {
            logger.warning("\(root.path(of: Self.fileName)): \(error.message)")
            _ = try? database.run("ROLLBACK")
            return ([], lost + connection.afterRollback + unsaved.map(\.write.rolledBack))
        }
    }

    // MARK: - Opening

    /// The database, opened as the type's comment says; nil (logged) when
    /// even one made anew cannot be opened.
    private func open() -> Database? {
        let shown = root.path(of: Self.fileName)
        for attempt in 0..<2 {
            let problem: String
            if let path = prepareFiles() {
                do throws(SQLiteError) {
                    let database = try Database(openingDefensively: path, pageSize: Self.pageSize)
                    do throws(SQLiteError) {
                        try adopt(database)
                        return database
                    } catch {
                        database.close()
                        throw error
                    }
                } catch {
                    problem = error.message
                }
            } else {
                problem = Destination.errorText()
            }
            if attempt == 0 {
                logger.warning("\(shown) could not be used (\(problem)): dropped it and made it anew")
                drop()
            } else {
                logger.warning("\(shown) could not be made (\(problem)): courier keeps no disk cache and no partial bodies")
            }
        }
        return nil
    }

    /// Removes what stands at the database's names and is not a regular
    /// file of this user's, makes `Cache.db` (0600) when missing, and
    /// returns the path SQLite opens it by; nil when that cannot be done.
    private func prepareFiles() -> String? {
        for name in [Self.fileName] + Self.sideFiles.map({ Self.fileName + $0 }) {
            guard let info = root.status(of: name) else { continue }
            if info.st_mode & S_IFMT != S_IFREG || info.st_uid != geteuid() {
                let removed = root.removeTree(name)
                logger.warning("\(root.path(of: name)) was not a file of this user's: \(removed ? "removed it" : "could not remove it (\(Destination.errorText()))")")
            }
        }
        let fd = openat(root.fd, Self.fileName, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        fchmod(fd, 0o600)
        close(fd)
        guard let directory = Self.realPath(of: root) else { return nil }
        return directory.endsWithSlash ? directory + Self.fileName : directory + "/" + Self.fileName
    }

    /// Takes a database that is new (sets its identity and makes its
    /// tables), courier's of this schema version, or courier's of an
    /// earlier one (brings it to this version, logged once: version 1 gains
    /// the tables it lacks, version 2 as `fromVersion2` says); throws
    /// `SQLITE_NOTADB` for any other. A database that is courier's of this
    /// version is only read; anything else is done in one write
    /// transaction, which reads the version again, so two processes
    /// opening a new or an older database at once never both make or
    /// migrate it.
    private func adopt(_ database: Database) throws(SQLiteError) {
        // Courier's database of this version has its tables (they were made in
        // the transaction that set the version): reading that writes nothing,
        // so a start does not wait on a commit.
        if try database.integerPragma("application_id") == Self.applicationID,
            try database.integerPragma("user_version") == Self.schemaVersion
        {
            return
        }
        let migrated = try database.transaction { () throws(SQLiteError) -> Int64? in
            let identity = try database.integerPragma("application_id") ?? 0
            let version = try database.integerPragma("user_version") ?? 0
            let tables = try database.rows("SELECT count(*) FROM sqlite_schema").first?.first?.integer ?? 0
            let older = identity == Self.applicationID && (1..<Self.schemaVersion).contains(version)
            if identity == 0, version == 0, tables == 0 {
                try database.execute("PRAGMA application_id = \(Self.applicationID)")
            } else if identity != Self.applicationID || (version != Self.schemaVersion && !older) {
                throw .notADatabase("not courier's database of schema version \(Self.schemaVersion)")
            }
            try database.execute("PRAGMA user_version = \(Self.schemaVersion)")
            try database.execute(Self.schema)
            if older, version == 2 { try database.execute(Self.fromVersion2) }
            return older ? version : nil
        }
        switch migrated {
        case 1?: logger.notice("\(root.path(of: Self.fileName)) was of schema version 1: added the disk tier's tables")
        case 2?: logger.notice("\(root.path(of: Self.fileName)) was of schema version 2: moved the recorded digests to a table of their own")
        default: break
        }
    }

    /// Removes the database and its side files: names in the cache
    /// directory, whatever they are (a directory with what it holds,
    /// nothing a symbolic link points at).
    private func drop() {
        root.removeTree(Self.fileName)
        for suffix in Self.sideFiles { root.removeTree(Self.fileName + suffix) }
    }

    /// The path `directory` has now, resolved by the kernel from its
    /// descriptor (no symbolic link in it): SQLite opens files by path.
    private static func realPath(of directory: DirectoryHandle) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/fd/\(directory.fd)", &buffer, buffer.count - 1)
        if count > 0, buffer[0] == CChar(UInt8(ascii: "/")) {
            return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        guard let resolved = realpath(directory.path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
