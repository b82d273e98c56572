import Foundation
import Synchronization
import Locking

/// The disk tier: one file per entry in `<cache dir>/http/`, named by the
/// hex SHA-256 of its key, in `DiskCacheEntry`'s format.
///
/// Several processes may share the directory. Every write goes to a
/// temporary file in the same directory (`.tmp-<pid>-<n>`) that is renamed
/// over the entry only when complete, and every read checks the entry's
/// length and checksums, deleting an entry that fails; so a reader never sees
/// a torn entry, whatever a crash or another process did. Files are not
/// fsynced unless `durable` is set: without it a power loss (not a crash)
/// can leave a renamed entry incomplete, which the next read detects.
///
/// Least recently used entries go first: reading an entry sets its
/// modification time. When usage passes `capacity`, a sweep deletes entries
/// from the least recently used until usage is at most `sweepTarget` of the
/// capacity. Usage is tracked in memory between sweeps and recomputed by
/// scanning the directory at start, at each sweep, and after
/// `rescanInterval` writes or an eighth of the entry count, whichever is more
/// (so a scan costs at most a few file checks per write), since other
/// processes write too. Sweeps delete
/// temporary files of processes that no longer run, and temporary and
/// unknown files older than `abandonedAge`.
final class DiskCache: Sendable {
    /// Bodies larger than this share of the capacity (1/8) are not stored.
    static let largestShare: Int64 = 8
    /// A sweep deletes down to this fraction of the capacity.
    static let sweepTarget = 0.8
    /// Writes between rescans of the directory, at least.
    static let rescanInterval = 64
    /// Temporary and unknown files older than this (one hour) are deleted.
    static let abandonedAge: TimeInterval = 3600
    private static let temporaryPrefix = ".tmp-"
    private static let counter = Atomic<Int>(0)

    /// `<cache dir>/http`.
    let path: String
    let capacity: Int64
    let durable: Bool
    private let state = Locked(State())

    private struct State {
        var usage: Int64 = 0
        var count = 0
        var writesSinceScan = 0
        var sweeping = false
    }

    init(cacheDirectory: String, capacity: Int64, durable: Bool = false) throws {
        path = cacheDirectory + "/http"
        self.capacity = capacity
        self.durable = durable
        try DirectoryHandle.makePrivateDirectories(path)
        sweep()
    }

    /// Bytes of entry files, as last counted.
    var usage: Int64 { state.withLock { $0.usage } }
    var count: Int { state.withLock { $0.count } }
    /// The largest body `store` accepts.
    var maximumBodyLength: Int64 { capacity / Self.largestShare }

    func filePath(for key: String) -> String { path + "/" + SHA256.hex(key) }

    // MARK: - Reading

    /// The entry for `key`, its header and metadata checked but not its body
    /// (which `read` and `copyBody` check); its recency unchanged.
    func lookup(key: String) -> DiskCacheEntry? {
        guard let opened = open(key) else { return nil }
        close(opened.fd)
        return opened.entry
    }

    /// The entry for `key` and its verified body; now the most recently used.
    func read(key: String) -> (entry: DiskCacheEntry, body: [UInt8])? {
        guard let opened = open(key) else { return nil }
        let file = opened.entry.path
        guard let body = CacheFileIO.read(opened.fd, count: Int(opened.header.bodyLength), at: opened.entry.bodyOffset),
            XXH64.hash(body) == opened.header.bodyChecksum
        else {
            discard(opened.fd, file)
            return nil
        }
        futimens(opened.fd, nil)
        close(opened.fd)
        return (opened.entry, body)
    }

    /// Writes the body of `key`'s entry to `destination` (through a temporary
    /// file beside it, renamed into place once the body is verified) and
    /// returns the entry, whose metadata came from the same file; now the
    /// most recently used. Nil on a miss, a corrupt entry, or an I/O error.
    func copyBody(key: String, to destination: String) -> DiskCacheEntry? {
        guard let opened = open(key) else { return nil }
        defer { close(opened.fd) }
        let directory = (destination as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let partial = "\(directory)/.\((destination as NSString).lastPathComponent).courier-\(Self.uniqueSuffix()).partial"
        let out = Foundation.open(partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard out >= 0 else { return nil }
        let sum = CacheFileIO.copy(
            from: opened.fd, offset: opened.entry.bodyOffset, length: opened.header.bodyLength, to: out)
        close(out)
        guard let sum, sum == opened.header.bodyChecksum, rename(partial, destination) == 0 else {
            unlink(partial)
            if sum != nil, sum != opened.header.bodyChecksum { removeIfSame(opened.fd, opened.entry.path) }
            return nil
        }
        futimens(opened.fd, nil)
        return opened.entry
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
        return write(key: key, response: response, body: .bytes(body))
    }

    /// Stores the contents of the file at `bodyFile` under `key`, streaming
    /// it; the file is left in place. Refused as `store(key:response:body:)`.
    @discardableResult
    func store(key: String, response: CachedResponse, bodyFile: String) -> Bool {
        let fd = Foundation.open(bodyFile, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return false }
        guard Int64(info.st_size) <= maximumBodyLength else {
            remove(key: key)
            return false
        }
        return write(key: key, response: response, body: .file(fd: fd, offset: 0, length: Int64(info.st_size), checksum: nil))
    }

    /// Replaces the metadata of `key`'s entry, keeping its body (after a 304).
    /// False when there is no intact entry.
    @discardableResult
    func update(key: String, response: CachedResponse) -> Bool {
        guard let opened = open(key) else { return false }
        defer { close(opened.fd) }
        let body = Body.file(
            fd: opened.fd, offset: opened.entry.bodyOffset, length: opened.header.bodyLength,
            checksum: opened.header.bodyChecksum)
        return write(key: key, response: response, body: body)
    }

    @discardableResult
    func remove(key: String) -> Bool {
        let file = filePath(for: key)
        var info = stat()
        guard lstat(file, &info) == 0, unlink(file) == 0 else { return false }
        forget(Int64(info.st_size))
        return true
    }

    /// Deletes every entry, and temporary files left by writers that died.
    func removeAll() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] where Self.isEntryName(name) {
            unlink(path + "/" + name)
        }
        state.withLock { state in
            state.usage = 0
            state.count = 0
        }
        sweep()
    }

    // MARK: - Sweeping

    /// Counts the entries again, deletes abandoned files, and when usage is
    /// above the capacity deletes least recently used entries until it is at
    /// most `sweepTarget` of it. Files that vanish meanwhile are skipped.
    /// Does nothing while another thread of this process sweeps.
    func sweep() {
        let claimed = state.withLock { state in
            defer { state.sweeping = true }
            return !state.sweeping
        }
        guard claimed else { return }
        let abandonedBefore = Int64((Date().timeIntervalSince1970 - Self.abandonedAge) * 1e9)
        var entries: [(file: String, size: Int64, used: Int64)] = []
        var total: Int64 = 0
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            let file = path + "/" + name
            var info = stat()
            guard lstat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            let used = CacheFileIO.modified(info)
            if Self.isEntryName(name) {
                entries.append((file, Int64(info.st_size), used))
                total += Int64(info.st_size)
            } else if used < abandonedBefore || Self.isOrphanedTemporaryName(name) {
                unlink(file)
            }
        }
        var remaining = entries.count
        if total > capacity {
            let target = Int64(Double(capacity) * Self.sweepTarget)
            for entry in entries.sorted(by: { $0.used < $1.used }) where total > target {
                if unlink(entry.file) == 0 || errno == ENOENT {
                    total -= entry.size
                    remaining -= 1
                }
            }
        }
        state.withLock { state in
            state.usage = total
            state.count = remaining
            state.writesSinceScan = 0
            state.sweeping = false
        }
    }

    // MARK: - Internals

    private enum Body {
        case bytes([UInt8])
        /// `checksum`: what the bytes must hash to, when known.
        case file(fd: Int32, offset: Int64, length: Int64, checksum: UInt64?)
    }

    /// Writes an entry to a temporary file and renames it over `key`'s.
    private func write(key: String, response: CachedResponse, body: Body) -> Bool {
        let metadata = DiskCacheEntry.metadata(key: key, response: response)
        let temporary = "\(path)/\(Self.temporaryPrefix)\(Self.uniqueSuffix())"
        let fd = Foundation.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        var header = DiskCacheEntry.Header(
            metadataLength: metadata.count, bodyLength: 0, metadataChecksum: XXH64.hash(metadata), bodyChecksum: 0)
        var written = CacheFileIO.write(fd, header.bytes) && CacheFileIO.write(fd, metadata)
        if written {
            switch body {
            case .bytes(let bytes):
                header.bodyLength = Int64(bytes.count)
                header.bodyChecksum = XXH64.hash(bytes)
                written = CacheFileIO.write(fd, bytes)
            case .file(let source, let offset, let length, let expected):
                header.bodyLength = length
                let sum = CacheFileIO.copy(from: source, offset: offset, length: length, to: fd)
                header.bodyChecksum = sum ?? 0
                written = sum != nil && (expected == nil || sum == expected)
            }
        }
        written = written && CacheFileIO.write(fd, header.bytes, at: 0) && (!durable || fsync(fd) == 0)
        close(fd)
        let file = filePath(for: key)
        var old = stat()
        let replaced: Int64? = lstat(file, &old) == 0 ? Int64(old.st_size) : nil
        guard written, rename(temporary, file) == 0 else {
            unlink(temporary)
            return false
        }
        if durable { syncDirectory() }
        let needsSweep = state.withLock { state in
            state.usage += header.fileLength - (replaced ?? 0)
            if replaced == nil { state.count += 1 }
            state.writesSinceScan += 1
            return state.usage > capacity || state.writesSinceScan >= max(Self.rescanInterval, state.count / 8)
        }
        if needsSweep { sweep() }
        return true
    }

    /// Opens `key`'s entry and checks its header and metadata; a corrupt
    /// entry is deleted. The caller closes `fd`.
    private func open(_ key: String) -> (fd: Int32, entry: DiskCacheEntry, header: DiskCacheEntry.Header)? {
        let file = filePath(for: key)
        let fd = Foundation.open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            close(fd)
            return nil
        }
        guard let headerBytes = CacheFileIO.read(fd, count: DiskCacheEntry.headerLength, at: 0),
            let header = DiskCacheEntry.Header(headerBytes), header.fileLength == Int64(info.st_size),
            let metadata = CacheFileIO.read(fd, count: header.metadataLength, at: Int64(DiskCacheEntry.headerLength)),
            XXH64.hash(metadata) == header.metadataChecksum,
            let (storedKey, response) = DiskCacheEntry.parseMetadata(metadata), storedKey.isExactly(key)
        else {
            discard(fd, file)
            return nil
        }
        let entry = DiskCacheEntry(
            key: key, response: response, bodyLength: header.bodyLength, path: file,
            bodyOffset: Int64(DiskCacheEntry.headerLength + header.metadataLength))
        return (fd, entry, header)
    }

    /// Deletes a corrupt entry and closes its descriptor.
    private func discard(_ fd: Int32, _ file: String) {
        removeIfSame(fd, file)
        close(fd)
    }

    /// Deletes `file` if it is still the file `fd` has open: another process
    /// may have renamed a good entry over it since.
    private func removeIfSame(_ fd: Int32, _ file: String) {
        var opened = stat()
        var current = stat()
        guard fstat(fd, &opened) == 0, lstat(file, &current) == 0, opened.st_ino == current.st_ino,
            opened.st_dev == current.st_dev, unlink(file) == 0
        else { return }
        forget(Int64(opened.st_size))
    }

    private func forget(_ size: Int64) {
        state.withLock { state in
            state.usage = max(0, state.usage - size)
            state.count = max(0, state.count - 1)
        }
    }

    private func syncDirectory() {
        let fd = Foundation.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    /// `<pid>-<n>`, unique among this process's temporary files.
    private static func uniqueSuffix() -> String {
        "\(getpid())-\(counter.wrappingAdd(1, ordering: .relaxed).newValue)"
    }

    /// A temporary file whose writer no longer runs. A writer in another PID
    /// namespace may look dead; its rename then fails and its store with it,
    /// which costs a cache entry, never a torn one.
    private static func isOrphanedTemporaryName(_ name: String) -> Bool {
        guard name.hasPrefix(temporaryPrefix),
            let pid = name.dropFirst(temporaryPrefix.count).split(separator: "-").first.flatMap({ Int32($0) }), pid > 0
        else { return false }
        return kill(pid, 0) != 0 && errno == ESRCH
    }

    /// 64 lower-case hex digits.
    private static func isEntryName(_ name: String) -> Bool {
        name.utf8.count == 64 && name.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}
