#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Curl
import Logging

/// The disk tier, as NSURLCache keeps it: per key, a row of `responses` in
/// `Cache.db` with the stored head and, for a body of at most
/// `ResponseStore.inlineLimit` bytes, the body itself; a larger body is a
/// file in `<cache dir>/http/` that the row names (see `ResponseStore`).
/// SQLite makes each write atomic and lets any number of processes read and
/// write the database at once; a body file is complete before the row that
/// names it commits.
///
/// Whatever the database and the directory hold is read as another
/// process's, or an attacker's, writing: a row's columns are checked for
/// their types and ranges, its head (`DiskCacheEntry`'s metadata) field by
/// field, its stored key compared with the asked key as bytes; a body is
/// believed only when its length is within the share of the capacity this
/// tier ever stores (`maximumBodyLength`) and, for a file, the file is a
/// regular file of exactly that length, checked before anything is read or
/// allocated; every body is checked against its XXH3-64 when read. A row
/// that fails is deleted. A body file is held in memory only when the
/// caller asks for it up to a bound of its own; larger ones are checked and
/// copied in bounded chunks.
///
/// A body file stored from a downloaded file is a hard link of that file's
/// inode when the cache directory is on the same file system, so a download
/// to a destination costs one write of its body; otherwise the body is
/// copied. The inode is then shared with the client's destination: a client
/// that rewrites, truncates or appends to its file in place changes the
/// cache's body too, which the length check on every open and the XXH3-64
/// check on every read catch, deleting the entry. Recency lives in the row,
/// so a hit never touches a client's file.
///
/// Least recently used entries go first: a write that takes usage (heads
/// and bodies) above `capacity` deletes entries from the least recently used
/// until usage is at most `evictionTarget` of it, in the write's
/// transaction (for a batch's writes, once, before the batch commits).
final class DiskCache: Sendable {
    /// Bodies larger than this share of the capacity (1/8) are not stored.
    static let largestShare: Int64 = 8
    /// An eviction deletes down to this fraction of the capacity.
    static let evictionTarget = 0.8

    /// `<cache dir>/http`, where bodies too large for their rows are.
    let directory: DirectoryHandle
    let capacity: Int64
    private let store: ResponseStore

    /// Opens the disk tier in `root`: `http` made, usage counted again from
    /// the rows, and files in `http` that no row names removed. Files of
    /// any other form there (an earlier format's entries, temporary files)
    /// are removed with one line in the log.
    init(root: CacheRoot, capacity: Int64) throws(Destination.Failure) {
        directory = try root.directory("http")
        self.capacity = capacity
        store = ResponseStore(
            database: root.database, directory: directory, capacity: capacity, evictionTarget: Self.evictionTarget,
            maximumBodyLength: capacity / Self.largestShare)
        store.recount()
        let removed = store.removeUnnamedFiles()
        if removed.foreign > 0 {
            root.logger.notice(
                "\(directory.path) held \(removed.foreign) files courier no longer keeps there (an earlier cache format): removed them")
        }
    }

    /// Bytes of stored heads and bodies.
    var usage: Int64 { store.totals().bytes }

    var count: Int { store.totals().entries }

    /// The largest body `store` accepts, and the largest an entry may claim.
    var maximumBodyLength: Int64 { capacity / Self.largestShare }

    /// `<cache dir>/http`, as reported.
    var path: String { directory.path }

    // MARK: - Reading

    /// The entry for `key`, its head checked (and its body file's length,
    /// for a body in a file) but not the body's checksum, which
    /// `withEntry`'s loader checks; its recency unchanged.
    func lookup(key: String) -> DiskCacheEntry? {
        guard let opened = open(key) else { return nil }
        opened.close()
        return opened.entry
    }

    /// Finds `key`'s entry once and hands `visit` the entry, checked as
    /// `lookup` checks it, and a loader of its verified body (see
    /// `BodyLoader`), both valid only during `visit`. Does not call `visit`
    /// on a miss.
    func withEntry<Result>(key: String, _ visit: (DiskCacheEntry, _ load: BodyLoader) -> Result) -> Result? {
        guard let opened = open(key) else { return nil }
        defer { opened.close() }
        return visit(opened.entry, BodyLoader { [self] limit, algorithm in loadBody(opened, inMemoryUpTo: limit, digesting: algorithm) })
    }

    /// Loads a found entry's body: `load(limit)` gives the bytes when the
    /// body is at most `limit` bytes or kept inline (at most
    /// `ResponseStore.inlineLimit`), else the body file, read through in
    /// bounded chunks for its check and held open; `load(limit,
    /// digesting:)` also gives the body's digest by that algorithm, taken
    /// from the bytes as they are read for the check. Either makes the entry
    /// the most recently used, and is nil (the entry deleted) when the body
    /// fails its check.
    struct BodyLoader {
        fileprivate let load: (Int64, HashAlgorithm?) -> (body: CachedBody, digests: BodyDigests)?

        func callAsFunction(_ inMemoryUpTo: Int64) -> CachedBody? { load(inMemoryUpTo, nil)?.body }

        func callAsFunction(_ inMemoryUpTo: Int64, digesting algorithm: HashAlgorithm?) -> (body: CachedBody, digests: BodyDigests)? {
            load(inMemoryUpTo, algorithm)
        }
    }

    /// The verified body of a found entry, which is now the most recently
    /// used, as `BodyLoader` gives it; nil, and the entry deleted, when the
    /// body fails its check.
    private func loadBody(
        _ opened: Opened, inMemoryUpTo limit: Int64, digesting algorithm: HashAlgorithm?
    ) -> (body: CachedBody, digests: BodyDigests)? {
        let row = opened.row
        let digests = algorithm.flatMap { BodyHasher([$0]) }
        let body: CachedBody
        switch (row.body, opened.bodyFD) {
        case (.inline(let bytes), _):
            guard XXH3.hash(bytes) == row.checksum else {
                store.remove(row)
                return nil
            }
            digests?.update(bytes)
            body = .bytes(bytes)
        case (.file, let fd?) where row.bodyLength <= limit:
            guard let bytes = CacheFileIO.read(fd, count: Int(row.bodyLength), at: 0), XXH3.hash(bytes) == row.checksum else {
                store.remove(row)
                return nil
            }
            digests?.update(bytes)
            body = .bytes(bytes)
        case (.file(let id), let fd?):
            guard CacheFileIO.hash(fd, length: row.bodyLength, digesting: digests) == row.checksum else {
                store.remove(row)
                return nil
            }
            // Held open past `withEntry`, whose descriptor closes with it.
            let held = fcntl(fd, F_DUPFD_CLOEXEC, 0)
            guard held >= 0 else { return nil }
            body = .file(StoredBodyFile(
                fd: held, directory: directory, name: ResponseStore.fileName(id), length: row.bodyLength, checksum: row.checksum))
        case (.file, nil):
            return nil
        }
        store.touch(row)
        return (body, digests?.finalize() ?? BodyDigests())
    }

    // MARK: - Writing

    /// Runs `body`, in which every write this thread makes to the tier
    /// joins one transaction of `Cache.db`, committed when `body` ends and
    /// before `batch` returns; body files of entries it replaced or evicted
    /// are unlinked after that commit (see `CacheDatabase.batch`). Each
    /// write stays atomic on its own: one that fails is undone alone.
    func batch<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        try store.database.batch(body)
    }

    /// Runs `body`, in which this thread's lookups share one read
    /// transaction of `Cache.db` (see `CacheDatabase.readingTogether`).
    func readingTogether<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        try store.database.readingTogether(body)
    }

    /// What a store put where.
    struct Stored: Equatable {
        /// The body file's name in `directory`; nil for a body kept inline.
        var fileName: String?
        /// The bytes of a body kept inline, as read to store them.
        var bytes: [UInt8]?
    }

    /// Stores `body` under `key`. False when the body is larger than
    /// `maximumBodyLength` (an older entry for `key` is then removed, as the
    /// new response supersedes it) or on an I/O error.
    @discardableResult
    func store(key: String, response: CachedResponse, body: [UInt8]) -> Bool {
        guard Int64(body.count) <= maximumBodyLength else {
            remove(key: key)
            return false
        }
        let checksum = XXH3.hash(body)
        if body.count <= ResponseStore.inlineLimit {
            return insert(key: key, response: response, length: Int64(body.count), checksum: checksum, body: .bytes(body)) != nil
        }
        return insertCopy(key: key, response: response, length: Int64(body.count), checksum: checksum) {
            CacheFileIO.write($0, body)
        } != nil
    }

    /// Stores the body `file` describes under `key`, with the length and
    /// checksum it gives: inline when small (its kept bytes, or the file
    /// checked against the checksum), else a body file that is a hard link
    /// of the file when it can be, else a copy. The file is left in place.
    /// Refused as `store(key:response:body:)`.
    @discardableResult
    func store(key: String, response: CachedResponse, file: CacheBodyFile) -> Bool {
        storeBody(key: key, response: response, file: file) != nil
    }

    /// Stores as `store(key:response:file:)` does; where the body went, or
    /// nil when nothing was stored. A small body whose file is `unnamed`
    /// (written beside its destination) is a hard link of that file when
    /// it can be, not inline: its bytes are then written once, not again
    /// to the database's log and once more when that is copied back.
    func storeBody(key: String, response: CachedResponse, file: CacheBodyFile) -> Stored? {
        guard file.length <= maximumBodyLength else {
            remove(key: key)
            return nil
        }
        let small = file.length <= Int64(ResponseStore.inlineLimit)
        if !small || file.unnamed != nil {
            let linked = insert(
                key: key, response: response, length: file.length, checksum: file.checksum,
                body: .link(file))
            if let linked { return linked }
            if !small {
                return insertCopy(key: key, response: response, length: file.length, checksum: file.checksum, file.copy(to:))
            }
        }
        guard let bytes = file.read(),
            insert(key: key, response: response, length: file.length, checksum: file.checksum, body: .bytes(bytes)) != nil
        else { return nil }
        return Stored(fileName: nil, bytes: bytes)
    }

    /// Stores the contents of the file at `bodyFile` under `key`, read
    /// through for its checksum, then kept as `store(key:response:file:)`
    /// keeps it.
    @discardableResult
    func store(key: String, response: CachedResponse, bodyFile: String) -> Bool {
        guard let file = CacheBodyFile(path: bodyFile) else { return false }
        return store(key: key, response: response, file: file)
    }

    /// Replaces the head of `key`'s entry, keeping its body (after a 304).
    /// False when there is no intact entry.
    @discardableResult
    func update(key: String, response: CachedResponse) -> Bool {
        guard let opened = open(key) else { return false }
        opened.close()
        return store.update(
            key: Self.bytes(of: key), id: opened.row.id, head: DiskCacheEntry.metadata(key: key, response: response),
            digests: response.digests)
    }

    /// The keys of entries recorded with a body whose digest by `algorithm`
    /// is `digest`, the most recently used first (the entry's row of
    /// `response_digests`, indexed): a hint, which the entry read by its
    /// key confirms or not.
    func keys(withDigest digest: [UInt8], _ algorithm: HashAlgorithm) -> [String] {
        store.keys(withDigest: digest, algorithm).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Adds `digests`, taken from a body as it was read and checked, to the
    /// record of `key`'s entry, when that entry is still the one `write`
    /// stored; its head is otherwise kept as it is now.
    func record(_ digests: BodyDigests, key: String, write: ResponseStore.Write) {
        guard let opened = open(key) else { return }
        opened.close()
        guard opened.entry.write == write else { return }
        var response = opened.entry.response
        response.digests = response.digests.merging(digests)
        guard response.digests != opened.entry.response.digests else { return }
        store.update(
            key: Self.bytes(of: key), id: opened.row.id, head: DiskCacheEntry.metadata(key: key, response: response),
            digests: response.digests)
    }

    @discardableResult
    func remove(key: String) -> Bool {
        store.remove(key: Self.bytes(of: key))
    }

    /// Deletes every entry and body file.
    func removeAll() {
        store.removeAll()
    }

    // MARK: - Internals

    /// `key`'s UTF-8, copied whole from a native string's storage (the
    /// generic copy of a string's UTF-8 view goes a byte at a time).
    private static func bytes(of key: String) -> [UInt8] {
        key.utf8.withContiguousStorageIfAvailable { Array($0) } ?? Array(key.utf8)
    }

    /// Inserts a row; nil when that failed, or, for a body to link, when
    /// the link could not be made (the caller copies instead).
    private func insert(
        key: String, response: CachedResponse, length: Int64, checksum: UInt64, body: ResponseStore.NewBody
    ) -> Stored? {
        let insert = ResponseStore.Insert(
            key: Self.bytes(of: key), head: DiskCacheEntry.metadata(key: key, response: response), bodyLength: length,
            checksum: checksum, digests: response.digests, body: body)
        let (inserted, fileName) = store.insert(insert)
        switch inserted {
        case .stored: return Stored(fileName: fileName)
        case .notLinked, .failed: return nil
        }
    }

    /// Writes a body with `fill` to an unnamed file in `directory`, then
    /// inserts the row that names it.
    private func insertCopy(
        key: String, response: CachedResponse, length: Int64, checksum: UInt64, _ fill: (Int32) -> Bool
    ) -> Stored? {
        guard let fd = directory.makeUnnamedFile(mode: 0o600) else { return nil }
        defer { close(fd) }
        guard fill(fd) else { return nil }
        return insert(key: key, response: response, length: length, checksum: checksum, body: .unnamed(fd: fd))
    }

    /// A found entry: its row, its head parsed, and its body file opened
    /// when it has one.
    private struct Opened {
        var row: ResponseStore.Row
        var entry: DiskCacheEntry
        var bodyFD: Int32?

        func close() {
            if let bodyFD { Glibc.close(bodyFD) }
        }
    }

    /// Finds `key`'s row and checks its head (the stored key the same bytes
    /// as `key`) and, for a body file, that it is a regular file of exactly
    /// the body length, all before any body byte is read; a row that fails
    /// is deleted. The caller closes the result.
    private func open(_ key: String) -> Opened? {
        guard let row = store.find(key: Self.bytes(of: key)) else { return nil }
        guard let (storedKey, response) = DiskCacheEntry.parseMetadata(row.head), storedKey.isExactly(key) else {
            store.remove(row)
            return nil
        }
        var bodyFD: Int32?
        if case .file(let id) = row.body {
            guard let (fd, info) = directory.openFile(ResponseStore.fileName(id)) else {
                store.remove(row)
                return nil
            }
            guard Int64(info.st_size) == row.bodyLength else {
                Glibc.close(fd)
                store.remove(row)
                return nil
            }
            bodyFD = fd
        }
        let entry = DiskCacheEntry(
            key: key, response: response, bodyLength: row.bodyLength, write: ResponseStore.Write(row: row.id, checksum: row.checksum))
        return Opened(row: row, entry: entry, bodyFD: bodyFD)
    }
}
