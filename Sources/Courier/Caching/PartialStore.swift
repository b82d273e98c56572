import Curl
import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Locking
import Logging
import SQLite

/// The partial bodies courier keeps so that a download that ended without
/// its whole body (a failure, a cancel, a shutdown, a kill) goes on where it
/// stopped: in this process, or in the next courier sharing the cache
/// directory. Bodies that may be kept stream in `<cache dir>/partials/`
/// from their first byte, each in a file of its own named by courier
/// (`<16 hex digits>.part`); `partial_bodies` in `Cache.db` names, per
/// request key, the file, the URL it came from, the validator and complete
/// length of its response, how many of its bytes are kept and their XXH3-64.
///
/// A kept body is hostile input like any file in the cache directory. While
/// a body streams, checkpoints are recorded every `checkpointInterval`
/// bytes and when the attempt ends (the length and the checksum of the
/// bytes up to it, which the transfer takes as it writes); before a byte of
/// a kept body is used, its file (a regular file of this user's with one
/// link, never reached through a symbolic link) is cut back to the last
/// checkpoint and read through to check that checksum, so a file that was
/// truncated, rewritten or replaced is dropped, and bytes past the
/// checkpoint (written after it, or appended since) are never trusted.
/// Within one process, the hash state of a body this process kept is
/// remembered, so continuing it does not read it again while the file is
/// the one kept, of the length kept.
///
/// While a process streams into a file, or continues one, it holds an
/// exclusive `flock` on it, taken before the file has its name: no other
/// courier takes a file in use, and no sweep removes it. Bodies of at most
/// `minimumLength` bytes never stream here, and rows are written only for
/// bodies worth keeping (at the first checkpoint, or when an attempt ends
/// short), so small downloads cost the store one lookup. The kept bytes of
/// every row together stay within `capacity` (`--partial-capacity`): the
/// least recently written go first. At start, rows whose file is gone are
/// deleted, and files that no row names go once no process holds them.
///
/// Everything that touches the database, and reading kept bodies through,
/// runs on the store's own queue, never on the transfers' thread.
final class PartialStore: Sendable {
    /// Bytes between two checkpoints of a streaming body.
    static let checkpointInterval: Int64 = 8 << 20
    /// Bodies of at most this many bytes are never kept: fetching one again
    /// costs about what its first round trip did, less than streaming it
    /// into the store and moving it out. The disk tier keeps bodies that
    /// small inline in their rows for the same reason.
    static let minimumLength = Int64(ResponseStore.inlineLimit)
    static let suffix = ".part"

    /// `<cache dir>/partials`.
    let directory: DirectoryHandle
    /// The file system `partials/` is on, read once (the directory is
    /// held open): a download to a destination keeps its body here only
    /// when the destination is on the same one.
    let device: dev_t?
    /// The kept bytes of every row together, at most.
    let capacity: Int64
    fileprivate let queue = DispatchQueue(label: "courier.partials")
    fileprivate let state = Locked(State())
    fileprivate let logger: Logger

    fileprivate struct State {
        /// Set once, on the queue.
        var database: CacheDatabase?
        /// Per key, the body this process kept last and the hash state of
        /// its kept bytes. Used on the queue.
        var hints: [[UInt8]: Hint] = [:]
        /// The files this process holds for a key (one streaming, or one
        /// an attempt that ended is still recording), by key.
        var held: [[UInt8]: String] = [:]
        /// What waits for this process to let a file go, by its name.
        var waiting: [String: [@Sendable () -> Void]] = [:]
    }

    /// How long taking a body waits for this process to let it go (an
    /// attempt that ended is still recording it) before starting anew.
    static let releaseWait = 2.0

    /// What this process knows of a body it kept: the file, by name, by
    /// identity and by its last modification, its length, and the hash
    /// state of those bytes.
    fileprivate struct Hint {
        var file: String
        var device: UInt64
        var inode: UInt64
        var modified: Int64
        var length: Int64
        var checksum: UInt64
        var hashState: XXH3.State
        var firstBytes: [UInt8]
    }

    /// Makes `partials` in `root`, and opens `Cache.db` and sweeps on the
    /// store's queue, so start-up does not wait for either.
    init(root: CacheRoot, capacity: Int64, logger: Logger) throws(Destination.Failure) {
        directory = try root.directory("partials")
        var info = stat()
        device = fstat(directory.fd, &info) == 0 ? info.st_dev : nil
        self.capacity = capacity
        self.logger = logger
        queue.async { [self] in
            let database = root.database
            state.withLock { $0.database = database }
            sweep()
        }
    }

    /// The modification time of `partials/` when it was last listed, and
    /// whether it held a file then; kept once that listing began long
    /// enough after the change (`isSettled`) that a file made or removed
    /// since changes the time.
    private let listed = Locked<(modified: timespec, holds: Bool)?>(nil)

    /// Whether a kept body may be there to take: false when `partials/`
    /// holds no file, which is known without listing it again while its
    /// modification time stays the one of the last listing. A file is made
    /// before the row that names it, so without files there is no body to
    /// continue, and the lookup (a hop to the store's queue and a query)
    /// is spared for every download while nothing is kept.
    func mayHoldBodies() -> Bool {
        var info = stat()
        guard fstat(directory.fd, &info) == 0 else { return true }
        let modified = info.st_mtim
        if let last = listed.withLock({ $0 }), last.modified.tv_sec == modified.tv_sec,
            last.modified.tv_nsec == modified.tv_nsec
        {
            return last.holds
        }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var holds = false
        directory.forEachName { _ in holds = true }
        listed.withLock { $0 = Self.isSettled(modified, at: now) ? (modified, holds) : nil }
        return holds
    }

    /// Whether a change made after `now` gives a directory last changed at
    /// `modified` another modification time. A file system that keeps
    /// nanoseconds stamps a change with the kernel's coarse clock, at most a
    /// tick (10 ms) behind the real time, so 20 ms is enough; one that keeps
    /// seconds, or two (FAT), needs two seconds. (A time on the second
    /// itself is taken as the coarse kind.)
    static func isSettled(_ modified: timespec, at now: timespec) -> Bool {
        let margin = modified.tv_nsec == 0 ? 2_000_000_000 : 20_000_000
        return (now.tv_sec - modified.tv_sec) * 1_000_000_000 + (now.tv_nsec - modified.tv_nsec) >= margin
    }

    /// Returns once everything asked of the store so far is done.
    func flush() {
        queue.sync {}
    }

    /// The key of `request`'s kept body: its `cacheKey`, else its URL and
    /// its request headers (names in lower case, sorted as bytes), all as
    /// bytes: what makes two requests one task, less the time-out.
    static func key(for request: DownloadRequest) -> [UInt8] {
        if let cacheKey = request.cacheKey { return Array(ResponseCache.key(cacheKey: cacheKey).utf8) }
        var key = Array(ResponseCache.key(url: request.url).utf8)
        let lines = request.headers.map { Array("\($0.name.lowercased()): \($0.value)".utf8) }
            .sorted { $0.lexicographicallyPrecedes($1) }
        for line in lines { key += [0x0A] + line }
        return key
    }

    // MARK: - Taking a kept body

    /// Looks up `key` on the store's queue and calls `then` there with its
    /// kept body, verified and locked for the caller, or nil: nothing kept,
    /// kept bytes that fail their checks (dropped), a file another process
    /// holds, or a body kept from another URL than `url` under a
    /// Last-Modified alone, which nothing proves to be the same resource
    /// unless `proven` (the request carries an integrity digest).
    /// A body this process still holds (an attempt that ended is recording
    /// it: a download cancelled and asked again at once, a retry) is waited
    /// for, up to `releaseWait` seconds.
    func take(key: [UInt8], url: String, proven: Bool, then: @escaping @Sendable (ResumePoint?) -> Void) {
        queue.async { [self] in take(key: key, url: url, proven: proven, waited: false, then: then) }
    }

    private func take(key: [UInt8], url: String, proven: Bool, waited: Bool, then: @escaping @Sendable (ResumePoint?) -> Void) {
        let once = Locked(false)
        let again: @Sendable () -> Void = { [self] in
            guard once.withLock({ done in defer { done = true }; return !done }) else { return }
            take(key: key, url: url, proven: proven, waited: true, then: then)
        }
        let waiting = !waited && state.withLock { state in
            guard let name = state.held[key] else { return false }
            state.waiting[name, default: []].append(again)
            return true
        }
        guard waiting else {
            then(resumePoint(key: key, url: url, proven: proven))
            return
        }
        queue.asyncAfter(deadline: .now() + Self.releaseWait, execute: again)
    }

    /// This process holds `name` for `key`.
    fileprivate func hold(_ name: String, for key: [UInt8]) {
        state.withLock { $0.held[key] = name }
    }

    /// This process let the file `name` go: what waited for it goes on.
    fileprivate func released(_ name: String, key: [UInt8]?) {
        let waiting = state.withLock { state in
            if let key, state.held[key].map({ $0.isExactly(name) }) ?? false { state.held[key] = nil }
            return state.waiting.removeValue(forKey: name) ?? []
        }
        for waiter in waiting { queue.async(execute: waiter) }
    }

    private func resumePoint(key: [UInt8], url: String, proven: Bool) -> ResumePoint? {
        guard let row = run({ database throws(SQLiteError) in try database.rows(SQL(Record.select + " WHERE key = ?"), [.blob(key)]) })?.first else { return nil }
        guard let record = Record(row: row) else {
            logger.warning("a kept partial body's record in Cache.db is not one courier writes: dropped it")
            deleteRow(key: key, file: row.count > 1 ? row[1].blob : nil)
            removeUnheld(row.count > 1 ? row[1].blob ?? [] : [])
            return nil
        }
        if !record.url.isExactly(url), !proven, case .lastModified = record.kept.validator { return nil }
        guard let (fd, info) = openKept(record.file) else {
            logger.warning("kept partial body \(directory.path(of: record.file)) is gone or not a file of courier's: dropped it")
            deleteRow(key: key, file: Array(record.file.utf8))
            return nil
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return nil
        }
        let file = PartialFile(store: self, name: record.file, fd: fd, row: record)
        let length = record.kept.offset
        guard Int64(info.st_size) >= length else {
            logger.warning("kept partial body \(directory.path(of: record.file)) is shorter than the \(length) bytes kept: dropped it")
            file.dropNow()
            return nil
        }
        let hint = state.withLock { $0.hints[key] }
        if let hint, hint.file.isExactly(record.file), hint.length == length, hint.checksum == record.checksum,
            hint.device == UInt64(info.st_dev), hint.inode == UInt64(info.st_ino), hint.modified == CacheFileIO.modified(info),
            Int64(info.st_size) == length
        {
            return ResumePoint(file: file, url: record.url, kept: record.kept, hashState: hint.hashState, firstBytes: hint.firstBytes)
        }
        if Int64(info.st_size) > length, ftruncate(fd, off_t(length)) != 0 {
            file.dropNow()
            return nil
        }
        let hasher = XXH3()
        var firstBytes: [UInt8] = []
        let read = CacheFileIO.forEachChunk(of: fd, length: length) { chunk in
            hasher.update(chunk)
            if firstBytes.count < ImageInfo.sniffLength { firstBytes += chunk.prefix(ImageInfo.sniffLength - firstBytes.count) }
        }
        guard read, hasher.finalize() == record.checksum else {
            logger.warning("kept partial body \(directory.path(of: record.file)) no longer matches its checksum: dropped it")
            file.dropNow()
            return nil
        }
        return ResumePoint(file: file, url: record.url, kept: record.kept, hashState: hasher.state, firstBytes: firstBytes)
    }

    /// `name` here opened for reading and writing when it is a regular file
    /// of this user's with no other name (so cutting it back cuts nothing
    /// else), never through a symbolic link or blocking on a FIFO.
    private func openKept(_ name: String) -> (fd: Int32, info: stat)? {
        let fd = openat(directory.fd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(), info.st_nlink == 1 else {
            close(fd)
            return nil
        }
        return (fd, info)
    }

    // MARK: - New bodies

    /// A new file for a body that may be kept, locked before it has a
    /// name of courier's (made unnamed, locked, then linked), so no sweep
    /// ever finds it unheld; nil when none can be made.
    func makeFile() -> PartialFile? {
        guard let fd = directory.makeUnnamedFile(mode: 0o600) else { return nil }
        flock(fd, LOCK_EX)
        for _ in 0..<4 {
            let name = Self.fileName(UInt64.random(in: 0...UInt64.max))
            guard let failure = directory.link(fd, as: name) else { return PartialFile(store: self, name: name, fd: fd, row: nil) }
            if failure != EEXIST { break }
        }
        close(fd)
        return nil
    }

    /// `<16 hex digits>.part`.
    static func fileName(_ number: UInt64) -> String {
        let digits = String(number, radix: 16)
        return String(repeating: "0", count: 16 - digits.utf8.count) + digits + suffix
    }

    /// Whether `name` is one `fileName` gives.
    static func isFileName(_ name: some Collection<UInt8>) -> Bool {
        let suffix = Array(Self.suffix.utf8)
        guard name.count == 16 + suffix.count else { return false }
        return name.prefix(16).allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
            && name.dropFirst(16).elementsEqual(suffix)
    }

    // MARK: - The database, on the queue

    @discardableResult
    fileprivate func run<Result: Sendable>(_ body: (inout sending Database) throws(SQLiteError) -> Result) -> Result? {
        guard let database = state.withLock({ $0.database }) else { return nil }
        return database.use(body)
    }

    fileprivate func deleteRow(key: [UInt8], file: [UInt8]?) {
        if let file {
            run { database throws(SQLiteError) in try database.run("DELETE FROM partial_bodies WHERE key = ? AND file = ?", [.blob(key), .blob(file)]) }
        } else {
            run { database throws(SQLiteError) in try database.run("DELETE FROM partial_bodies WHERE key = ?", [.blob(key)]) }
        }
        state.withLock { state in
            if let hint = state.hints[key], file.map({ hint.file.utf8.elementsEqual($0) }) ?? true { state.hints[key] = nil }
        }
    }

    /// Removes the file `name` unless it is not one of courier's names or a
    /// process holds it.
    fileprivate func removeUnheld(_ name: [UInt8]) {
        guard Self.isFileName(name), let (fd, _) = directory.openFile(name) else { return }
        defer { close(fd) }
        if flock(fd, LOCK_EX | LOCK_NB) == 0 { directory.remove(name) }
    }

    /// Drops the least recently written kept bodies (never `spared`'s, nor
    /// one a process holds) until the rest fit `capacity`.
    fileprivate func enforceCapacity(sparing spared: [UInt8]) {
        guard let rows = run({ database throws(SQLiteError) in try database.rows("SELECT key, file, kept_length FROM partial_bodies ORDER BY updated_at") }) else { return }
        var total = rows.reduce(Int64(0)) { total, row in total.addingReportingOverflow(max(0, row[2].integer ?? 0)).partialValue }
        for row in rows where total > capacity {
            guard let key = row[0].blob, key != spared, let file = row[1].blob else { continue }
            if Self.isFileName(file), let (fd, _) = directory.openFile(file) {
                defer { close(fd) }
                guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }
                directory.remove(file)
            }
            deleteRow(key: key, file: file)
            total -= max(0, row[2].integer ?? 0)
        }
    }

    /// Deletes rows whose file is gone, removes files no row names that no
    /// process holds (each is locked before it has its name) and names that
    /// are none of courier's, then keeps to the capacity.
    private func sweep() {
        guard let rows = run({ database throws(SQLiteError) in try database.rows("SELECT key, file FROM partial_bodies") }) else { return }
        var named = Set<[UInt8]>()
        for row in rows {
            guard let key = row[0].blob, let file = row[1].blob else { continue }
            if Self.isFileName(file), let info = directory.status(of: file), info.st_mode & S_IFMT == S_IFREG {
                named.insert(file)
            } else {
                logger.warning("kept partial body \(directory.path(of: String(decoding: file, as: UTF8.self))) is gone or not a file of courier's: dropped it")
                deleteRow(key: key, file: file)
            }
        }
        directory.forEachName { name in
            guard Self.isFileName(name) else {
                directory.removeTree(name)
                return
            }
            if !named.contains(name) { removeUnheld(name) }
        }
        enforceCapacity(sparing: [])
    }
}

/// A row of `partial_bodies`, read as hostile input: every field of the
/// type and within the range courier writes, the file one of courier's
/// names, the URL and the validator bytes that could go back into a request.
struct PartialRecord: Equatable, Sendable {
    var key: [UInt8]
    var file: String
    var url: String
    var kept: KeptBody
    var checksum: UInt64

    static let columns = "key, file, url, validator_kind, validator, complete_length, kept_length, checksum"

    init(key: [UInt8], file: String, url: String, kept: KeptBody, checksum: UInt64) {
        self.key = key
        self.file = file
        self.url = url
        self.kept = kept
        self.checksum = checksum
    }

    init?(row: [SQLiteValue]) {
        guard row.count == 8, let key = row[0].blob, let file = row[1].blob, PartialStore.isFileName(file),
            let url = row[2].blob.flatMap({ String(validating: $0, as: UTF8.self) }),
            let kind = row[3].integer, let value = row[4].blob, HTTPField.isSendableValidator(value),
            let complete = row[5].integer, let length = row[6].integer, let checksum = row[7].integer,
            complete > 0, (1..<complete).contains(length)
        else { return nil }
        let validator: ResumeValidator
        switch kind {
        case 1 where ResumeValidator.isStrongEntityTag(value): validator = .entityTag(value)
        case 2: validator = .lastModified(value)
        default: return nil
        }
        self.init(
            key: key, file: String(decoding: file, as: UTF8.self), url: url,
            kept: KeptBody(offset: length, completeLength: complete, validator: validator), checksum: UInt64(bitPattern: checksum))
    }

    /// The values of `columns`.
    var values: [SQLiteValue] {
        let kind: Int64
        switch kept.validator {
        case .entityTag: kind = 1
        case .lastModified: kind = 2
        }
        return [
            .blob(key), .blob(Array(file.utf8)), .blob(Array(url.utf8)), .integer(kind), .blob(kept.validator.value),
            .integer(kept.completeLength), .integer(kept.offset), .integer(Int64(bitPattern: checksum)),
        ]
    }
}

extension PartialStore {
    fileprivate typealias Record = PartialRecord
}

extension PartialRecord {
    static var select: String { "SELECT \(columns) FROM partial_bodies" }
}

/// A kept body, verified, whose file the taker holds: its bytes up to
/// `kept.offset`, their hash state, and their first bytes (for recognising
/// an image without reading the file again). Made on the store's queue and
/// handed to the transfer that continues it.
struct ResumePoint: Sendable {
    let file: PartialFile
    /// The URL the kept bytes came from.
    let url: String
    let kept: KeptBody
    /// The hash state of the kept bytes, which the transfer goes on from.
    let hashState: XXH3.State
    let firstBytes: [UInt8]
}

/// A body file in the partial store that this process holds: locked
/// (`flock`) from when it was made or taken until the last reference goes,
/// so no other courier takes it meanwhile. Its row is written at the first
/// checkpoint, or when the attempt keeps it; everything it asks of the
/// database runs on the store's queue, in the order asked.
final class PartialFile: Sendable {
    let store: PartialStore
    /// Its name in the store's directory.
    let name: String
    /// Open for reading and writing and locked; closed, and the lock let
    /// go, when the last reference goes.
    let fd: Int32
    private let row: Locked<RowState>

    private struct RowState {
        /// What the row says or will say (nil: the body is not to be kept).
        var record: PartialRecord?
        /// The row has been written, by this file or (for a body taken
        /// from the store) before.
        var written = false
        /// Another file took the key's row since: this one is not kept.
        var lost = false
        /// The key this process holds the file for, once it has one.
        var key: [UInt8]?
    }

    fileprivate init(store: PartialStore, name: String, fd: Int32, row: PartialRecord?) {
        self.store = store
        self.name = name
        self.fd = fd
        self.row = Locked(RowState(record: row, written: row != nil, key: row?.key))
        if let row { store.hold(name, for: row.key) }
    }

    deinit {
        close(fd)
        store.released(name, key: row.withLock { $0.key })
    }

    /// From here on the file holds the body of a response that may be kept
    /// under `key`, from `url`, of `completeLength` under `validator`; none
    /// of it is kept yet. A row this file had is rewritten at once (its
    /// bytes were dropped); a new file's waits for its first checkpoint.
    func describe(key: [UInt8], url: String, validator: ResumeValidator, completeLength: Int64) {
        let record = PartialRecord(
            key: key, file: name, url: url, kept: KeptBody(offset: 0, completeLength: completeLength, validator: validator),
            checksum: XXH3.empty)
        let rewrite = row.withLock { state in
            defer { (state.record, state.key) = (record, key) }
            return state.written
        }
        store.hold(name, for: key)
        guard rewrite else { return }
        store.queue.async { [self] in
            store.deleteRow(key: key, file: Array(name.utf8))
            row.withLock { $0.written = false }
        }
    }

    /// The body is not to be kept: its row (if it had one) goes now, the
    /// file stays as a body in transit.
    func forget() {
        let record = row.withLock { state in
            defer { state.record = nil }
            return state.written ? state.record : nil
        }
        guard let record else { return }
        store.queue.async { [self] in store.deleteRow(key: record.key, file: Array(name.utf8)) }
    }

    /// The first `length` bytes, whose XXH3-64 is `checksum`, are written:
    /// recorded when they fit the store's capacity.
    func checkpoint(length: Int64, checksum: UInt64) {
        guard length > 0, length <= store.capacity else { return }
        store.queue.async { [self] in record(length: length, checksum: checksum) }
    }

    /// The attempt ended with `length` bytes written, whose hash state is
    /// `hashState`: they are kept (or, past the capacity, those of the last
    /// checkpoint within it), else the file goes.
    func keep(length: Int64, hashState: XXH3.State, firstBytes: [UInt8]) {
        store.queue.async { [self] in
            let checksum = XXH3(continuing: hashState).finalize()
            var length = length
            var hint = true
            if length > store.capacity {
                length = row.withLock { $0.written && !$0.lost ? $0.record?.kept.offset ?? 0 : 0 }
                hint = false
            }
            guard length > 0, ftruncate(fd, off_t(length)) == 0,
                hint ? record(length: length, checksum: checksum) : row.withLock({ $0.written && !$0.lost })
            else {
                dropNow()
                return
            }
            guard hint, let key = row.withLock({ $0.record?.key }) else { return }
            var info = stat()
            guard fstat(fd, &info) == 0 else { return }
            let kept = PartialStore.Hint(
                file: name, device: UInt64(info.st_dev), inode: UInt64(info.st_ino), modified: CacheFileIO.modified(info),
                length: length, checksum: checksum, hashState: hashState, firstBytes: firstBytes)
            store.state.withLock { $0.hints[key] = kept }
        }
    }

    /// The whole body arrived: the file is now a downloaded body, no kept
    /// one, and its row goes.
    func completed() {
        forget()
    }

    /// Drops the kept bytes: the row and the file go.
    func drop() {
        store.queue.async { [self] in dropNow() }
    }

    /// `drop`, on the store's queue.
    fileprivate func dropNow() {
        let record = row.withLock { state in
            defer { state.record = nil }
            return state.written && !state.lost ? state.record : nil
        }
        if let record { store.deleteRow(key: record.key, file: Array(name.utf8)) }
        store.directory.remove(name)
    }

    /// Writes the row for `length` bytes whose XXH3-64 is `checksum`: takes
    /// the key's row the first time, updates it afterwards (unless another
    /// file took it meanwhile). On the store's queue; false when the body
    /// is not kept.
    @discardableResult
    private func record(length: Int64, checksum: UInt64) -> Bool {
        guard var record = row.withLock({ $0.lost ? nil : $0.record }) else { return false }
        record.kept.offset = length
        record.checksum = checksum
        let now = SQLiteValue.real(Date().timeIntervalSince1970)
        let first = !row.withLock { $0.written }
        let changed = store.run { database throws(SQLiteError) -> Int in
            if first {
                return try database.run(
                    SQL(
                        "INSERT INTO partial_bodies (\(PartialRecord.columns), created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                            + "ON CONFLICT (key) DO UPDATE SET file = excluded.file, url = excluded.url, "
                            + "validator_kind = excluded.validator_kind, validator = excluded.validator, "
                            + "complete_length = excluded.complete_length, kept_length = excluded.kept_length, "
                            + "checksum = excluded.checksum, created_at = excluded.created_at, updated_at = excluded.updated_at"),
                    record.values + [now, now])
            }
            return try database.run(
                "UPDATE partial_bodies SET kept_length = ?, checksum = ?, updated_at = ? WHERE key = ? AND file = ?",
                [.integer(length), .integer(Int64(bitPattern: checksum)), now, .blob(record.key), .blob(Array(name.utf8))])
        }
        guard let changed else { return false }
        row.withLock { state in
            state.record = record
            if changed == 0 { state.lost = true } else { state.written = true }
        }
        if first, changed > 0 { store.enforceCapacity(sparing: record.key) }
        return changed > 0
    }
}
