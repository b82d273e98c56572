#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SQLite
import Synchronization

/// The disk tier's rows in `Cache.db` (`responses`, see
/// `CacheDatabase.schema`) and the body files they name in `http/`.
///
/// A body of at most `inlineLimit` bytes is a blob in its row, unless it was
/// written to a file already (beside its destination) that can be linked;
/// a larger one is a file in `http/` named by its body id (16 lower-case hex digits),
/// made complete before the row that names it commits: written to an
/// unnamed file (`O_TMPFILE`, which vanishes if the writer dies) and given
/// its name, or hard-linked from the file a transfer wrote, inside the
/// write transaction that inserts the row. So a row never names a torn
/// body, and a body file no row names can only be one whose writer died
/// between the link and the commit, or whose row was deleted by a process
/// that died before it unlinked the file: `removeUnnamedFiles` finds them
/// under the write lock, when no writer can be between the two. Files are
/// not fsynced: a power loss (not a crash) can leave a body short, which
/// its length and XXH3-64 checks on every read catch.
///
/// Rows are hostile input (the directory may be anyone's): every column is
/// checked for its type and range as it is read (`Row.init?`), and a row
/// that fails is deleted. Usage (`response_usage`) is kept in step by every
/// write in the same transaction (a batch's inserts make theirs together,
/// before anything else reads it); a count that disagrees with the rows
/// (a file another program wrote) is recounted.
final class ResponseStore: Sendable {
    /// Bodies up to this many bytes are kept inline in their rows, unless
    /// they are in a file already that is linked into `http/`. SQLite's
    /// own measurements find blobs up to about 100 KiB read and written
    /// faster from the database than from files of their own; a body
    /// written to its destination anyway costs less linked than written
    /// twice more (to the log, then copied back to the database).
    static let inlineLimit = 64 << 10

    /// Where a stored body is.
    enum Body: Equatable {
        case inline([UInt8])
        /// The body file `http/<id>` (16 lower-case hex digits).
        case file(UInt64)
    }

    /// Which write stored an entry: its row and its body's checksum. A
    /// later write under the same key is another.
    struct Write: Equatable, Sendable {
        var row: Int64
        var checksum: UInt64
    }

    /// A row of `responses`, its columns checked.
    struct Row: Equatable {
        var id: Int64
        var head: [UInt8]
        var bodyLength: Int64
        var checksum: UInt64
        var body: Body
        /// No row was used more recently: a hit on it changes no recency,
        /// so it writes nothing.
        var isMostRecentlyUsed = false

        /// The row `values` hold (`id, head, body_length, body_checksum,
        /// body_file, body, head_checksum`, then whether it is the most
        /// recently used), or nil when a column is not of
        /// its type or range: a head whose XXH3-64 is the one recorded (so
        /// a byte changed in a head that would still parse is caught), a
        /// length of 0 to `maximumBodyLength`, a body inline of exactly that
        /// length and at most `inlineLimit`, or else a body file id.
        init?(_ values: [SQLiteValue], maximumBodyLength: Int64) {
            guard values.count >= 7, let id = values[0].integer, let head = values[1].blob,
                let headChecksum = values[6].integer, XXH3.hash(head) == UInt64(bitPattern: headChecksum),
                let length = values[2].integer, (0...maximumBodyLength).contains(length),
                let checksum = values[3].integer
            else { return nil }
            switch (values[4], values[5]) {
            case (.null, .blob(let bytes)) where Int64(bytes.count) == length && length <= ResponseStore.inlineLimit:
                body = .inline(bytes)
            case (.integer(let file), .null):
                body = .file(UInt64(bitPattern: file))
            default:
                return nil
            }
            self.id = id
            self.head = head
            self.bodyLength = length
            self.checksum = UInt64(bitPattern: checksum)
            isMostRecentlyUsed = values.count > 7 && values[7] == .integer(1)
        }
    }

    /// A body to store.
    enum NewBody: Sendable {
        /// Kept inline: at most `inlineLimit` bytes.
        case bytes([UInt8])
        /// Hard-linked into `http/` from the file a transfer wrote.
        case link(CacheBodyFile)
        /// An unnamed file (`O_TMPFILE`) in `http/`, written complete.
        case unnamed(fd: Int32)
    }

    /// What an insert asks for.
    struct Insert {
        var key: [UInt8]
        var head: [UInt8]
        var bodyLength: Int64
        var checksum: UInt64
        var digests: BodyDigests
        var body: NewBody
    }

    let database: CacheDatabase
    /// `<cache dir>/http`, where body files are.
    let directory: DirectoryHandle
    /// The usage above which inserts evict, and the share of it they evict
    /// down to.
    let capacity: Int64
    let evictionTarget: Int64
    /// The longest body a row may claim.
    let maximumBodyLength: Int64
    private let bodyIDs = BodyIDs()

    init(database: CacheDatabase, directory: DirectoryHandle, capacity: Int64, evictionTarget: Double, maximumBodyLength: Int64) {
        self.database = database
        self.directory = directory
        self.capacity = capacity
        self.evictionTarget = Int64(Double(capacity) * evictionTarget)
        self.maximumBodyLength = maximumBodyLength
    }

    /// The name of the body file `id`: its 16 hex digits, written into the
    /// one string made (a store names its file twice, a disk hit on a body
    /// file once).
    static func fileName(_ id: UInt64) -> String {
        String(unsafeUninitializedCapacity: 16) { name in
            for index in 0..<16 { name[index] = hexDigits[Int(truncatingIfNeeded: id >> (60 - 4 * index)) & 0xF] }
            return 16
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// The body id a name in `http/` stands for, or nil when it is not one
    /// courier gives (16 lower-case hex digits).
    static func fileID(_ name: [UInt8]) -> UInt64? {
        guard name.count == 16, name.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else { return nil }
        return UInt64(String(decoding: name, as: UTF8.self), radix: 16)
    }

    // MARK: - Reading

    /// `key`'s row, checked; a row that fails its checks is deleted.
    func find(key: [UInt8]) -> Row? {
        let values = database.read { database throws(SQLiteError) in
            try database.rows(
                """
                SELECT id, head, body_length, body_checksum, body_file, body, head_checksum,
                    used >= (SELECT max(used) FROM responses)
                FROM responses WHERE key = ?
                """, [.blob(key)]
            ).first
        }
        guard let values = values ?? nil else { return nil }
        guard let row = Row(values, maximumBodyLength: maximumBodyLength) else {
            removeRows("SELECT id FROM responses WHERE key = ?", [.blob(key)])
            return nil
        }
        return row
    }

    /// Makes `row` the most recently used; nothing to write when it was
    /// when it was found.
    func touch(_ row: Row) {
        guard !row.isMostRecentlyUsed else { return }
        database.use { database throws(SQLiteError) in
            try database.run(
                "UPDATE responses SET used = (SELECT coalesce(max(used), 0) + 1 FROM responses) WHERE id = ?", [.integer(row.id)])
        }
    }

    /// The keys of rows whose body's recorded digest by `algorithm` is
    /// `digest`, the most recently used first, at most `limit`: a hint,
    /// which the row read by its key confirms or not.
    func keys(withDigest digest: [UInt8], _ algorithm: HashAlgorithm, limit: Int = 16) -> [[UInt8]] {
        let rows = database.read { database throws(SQLiteError) in
            // The column is one of three names, never text from outside.
            try database.rows(
                """
                SELECT responses.key FROM response_digests JOIN responses USING (id)
                WHERE response_digests.\(algorithm.rawValue) = ? ORDER BY responses.used DESC LIMIT ?
                """,
                [.blob(digest), .integer(Int64(limit))])
        }
        return (rows ?? []).compactMap { $0.first?.blob }
    }

    /// The bytes counted against the capacity and the number of rows.
    func totals() -> (bytes: Int64, entries: Int) {
        database.use { database throws(SQLiteError) in try usage(in: database) } ?? (0, 0)
    }

    // MARK: - Writing

    /// The outcome of an insert.
    enum Inserted: Equatable {
        /// With the body file's id, for a body not kept inline.
        case stored(UInt64?)
        /// A hard link could not be made (another file system, a link
        /// limit): the caller may copy the body to an unnamed file and
        /// insert again.
        case notLinked
        case failed
    }

    /// Inserts `insert` in place of `key`'s row, puts its body file in place
    /// within the same transaction, and evicts least recently used rows
    /// while usage is above the capacity (in a `CacheDatabase.batch`, once
    /// for the batch's inserts, before it commits); the files of the rows
    /// replaced or evicted are unlinked once the transaction (in a batch,
    /// the batch's) has committed. Returns what happened, with the name of
    /// the body file put in place (nil for a body kept inline, or when
    /// nothing was stored), made once for the link and the caller.
    func insert(_ insert: Insert) -> (inserted: Inserted, fileName: String?) {
        let row = NewRow(insert, into: self)
        // Each of the write's closures holds the row alone, or the store
        // alone: that one reference is its context, and nothing is
        // allocated for it.
        let write = CacheDatabase.Write(
            prepare: { row.prepare() },
            statements: { database, leavingUsage, carried throws(SQLiteError) in
                try row.statements(in: database, leavingUsage: leavingUsage, carried: &carried)
            },
            rolledBack: { row.rolledBack() },
            settle: { [self] database, change throws(SQLiteError) in
                let evicted = try apply(change, in: database)
                if evicted.isEmpty { return {} }
                return { [self] in unlink(evicted) }
            })
        switch database.write(write) {
        case .made: return row.id == 0 ? (.stored(nil), nil) : (.stored(row.id), row.name)
        case .unprepared: if case .link = insert.body { return (.notLinked, nil) } else { return (.failed, nil) }
        case .failed: return (.failed, nil)
        }
    }

    /// What an insert writes: its row's columns, its digests, and the body
    /// file it puts in place (its id, 0 for a body kept inline, and name).
    /// One object, which every closure of the write holds.
    private final class NewRow: Sendable {
        let store: ResponseStore
        let id: UInt64
        let name: String
        let key: SQLiteValue
        /// The columns of `replaceRow`'s `INSERT` but `used`, which is
        /// bound after them.
        let values: [SQLiteValue]
        /// The columns of the row's `response_digests` row after its id;
        /// nil when it has no digest.
        let digests: [SQLiteValue]?
        let size: Int64
        let body: NewBody

        init(_ insert: Insert, into store: ResponseStore) {
            self.store = store
            // A body file's id and name, drawn for a body file only.
            id = if case .bytes = insert.body { UInt64(0) } else { store.bodyIDs.next() }
            name = id == 0 ? "" : ResponseStore.fileName(id)
            let file: SQLiteValue = id == 0 ? .null : .integer(Int64(bitPattern: id))
            let inline: SQLiteValue = if case .bytes(let bytes) = insert.body { .blob(bytes) } else { .null }
            key = .blob(insert.key)
            size = Int64(insert.head.count) + insert.bodyLength
            values = [
                key, .integer(size), .integer(insert.bodyLength), .integer(Int64(bitPattern: insert.checksum)), file, .blob(insert.head),
                .integer(Int64(bitPattern: XXH3.hash(insert.head))), inline,
            ]
            digests = ResponseStore.columns(insert.digests)
            body = insert.body
        }

        /// The body file first, under the write lock (so that
        /// `removeUnnamedFiles` never finds it without its row): a link
        /// that fails changes nothing.
        func prepare() -> Bool {
            switch body {
            case .bytes: true
            case .link(let source): source.link(into: store.directory, as: name)
            case .unnamed(let fd): store.directory.link(fd, as: name) == nil
            }
        }

        func statements(in database: Database, leavingUsage: Bool, carried: inout Int64?) throws(SQLiteError)
            -> CacheDatabase.Write.Made
        {
            // Run bare in a batch (the only writes told they may leave usage), the stamp is carried.
            let (files, change) = try store.replaceRow(
                key: key, values: values, digests: digests, size: size, in: database, bare: leavingUsage, carried: &carried)
            if leavingUsage {
                // A new key, the usual case, replaced no file: nothing to do
                // once committed, and no closure made for it.
                if files.isEmpty { return .init(committed: {}, unsettled: change) }
                return .init(committed: { [store] in store.unlink(files) }, unsettled: change)
            }
            let evicted = try store.apply(change, in: database)
            return .init(committed: { [store] in store.unlink(files + evicted) })
        }

        /// Rolled back, now or with the batch it was part of: the link made
        /// for it names nothing.
        func rolledBack() {
            if id != 0 { store.directory.remove(name) }
        }
    }

    /// Inserts the row `values` hold (the columns of `insert`'s `INSERT`
    /// but `used`) in place of `key`'s, the most recently used, with its
    /// `digests`; the body files of the rows replaced, and the change of
    /// usage to make (`apply`).
    ///
    /// Its `used` is one more than the largest in the table, as a hit's is
    /// (`touch`). A write of its own (not `bare`) has the `INSERT` read
    /// it. A bare write of a batch reads it once, or, when `carried` holds
    /// it (the bare write before it in the transaction inserted the row
    /// that has the largest, and nothing else wrote since), takes one more
    /// than that without a read, and sets `carried` to this row's. So the
    /// stamps, and the order of eviction, are those that a read for each
    /// row would give. A largest stamp that is not an integer below
    /// `Int64.max` (a file another program wrote) is left to the `INSERT`
    /// to read each time, and its sum taken as SQL takes it.
    private func replaceRow(
        key: SQLiteValue, values: [SQLiteValue], digests: [SQLiteValue]?, size: Int64, in database: Database, bare: Bool,
        carried: inout Int64?
    ) throws(SQLiteError) -> (files: [UInt64], change: CacheDatabase.UsageChange) {
        // NULL: the `INSERT` reads it.
        var used = SQLiteValue.null
        if bare {
            var last = carried.flatMap { $0 < .max ? $0 : nil }
            if last == nil {
                switch try database.rows("SELECT max(used) FROM responses").first?.first {
                case .integer(let largest)? where largest < .max: last = largest
                case .null?, nil: last = 0
                default: break
                }
            }
            carried = last.map { $0 + 1 }
            if let stamp = carried { used = .integer(stamp) }
        }
        // A new key, the usual case, is one statement: the insert does
        // nothing when the key has a row. That row is then looked up for
        // its id, size and body file (a plain read costs less than a
        // `RETURNING` clause), deleted with its digests, and the row
        // inserted again.
        if try database.run(
            """
            INSERT INTO responses (key, size, body_length, body_checksum, body_file, head, head_checksum, body, used)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, (SELECT coalesce(max(used), 0) + 1 FROM responses)))
            ON CONFLICT (key) DO NOTHING
            """, values, then: used) == 1
        {
            if let digests { try recordDigests(digests, in: database) }
            return ([], CacheDatabase.UsageChange(bytes: size, entries: 1))
        }
        let replaced = try database.rows("SELECT id, size, body_file FROM responses WHERE key = ?", [key])
        try database.run("DELETE FROM responses WHERE key = ?", [key])
        for row in replaced { try database.run("DELETE FROM response_digests WHERE id = ?", [row[0]]) }
        let files = replaced.compactMap { $0[2].integer.map { UInt64(bitPattern: $0) } }
        let freed = replaced.reduce(Int64(0)) { $0 + max(0, $1[1].integer ?? 0) }
        try database.run(
            """
            INSERT INTO responses (key, size, body_length, body_checksum, body_file, head, head_checksum, body, used)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, (SELECT coalesce(max(used), 0) + 1 FROM responses)))
            """, values, then: used)
        if let digests { try recordDigests(digests, in: database) }
        return (files, CacheDatabase.UsageChange(bytes: size - freed, entries: 1 - replaced.count))
    }

    /// Records `digests` (`columns`) for the row just inserted, in place of
    /// any left under its id.
    private func recordDigests(_ digests: [SQLiteValue], in database: Database) throws(SQLiteError) {
        try database.run(
            "INSERT OR REPLACE INTO response_digests (id, sha256, sha384, sha512) VALUES (last_insert_rowid(), ?, ?, ?)", digests)
    }

    /// Makes `change` to the usage, then evicts least recently used rows
    /// while usage is above the capacity; their body files.
    private func apply(_ change: CacheDatabase.UsageChange, in database: Database) throws(SQLiteError) -> [UInt64] {
        try evict(from: try changeUsage(bytes: change.bytes, entries: change.entries, in: database), in: database)
    }

    /// Replaces the head of `key`'s row and its recorded digests, when it
    /// is still the row `id` (after a 304, or when a read proved a digest).
    /// False when it is not.
    @discardableResult
    func update(key: [UInt8], id: Int64, head: [UInt8], digests: BodyDigests) -> Bool {
        let changed = database.use { database throws(SQLiteError) -> Bool in
            try database.transaction { () throws(SQLiteError) -> Bool in
            guard let old = try database.rows(
                "SELECT length(head) FROM responses WHERE key = ? AND id = ?", [.blob(key), .integer(id)]
            ).first?.first?.integer else { return false }
            try database.run(
                """
                UPDATE responses SET head = ?, head_checksum = ?, size = size + ?,
                    used = (SELECT coalesce(max(used), 0) + 1 FROM responses) WHERE id = ?
                """,
                [.blob(head), .integer(Int64(bitPattern: XXH3.hash(head))), .integer(Int64(head.count) - old), .integer(id)])
            if let columns = Self.columns(digests) {
                try database.run(
                    "INSERT OR REPLACE INTO response_digests (id, sha256, sha384, sha512) VALUES (?, ?, ?, ?)",
                    [.integer(id)] + columns)
            } else {
                try database.run("DELETE FROM response_digests WHERE id = ?", [.integer(id)])
            }
            _ = try changeUsage(bytes: Int64(head.count) - old, entries: 0, in: database)
            return true
            }
        }
        return changed ?? false
    }

    /// Deletes `key`'s row and its body file. False when there was none.
    @discardableResult
    func remove(key: [UInt8]) -> Bool {
        removeRows("SELECT id FROM responses WHERE key = ?", [.blob(key)]) > 0
    }

    /// Deletes `row` (one that failed its checks) and its body file, when
    /// it is still there: a row another process wrote since is left.
    func remove(_ row: Row) {
        let file: SQLiteValue = if case .file(let id) = row.body { .integer(Int64(bitPattern: id)) } else { .null }
        removeRows(
            "SELECT id FROM responses WHERE id = ? AND body_checksum = ? AND body_file IS ?",
            [.integer(row.id), .integer(Int64(bitPattern: row.checksum)), file])
    }

    /// Deletes every row and body file; the number of rows deleted.
    @discardableResult
    func removeAll() -> Int {
        removeRows("SELECT id FROM responses", [])
    }

    /// Deletes the rows `select` finds, then their body files.
    @discardableResult
    private func removeRows(_ select: SQL, _ parameters: [SQLiteValue]) -> Int {
        let removed = database.use { database throws(SQLiteError) -> (Int, [UInt64]) in
            try database.transaction { () throws(SQLiteError) -> (Int, [UInt64]) in
                let ids = try database.rows(select, parameters).compactMap { $0.first?.integer }
                return (ids.count, try delete(ids: ids, in: database))
            }
        }
        guard let (count, files) = removed else { return 0 }
        database.afterCommit { [self] in unlink(files) }
        return count
    }

    /// Removes the files in `http/` that no row names: under the write
    /// lock, so no writer is between linking its file and committing its
    /// row. Names courier does not give (an earlier format's entries, what
    /// others put there) go too, whatever they are (a directory with what
    /// it holds, nothing a symbolic link points at). Returns how many of
    /// each went.
    func removeUnnamedFiles() -> (unnamed: Int, foreign: Int) {
        var candidates: [UInt64: [UInt8]] = [:]
        var foreign = 0
        directory.forEachName { name in
            if let id = Self.fileID(name) {
                candidates[id] = name
            } else if directory.removeTree(name) {
                foreign += 1
            }
        }
        guard !candidates.isEmpty else { return (0, foreign) }
        let unnamed = database.use { database throws(SQLiteError) -> Int in
            try database.transaction { () throws(SQLiteError) -> Int in
                // One pass over the rows (no index has `body_file`), not one per file.
                for row in try database.rows("SELECT body_file FROM responses WHERE body_file IS NOT NULL") {
                    if let id = row.first?.integer { candidates[UInt64(bitPattern: id)] = nil }
                }
                var removed = 0
                for name in candidates.values where directory.removeTree(name) { removed += 1 }
                return removed
            }
        }
        return (unnamed ?? 0, foreign)
    }

    // MARK: - Internals

    /// Deletes the rows `ids` and lowers usage by what they counted; the
    /// body files they named, for the caller to unlink after the commit.
    private func delete(ids: [Int64], in database: Database) throws(SQLiteError) -> [UInt64] {
        guard !ids.isEmpty else { return [] }
        var files: [UInt64] = []
        var freed: Int64 = 0
        var deleted = 0
        for id in ids {
            guard let row = try database.rows("DELETE FROM responses WHERE id = ? RETURNING size, body_file", [.integer(id)]).first
            else { continue }
            try database.run("DELETE FROM response_digests WHERE id = ?", [.integer(id)])
            freed += max(0, row[0].integer ?? 0)
            deleted += 1
            if let file = row[1].integer { files.append(UInt64(bitPattern: file)) }
        }
        _ = try changeUsage(bytes: -freed, entries: -deleted, in: database)
        return files
    }

    /// While `bytes` is above the capacity, deletes the least recently used
    /// rows until it is at most `evictionTarget`; their body files.
    private func evict(from bytes: Int64, in database: Database) throws(SQLiteError) -> [UInt64] {
        guard bytes > capacity else { return [] }
        var bytes = bytes
        var files: [UInt64] = []
        while bytes > evictionTarget {
            let rows = try database.rows("SELECT id, size FROM responses ORDER BY used LIMIT 64")
            guard !rows.isEmpty else {
                // The count disagrees with the rows: there is nothing left.
                try setUsage(bytes: 0, entries: 0, in: database)
                break
            }
            var ids: [Int64] = []
            for row in rows where bytes > evictionTarget {
                guard let id = row[0].integer else { continue }
                ids.append(id)
                bytes -= max(0, row[1].integer ?? 0)
            }
            files += try delete(ids: ids, in: database)
            bytes = try usage(in: database).bytes
        }
        return files
    }

    /// `response_usage`, or the rows counted when it is missing or out of
    /// range (then written back).
    private func usage(in database: Database) throws(SQLiteError) -> (bytes: Int64, entries: Int) {
        if let row = try database.rows("SELECT bytes, entries FROM response_usage WHERE id = 0").first,
            let usage = Self.usage(row)
        {
            return usage
        }
        return try recountUsage(in: database)
    }

    /// Adds `bytes` and `entries` to `response_usage`, for a write that
    /// changed the rows by as much; the bytes it comes to. A count that is
    /// missing, not of integers (which SQL arithmetic would take as
    /// numbers all the same) or out of range, before or after, is counted
    /// again from the rows, which hold the write already. The sum is read
    /// back by a statement of its own: cheaper than a `RETURNING` clause,
    /// which SQLite answers through a temporary table.
    private func changeUsage(bytes: Int64, entries: Int, in database: Database) throws(SQLiteError) -> Int64 {
        let changed = try database.run(
            """
            UPDATE response_usage SET bytes = bytes + ?, entries = entries + ?
            WHERE id = 0 AND typeof(bytes) = 'integer' AND typeof(entries) = 'integer' AND bytes >= 0 AND entries >= 0
            """,
            [.integer(bytes), .integer(Int64(entries))])
        if changed == 1, let row = try database.rows("SELECT bytes, entries FROM response_usage WHERE id = 0").first,
            let usage = Self.usage(row)
        {
            return usage.bytes
        }
        return try recountUsage(in: database).bytes
    }

    /// Usage as `response_usage` holds it, when its columns are integers in range.
    private static func usage(_ row: [SQLiteValue]) -> (bytes: Int64, entries: Int)? {
        guard row.count >= 2, let bytes = row[0].integer, let entries = row[1].integer, bytes >= 0, entries >= 0,
            entries <= Int64(Int32.max)
        else { return nil }
        return (bytes, Int(entries))
    }

    /// Counts usage from the rows and writes it to `response_usage`.
    private func recountUsage(in database: Database) throws(SQLiteError) -> (bytes: Int64, entries: Int) {
        let counted = try database.rows("SELECT total(max(size, 0)), count(*) FROM responses").first
        let bytes = Int64(min(counted?[0].real ?? 0, Double(Int64.max / 2)))
        let entries = Int(counted?[1].integer ?? 0)
        try setUsage(bytes: bytes, entries: entries, in: database)
        return (bytes, entries)
    }

    private func setUsage(bytes: Int64, entries: Int, in database: Database) throws(SQLiteError) {
        try database.run(
            "INSERT OR REPLACE INTO response_usage (id, bytes, entries) VALUES (0, ?, ?)",
            [.integer(max(0, bytes)), .integer(Int64(max(0, entries)))])
    }

    /// The digest columns of `response_digests` (`sha256`, `sha384`,
    /// `sha512`: each the digest, or NULL), or nil when there is none.
    private static func columns(_ digests: BodyDigests) -> [SQLiteValue]? {
        guard !digests.isEmpty else { return nil }
        return [HashAlgorithm.sha256, .sha384, .sha512].map { digests[$0].map { .blob($0) } ?? .null }
    }

    /// Unlinks the body files `ids`, after the rows naming them are gone
    /// for good.
    private func unlink(_ ids: [UInt64]) {
        for id in ids { directory.remove(Self.fileName(id)) }
    }

    /// Recounts usage from the rows (at start: another program's count is
    /// not believed), and removes the recorded digests of rows that are
    /// gone (which a courier of schema version 2 leaves when it deletes
    /// a row, see `CacheDatabase.fromVersion2`).
    func recount() {
        database.use { database throws(SQLiteError) in
            try database.transaction { () throws(SQLiteError) in
                try database.run("DELETE FROM response_usage")
                _ = try usage(in: database)
                try database.run("DELETE FROM response_digests WHERE id NOT IN (SELECT id FROM responses)")
            }
        }
    }
}

/// Ids for new body files: SplitMix64's sequence from a random seed drawn
/// once per store (one per process and cache directory), so no two of its
/// ids are the same (its output is a bijection of a counter) and another
/// process's, from a seed of its own, are as unlikely to meet them as
/// random draws; without a draw from the system (a system call) per body
/// file.
final class BodyIDs: Sendable {
    private let seed = UInt64.random(in: 0...UInt64.max)
    private let drawn = Atomic<UInt64>(0)

    /// A new id, never 0 (which names no file).
    func next() -> UInt64 {
        while true {
            let count = drawn.add(1, ordering: .relaxed).newValue
            var mixed = seed &+ count &* 0x9E37_79B9_7F4A_7C15
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            mixed ^= mixed >> 31
            if mixed != 0 { return mixed }
        }
    }
}
