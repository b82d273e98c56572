import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization
import Locking

/// The disk tier: in `<cache dir>/http/`, per key, an entry file named by
/// the hex SHA-256 of the key and the body file it names, in
/// `DiskCacheEntry`'s format. The directory is opened once, from the cache
/// root, and every file in it is reached relative to that descriptor.
///
/// Whatever is in the directory is read as another process's, or an
/// attacker's, writing: files are opened without following a symbolic link
/// or blocking on a FIFO and taken only when regular; an entry file is read
/// only up to its format's limit; an entry is believed only when its body
/// length is within the share of the capacity this tier ever stores
/// (`maximumBodyLength`) and its body file is a regular file of exactly that
/// length, checked before anything is read or allocated. A body is held in
/// memory only when the caller asks for it up to a bound of its own; larger
/// ones are checked and copied in bounded chunks.
///
/// A body stored from a downloaded file is a hard link of that file's inode
/// when the cache directory is on the same file system, so a download to a
/// destination costs one write of its body; otherwise the body is copied.
/// The inode is then shared with the client's destination: a client that
/// rewrites, truncates or appends to its file in place changes the cache's
/// body too, which the length check on every open and the XXH3-64 check on
/// every read of the body catch, discarding the entry. The recency of an
/// entry lives on its entry file, so a hit never touches a client's file.
///
/// Several processes may share the directory. An entry file is written to a
/// temporary file in the same directory (`.tmp-<pid>-<n>`) and renamed into
/// place only once its body file is complete, under a body id no other write
/// uses; so a reader never pairs an entry with another write's body and
/// never sees a torn entry, whatever a crash or another process did. A
/// replaced entry's body file is deleted by its replacer; body files no
/// entry names (left by a crash, or by two processes storing one key at
/// once) are deleted by a sweep once older than `orphanAge`. Files are not
/// fsynced unless `durable` is set: without it a power loss (not a crash)
/// can leave an entry or body incomplete, which the next read detects.
///
/// Least recently used entries go first: reading an entry sets its entry
/// file's modification time. Usage counts the bytes of entry and body files
/// (a body once, however many names its inode has). When usage passes
/// `capacity`, a sweep deletes entries from the least recently used until
/// usage is at most `sweepTarget` of the capacity. Usage is tracked in
/// memory between sweeps and recomputed by scanning the directory at start,
/// at each sweep, and, since other processes write too, once this process
/// has made `rescanInterval` writes or a quarter of the entry count,
/// whichever is more, since the last scan (so a scan of two files an entry
/// costs at most a few file checks per write) and written a quarter of the
/// room left under the capacity (so a cache far from full is not scanned
/// again while such writes could not fill it). Sweeps delete temporary
/// files of processes that no longer run, and temporary and unknown files
/// older than `abandonedAge`.
final class DiskCache: Sendable {
    /// Bodies larger than this share of the capacity (1/8) are not stored.
    static let largestShare: Int64 = 8
    /// A sweep deletes down to this fraction of the capacity.
    static let sweepTarget = 0.8
    /// Writes between rescans of the directory, at least.
    static let rescanInterval = 64
    /// Between rescans, this process writes at least the room left under the
    /// capacity divided by this.
    static let rescanRoomShare: Int64 = 4
    /// Temporary and unknown files older than this (one hour) are deleted.
    static let abandonedAge: TimeInterval = 3600
    /// Body files that no entry names and whose status has not changed for
    /// `orphanAge` (by default five minutes; a writer links its body moments
    /// before it renames the entry naming it) are deleted.
    static let defaultOrphanAge: TimeInterval = 300
    private static let temporaryPrefix = ".tmp-"
    private static let counter = Atomic<Int>(0)

    /// `<cache dir>/http`.
    let directory: DirectoryHandle
    let capacity: Int64
    let durable: Bool
    let orphanAge: TimeInterval
    private let state = Locked(State())
    /// The keys of entries by their bodies' recorded digests: filled by the
    /// first sweep from every entry's metadata, and kept by this process's
    /// writes, reads and removals. Entries other processes write later are
    /// found when this process reads them by key.
    private let index = Locked(DigestIndex())
    /// Left once the first sweep, which `init` starts, has counted the
    /// directory.
    private let firstSweep = DispatchGroup()

    private struct State {
        var usage: Int64 = 0
        var count = 0
        var writesSinceScan = 0
        /// Bytes of entry and body files written since the last scan.
        var writtenSinceScan: Int64 = 0
        var sweeping = false
    }

    /// Makes the directory and starts the first sweep on `firstSweepQueue`,
    /// so that a large directory does not hold up start-up: lookups work
    /// meanwhile (each entry is checked as it is read), while writes,
    /// removals, `usage`, `count` and `removeAll` wait for the sweep to end,
    /// so that its count never misses or repeats this process's changes.
    init(
        root: CacheRoot, capacity: Int64, durable: Bool = false, orphanAge: TimeInterval = defaultOrphanAge,
        firstSweepQueue: DispatchQueue = .global(qos: .utility)
    ) throws(Destination.Failure) {
        directory = try root.directory("http")
        self.capacity = capacity
        self.durable = durable
        self.orphanAge = orphanAge
        // Claimed here, so that no sweep a store asks for runs before it.
        state.withLock { $0.sweeping = true }
        firstSweep.enter()
        firstSweepQueue.async { [self] in
            sweep(claimed: true, indexing: true)
            firstSweep.leave()
        }
    }

    /// Returns once the first sweep has counted the directory.
    func waitForFirstSweep() {
        firstSweep.wait()
    }

    /// Bytes of entry and body files, as last counted.
    var usage: Int64 {
        waitForFirstSweep()
        return state.withLock { $0.usage }
    }

    var count: Int {
        waitForFirstSweep()
        return state.withLock { $0.count }
    }
    /// The largest body `store` accepts, and the largest an entry may claim.
    var maximumBodyLength: Int64 { capacity / Self.largestShare }

    /// `<cache dir>/http`, as reported.
    var path: String { directory.path }

    // MARK: - Reading

    /// The entry for `key`, its header and metadata checked and its body
    /// file's length but not the body's checksum (which `withEntry`'s loader
    /// checks); its recency unchanged.
    func lookup(key: String) -> DiskCacheEntry? {
        guard let opened = open(key) else { return nil }
        opened.close()
        return opened.entry
    }

    /// Opens `key`'s entry once and hands `visit` the entry, checked as
    /// `lookup` checks it, and a loader of its verified body (see
    /// `BodyLoader`), both valid only during `visit`. Does not call `visit`
    /// on a miss.
    func withEntry<Result>(key: String, _ visit: (DiskCacheEntry, _ load: BodyLoader) -> Result) -> Result? {
        guard let opened = open(key) else { return nil }
        defer { opened.close() }
        return visit(opened.entry, BodyLoader { [self] limit, algorithm in loadBody(opened, inMemoryUpTo: limit, digesting: algorithm) })
    }

    /// The keys of entries recorded with a body whose digest by `algorithm`
    /// is `digest`, the most recently recorded first: a hint, which the
    /// entry read by its key confirms or not (see `DigestIndex`). Waits for
    /// the first sweep, which indexes the entries already there.
    func keys(withDigest digest: [UInt8], _ algorithm: HashAlgorithm) -> [String] {
        waitForFirstSweep()
        return index.withLock { $0.keys(algorithm, digest) }
    }

    /// Loads an opened entry's body: `load(limit)` gives the bytes when the
    /// body is at most `limit` bytes, else the body file, read through in
    /// bounded chunks for its check and held open; `load(limit, digesting:)`
    /// also gives the body's digest by that algorithm, taken from the bytes
    /// as they are read for the check. Either makes the entry the most
    /// recently used, and is nil (the entry deleted) when the body fails its
    /// check.
    struct BodyLoader {
        fileprivate let load: (Int64, HashAlgorithm?) -> (body: CachedBody, digests: BodyDigests)?

        func callAsFunction(_ inMemoryUpTo: Int64) -> CachedBody? { load(inMemoryUpTo, nil)?.body }

        func callAsFunction(_ inMemoryUpTo: Int64, digesting algorithm: HashAlgorithm?) -> (body: CachedBody, digests: BodyDigests)? {
            load(inMemoryUpTo, algorithm)
        }
    }

    /// The verified body of an opened entry, which is now the most recently
    /// used: its bytes when there are at most `limit`, else its body file,
    /// with its digest by `algorithm` taken from what was read; nil, and the
    /// entry deleted, when the body fails its check.
    private func loadBody(
        _ opened: Opened, inMemoryUpTo limit: Int64, digesting algorithm: HashAlgorithm?
    ) -> (body: CachedBody, digests: BodyDigests)? {
        let header = opened.header
        let digests = algorithm.flatMap { BodyHasher([$0]) }
        let body: CachedBody
        if header.bodyLength <= limit {
            guard let bytes = CacheFileIO.read(opened.bodyFD, count: Int(header.bodyLength), at: 0),
                XXH3.hash(bytes) == header.bodyChecksum
            else {
                discard(opened)
                return nil
            }
            digests?.update(bytes)
            body = .bytes(bytes)
        } else {
            guard CacheFileIO.hash(opened.bodyFD, length: header.bodyLength, digesting: digests) == header.bodyChecksum else {
                discard(opened)
                return nil
            }
            // Held open past `withEntry`, whose descriptors close with it.
            let held = fcntl(opened.bodyFD, F_DUPFD_CLOEXEC, 0)
            guard held >= 0 else { return nil }
            body = .file(StoredBodyFile(
                fd: held, directory: directory, name: opened.bodyName, length: header.bodyLength,
                checksum: header.bodyChecksum))
        }
        futimens(opened.entryFD, nil)
        return (body, digests?.finalize() ?? BodyDigests())
    }

    // MARK: - Writing

    /// Stores `body` under `key`. False when the body is larger than
    /// `maximumBodyLength` (an older entry for `key` is then removed, as the
    /// new response supersedes it) or on an I/O error.
    @discardableResult
    func store(key: String, response: CachedResponse, body: [UInt8]) -> Bool {
        guard Int64(body.count) <= maximumBodyLength else {
            remove(key: key)
            return false
        }
        return write(key: key, response: response, body: .bytes(body, checksum: XXH3.hash(body))) != nil
    }

    /// Stores the body `file` describes under `key`, with the length and
    /// checksum it gives: its body file is a hard link of the file when it
    /// can be, else a copy (of the kept bytes, or of the file checked against
    /// the checksum). The file is left in place. Refused as
    /// `store(key:response:body:)`.
    @discardableResult
    func store(key: String, response: CachedResponse, file: CacheBodyFile) -> Bool {
        storeBody(key: key, response: response, file: file) != nil
    }

    /// Stores as `store(key:response:file:)` does; the name of the entry's
    /// body file in `directory`, or nil when nothing was stored.
    func storeBody(key: String, response: CachedResponse, file: CacheBodyFile) -> String? {
        guard file.length <= maximumBodyLength else {
            remove(key: key)
            return nil
        }
        return write(key: key, response: response, body: .file(file))
    }

    /// Stores the contents of the file at `bodyFile` under `key`, read
    /// through for its checksum, then linked or copied as
    /// `store(key:response:file:)` does.
    @discardableResult
    func store(key: String, response: CachedResponse, bodyFile: String) -> Bool {
        guard let file = CacheBodyFile(path: bodyFile) else { return false }
        return store(key: key, response: response, file: file)
    }

    /// Replaces the metadata of `key`'s entry, keeping its body file (after a
    /// 304). False when there is no intact entry.
    @discardableResult
    func update(key: String, response: CachedResponse) -> Bool {
        guard let opened = open(key) else { return false }
        opened.close()
        let header = opened.header
        return write(
            key: key, response: response,
            body: .existing(id: header.bodyID, length: header.bodyLength, checksum: header.bodyChecksum)) != nil
    }

    /// Adds `digests`, taken from the body file `body` as it was read and
    /// checked, to the record of `key`'s entry, when that entry still names
    /// that body file (a body id names one write's body); its metadata is
    /// otherwise kept as it is now.
    func record(_ digests: BodyDigests, key: String, body: String) {
        guard let opened = open(key) else { return }
        opened.close()
        guard opened.entry.bodyPath.isExactly(body) else { return }
        var response = opened.entry.response
        response.digests = response.digests.merging(digests)
        guard response.digests != opened.entry.response.digests else { return }
        let header = opened.header
        _ = write(key: key, response: response, body: .existing(id: header.bodyID, length: header.bodyLength, checksum: header.bodyChecksum))
    }

    @discardableResult
    func remove(key: String) -> Bool {
        waitForFirstSweep()
        let name = Self.entryName(for: key)
        index.withLock { $0.remove(key: key) }
        guard let found = peek(name), directory.remove(name) else { return false }
        forget(found.entrySize + removeBody(of: name, found.header))
        return true
    }

    /// Deletes every entry and body file, and temporary files left by
    /// writers that died.
    func removeAll() {
        // The first sweep's count would otherwise overwrite the one below.
        waitForFirstSweep()
        directory.forEachName { name in
            if Self.isEntryName(name[...]) || Self.bodyEntryName(name) != nil { directory.remove(name) }
        }
        state.withLock { state in
            state.usage = 0
            state.count = 0
        }
        index.withLock { $0.removeAll() }
        sweep()
    }

    // MARK: - Sweeping

    /// Counts the entries again, deletes abandoned files and orphaned
    /// bodies, and when usage is above the capacity deletes least recently
    /// used entries until it is at most `sweepTarget` of it. Files that
    /// vanish meanwhile are skipped. Does nothing while another thread of
    /// this process sweeps.
    func sweep() {
        sweep(claimed: false)
    }

    /// Sweeps as `sweep` does; `claimed` when the caller has set `sweeping`
    /// already. `indexing` (the first sweep) also reads every entry's
    /// metadata for the digests it records.
    private func sweep(claimed alreadyClaimed: Bool, indexing: Bool = false) {
        let claimed = alreadyClaimed || state.withLock { state in
            defer { state.sweeping = true }
            return !state.sweeping
        }
        guard claimed else { return }
        let now = Date().timeIntervalSince1970
        let abandonedBefore = Int64((now - Self.abandonedAge) * 1e9)
        let orphanedBefore = Int64((now - orphanAge) * 1e9)
        struct Body {
            var name: String
            var size: Int64
            var changed: Int64
        }
        var entries: [String: (size: Int64, used: Int64)] = [:]
        var bodies: [String: [Body]] = [:]
        var records: [String: (key: String, digests: BodyDigests)] = [:]
        directory.forEachName { name in
            guard let info = directory.status(of: name), info.st_mode & S_IFMT == S_IFREG else { return }
            if Self.isEntryName(name[...]) {
                let entryName = String(decoding: name, as: UTF8.self)
                entries[entryName] = (Int64(info.st_size), CacheFileIO.modified(info))
                if indexing, let record = digestRecord(of: entryName) { records[entryName] = record }
            } else if let entry = Self.bodyEntryName(name) {
                bodies[entry, default: []].append(
                    Body(name: String(decoding: name, as: UTF8.self), size: Int64(info.st_size), changed: CacheFileIO.changed(info)))
            } else if CacheFileIO.modified(info) < abandonedBefore || Self.isOrphanedTemporaryName(name) {
                directory.remove(name)
            }
        }
        // Each entry's cost: its file and the body files beside it. A body
        // no entry names goes once it is old enough; when an entry has one
        // body file it is taken for the named one (a reader finds out if
        // not), and with several the entry's header says which.
        var costs = entries.mapValues(\.size)
        var total = costs.values.reduce(0, +)
        for (entry, files) in bodies {
            var named: String?
            if entries[entry] != nil {
                named = files.count == 1 ? files[0].name : peek(entry)?.header.map {
                    DiskCacheEntry.bodyName(entryName: entry, bodyID: $0.bodyID)
                }
            }
            for body in files {
                if body.name != named, body.changed < orphanedBefore, directory.remove(body.name) { continue }
                total += body.size
                if entries[entry] != nil { costs[entry, default: 0] += body.size }
            }
        }
        var remaining = entries.count
        if total > capacity {
            let target = Int64(Double(capacity) * Self.sweepTarget)
            for (name, entry) in entries.sorted(by: { $0.value.used < $1.value.used }) where total > target {
                guard directory.remove(name) || errno == ENOENT else { continue }
                records[name] = nil
                for body in bodies[name] ?? [] { directory.remove(body.name) }
                total -= costs[name] ?? entry.size
                remaining -= 1
            }
        }
        if !records.isEmpty {
            index.withLock { index in
                for record in records.values { index.record(key: record.key, digests: record.digests) }
            }
        }
        state.withLock { state in
            state.usage = max(0, total)
            state.count = remaining
            state.writesSinceScan = 0
            state.writtenSinceScan = 0
            state.sweeping = false
        }
    }

    // MARK: - Internals

    private enum Body {
        case bytes([UInt8], checksum: UInt64)
        /// Linked, else copied, from a file whose checksum is known.
        case file(CacheBodyFile)
        /// The body file the entry names already.
        case existing(id: UInt64, length: Int64, checksum: UInt64)
    }

    /// Puts the body in place under a fresh body id unless it is there
    /// already, writes the entry file naming it to a temporary file, renames
    /// that over `key`'s entry file, and deletes the body file of the entry
    /// it replaced. The name of the body file, or nil when nothing was stored.
    private func write(key: String, response: CachedResponse, body: Body) -> String? {
        waitForFirstSweep()
        let name = Self.entryName(for: key)
        let suffix = Self.uniqueSuffix()
        let placed: (id: UInt64, length: Int64, checksum: UInt64, added: Int64)
        switch body {
        case .existing(let id, let length, let checksum):
            placed = (id, length, checksum, 0)
        case .bytes(let bytes, let checksum):
            let id = Self.bodyID(suffix)
            let created = createBody(DiskCacheEntry.bodyName(entryName: name, bodyID: id)) { CacheFileIO.write($0, bytes) }
            guard created else { return nil }
            placed = (id, Int64(bytes.count), checksum, Int64(bytes.count))
        case .file(let file):
            let id = Self.bodyID(suffix)
            let bodyName = DiskCacheEntry.bodyName(entryName: name, bodyID: id)
            if file.link(into: directory, as: bodyName) {
                if durable, !sync(bodyName) {
                    directory.remove(bodyName)
                    return nil
                }
            } else {
                guard createBody(bodyName, file.copy(to:)) else { return nil }
            }
            placed = (id, file.length, file.checksum, file.length)
        }
        let bodyName = DiskCacheEntry.bodyName(entryName: name, bodyID: placed.id)
        func abandonBody() {
            if case .existing = body { return }
            directory.remove(bodyName)
        }

        let metadata = DiskCacheEntry.metadata(key: key, response: response)
        let header = DiskCacheEntry.Header(
            metadataLength: metadata.count, bodyLength: placed.length, metadataChecksum: XXH3.hash(metadata),
            bodyChecksum: placed.checksum, bodyID: placed.id)
        let temporary = Self.temporaryPrefix + suffix
        guard let fd = try? directory.createFile(temporary, mode: 0o600) else {
            abandonBody()
            return nil
        }
        let written = CacheFileIO.write(fd, header.bytes + metadata) && (!durable || fsync(fd) == 0)
        close(fd)
        guard written, let replaced = replace(name, with: temporary) else {
            directory.remove(temporary)
            abandonBody()
            return nil
        }
        var freed: Int64 = 0
        if let replaced {
            freed = replaced.entrySize
            if replaced.header?.bodyID != placed.id { freed += removeBody(of: name, replaced.header) }
        }
        if durable { fsync(directory.fd) }
        index.withLock { $0.record(key: key, digests: response.digests) }
        let needsSweep = state.withLock { state in
            state.usage += header.fileLength + placed.added - freed
            if replaced == nil { state.count += 1 }
            state.writesSinceScan += 1
            state.writtenSinceScan += header.fileLength + placed.added
            return state.usage > capacity
                || (state.writesSinceScan >= max(Self.rescanInterval, state.count / 4)
                    && state.writtenSinceScan >= (capacity - state.usage) / Self.rescanRoomShare)
        }
        if needsSweep { sweep() }
        return bodyName
    }

    /// Renames `temporary` over the entry file `entry`; the entry file it
    /// replaced, as `peek` describes it (nil when there was none), or nil
    /// for a failed rename. With `renameat2`, a new entry takes one call and
    /// a replaced one is exactly the file exchanged out, read and deleted
    /// from the temporary name; elsewhere the entry is peeked at first.
    private func replace(_ entry: String, with temporary: String) -> (entrySize: Int64, header: DiskCacheEntry.Header?)?? {
        let fd = directory.fd
        if let renameat2 = Renameat2.function {
            if renameat2(fd, temporary, fd, entry, Renameat2.noReplace) == 0 { return .some(nil) }
            if errno == EEXIST, renameat2(fd, temporary, fd, entry, Renameat2.exchange) == 0 {
                let old = peek(temporary)
                if !directory.remove(temporary) { unlinkat(fd, temporary, AT_REMOVEDIR) }
                return .some(old ?? (0, nil))
            }
            guard errno == EINVAL || errno == ENOSYS || errno == EEXIST else { return nil }
        }
        let old = peek(entry)
        return renameat(fd, temporary, fd, entry) == 0 ? .some(old) : nil
    }

    /// Creates the body file `name` exclusively and fills it with `fill`;
    /// nothing is left when that fails.
    private func createBody(_ name: String, _ fill: (Int32) -> Bool) -> Bool {
        guard let fd = try? directory.createFile(name, mode: 0o600) else { return false }
        let written = fill(fd) && (!durable || fsync(fd) == 0)
        close(fd)
        if !written { directory.remove(name) }
        return written
    }

    /// Flushes the file `name` to stable storage.
    private func sync(_ name: String) -> Bool {
        guard let (fd, _) = directory.openFile(name) else { return false }
        defer { close(fd) }
        return fsync(fd) == 0
    }

    /// An entry opened for reading: its entry file and body file, checked
    /// but for the body's checksum.
    private struct Opened {
        var entryFD: Int32
        var bodyFD: Int32
        var entry: DiskCacheEntry
        var header: DiskCacheEntry.Header
        var bodyName: String

        func close() {
            Glibc.close(entryFD)
            Glibc.close(bodyFD)
        }
    }

    /// Opens `key`'s entry file and the body file it names, and checks the
    /// header, the metadata, the body length against `maximumBodyLength`
    /// and the body file's length against the body length, all before any
    /// body byte is read; a corrupt entry is deleted. The caller closes the
    /// result.
    private func open(_ key: String) -> Opened? {
        let name = Self.entryName(for: key)
        guard let (fd, info) = directory.openFile(name) else {
            index.withLock { $0.remove(key: key) }
            return nil
        }
        let size = Int64(info.st_size)
        let bytes = size <= DiskCacheEntry.headerLength + DiskCacheEntry.metadataLimit
            ? CacheFileIO.read(fd, count: Int(size), at: 0) : nil
        // A header that parses names the body file to delete with a corrupt
        // entry; one that does not leaves it to the sweep.
        guard let bytes, let header = DiskCacheEntry.Header(bytes[...]) else {
            removeIfSame(fd, name: name, header: nil)
            close(fd)
            return nil
        }
        let metadata = bytes[DiskCacheEntry.headerLength...]
        guard header.fileLength == size, header.bodyLength <= maximumBodyLength,
            XXH3.hash(Array(metadata)) == header.metadataChecksum,
            let (storedKey, response) = DiskCacheEntry.parseMetadata(Array(metadata)), storedKey.isExactly(key)
        else {
            removeIfSame(fd, name: name, header: header)
            close(fd)
            return nil
        }
        let bodyName = DiskCacheEntry.bodyName(entryName: name, bodyID: header.bodyID)
        guard let (bodyFD, bodyInfo) = directory.openFile(bodyName) else {
            removeIfSame(fd, name: name, header: header)
            close(fd)
            return nil
        }
        guard Int64(bodyInfo.st_size) == header.bodyLength else {
            close(bodyFD)
            removeIfSame(fd, name: name, header: header)
            close(fd)
            return nil
        }
        let entry = DiskCacheEntry(
            key: key, response: response, bodyLength: header.bodyLength, path: directory.path(of: name),
            bodyPath: directory.path(of: bodyName))
        index.withLock { $0.record(key: key, digests: response.digests) }
        return Opened(entryFD: fd, bodyFD: bodyFD, entry: entry, header: header, bodyName: bodyName)
    }

    /// The key and digests the entry file `name` records, when its header
    /// and metadata are intact, it is the file its key names and it records
    /// a digest; nothing is deleted (a reader does that).
    private func digestRecord(of name: String) -> (key: String, digests: BodyDigests)? {
        guard let (fd, info) = directory.openFile(name) else { return nil }
        defer { close(fd) }
        let size = Int64(info.st_size)
        guard size <= DiskCacheEntry.headerLength + DiskCacheEntry.metadataLimit,
            let bytes = CacheFileIO.read(fd, count: Int(size), at: 0), let header = DiskCacheEntry.Header(bytes[...]),
            header.fileLength == size
        else { return nil }
        let metadata = Array(bytes[DiskCacheEntry.headerLength...])
        guard XXH3.hash(metadata) == header.metadataChecksum, let (key, response) = DiskCacheEntry.parseMetadata(metadata),
            !response.digests.isEmpty, Self.entryName(for: key).isExactly(name)
        else { return nil }
        return (key, response.digests)
    }

    /// Deletes an entry whose body failed its check.
    private func discard(_ opened: Opened) {
        index.withLock { $0.remove(key: opened.entry.key) }
        removeIfSame(opened.entryFD, name: Self.entryName(for: opened.entry.key), header: opened.header)
    }

    /// Deletes the entry file `name` if it is still the file `fd` has open
    /// (another process may have renamed a good entry over it since), and
    /// the body file `header` names.
    private func removeIfSame(_ fd: Int32, name: String, header: DiskCacheEntry.Header?) {
        var opened = stat()
        guard fstat(fd, &opened) == 0, let current = directory.status(of: name), opened.st_ino == current.st_ino,
            opened.st_dev == current.st_dev, directory.remove(name)
        else { return }
        forget(Int64(opened.st_size) + removeBody(of: name, header))
    }

    /// Deletes the body file `header` names beside the entry `name`, unless
    /// it is a directory; the bytes usage counted for it (the length the
    /// header gives: a body shared with a destination may have grown or
    /// shrunk since it was counted), or 0 when no regular file was deleted.
    private func removeBody(of name: String, _ header: DiskCacheEntry.Header?) -> Int64 {
        guard let header else { return 0 }
        let bodyName = DiskCacheEntry.bodyName(entryName: name, bodyID: header.bodyID)
        guard let info = directory.status(of: bodyName), info.st_mode & S_IFMT != S_IFDIR,
            directory.remove(bodyName)
        else { return 0 }
        return info.st_mode & S_IFMT == S_IFREG ? header.bodyLength : 0
    }

    /// The size of the entry file `name` (or a temporary file) and its
    /// header when it has one; nil when there is no regular file by that
    /// name.
    private func peek(_ name: String) -> (entrySize: Int64, header: DiskCacheEntry.Header?)? {
        guard let (fd, info) = directory.openFile(name) else { return nil }
        defer { close(fd) }
        let header = CacheFileIO.read(fd, count: DiskCacheEntry.headerLength, at: 0).flatMap { DiskCacheEntry.Header($0[...]) }
        return (Int64(info.st_size), header)
    }

    private func forget(_ size: Int64) {
        state.withLock { state in
            state.usage = max(0, state.usage - size)
            state.count = max(0, state.count - 1)
        }
    }

    /// `<pid>-<n>`, unique among this process's temporary files.
    private static func uniqueSuffix() -> String {
        "\(processID)-\(counter.wrappingAdd(1, ordering: .relaxed).newValue)"
    }

    /// Read once: courier never forks.
    private static let processID = getpid()

    /// A body id no other write uses: a write's `uniqueSuffix` and the
    /// time, mixed.
    private static func bodyID(_ suffix: String) -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var bytes = Array(suffix.utf8)
        withUnsafeBytes(of: (Int64(now.tv_sec), Int64(now.tv_nsec))) { bytes.append(contentsOf: $0) }
        return XXH3.hash(bytes)
    }

    /// A temporary file whose writer no longer runs. A writer in another PID
    /// namespace may look dead; its rename then fails and its store with it,
    /// which costs a cache entry, never a torn one.
    private static func isOrphanedTemporaryName(_ name: [UInt8]) -> Bool {
        let prefix = Array(temporaryPrefix.utf8)
        guard name.starts(with: prefix),
            let digits = name[prefix.count...].split(separator: UInt8(ascii: "-")).first, (1...10).contains(digits.count),
            digits.allSatisfy({ (0x30...0x39).contains($0) }),
            let pid = Int32(String(decoding: digits, as: UTF8.self)), pid > 0
        else { return false }
        return kill(pid, 0) != 0 && errno == ESRCH
    }

    /// The name of `key`'s entry file: the SHA-256 of the key's UTF-8 in 64
    /// lower-case hex digits, which other tools can compute too.
    static func entryName(for key: String) -> String { DigestHasher.sha256Hex(key) }

    /// 64 lower-case hex digits.
    private static func isEntryName(_ name: ArraySlice<UInt8>) -> Bool {
        name.count == 64 && name.allSatisfy(isHexDigit)
    }

    /// The entry name of a body file's name (64 lower-case hex digits, a
    /// dot, 16 lower-case hex digits); nil for any other name.
    private static func bodyEntryName(_ bytes: [UInt8]) -> String? {
        guard bytes.count == 81, bytes[64] == UInt8(ascii: "."), isEntryName(bytes[..<64]), bytes[65...].allSatisfy(isHexDigit)
        else { return nil }
        return String(decoding: bytes[..<64], as: UTF8.self)
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte)
    }
}
