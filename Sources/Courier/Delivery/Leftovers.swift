#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The files a running courier owns outside the cache entries, and their
/// removal once it has died, so a crash or a kill leaves nothing behind for
/// good.
///
/// Each process holds an exclusive `flock` on its journal,
/// `<cache dir>/journals/<owner>` (`<owner>` is `<pid>-<nonce>`), for as
/// long as it runs; the kernel drops the lock when the process dies, however
/// it dies, and whatever PID namespace it ran in. What a process leaves in
/// the cache directory follows from its owner name alone: its bodies in
/// transit, `tmp/<owner>-*`, and its `downloads/<pid>` directory. The
/// journal's lines name only the partial files it creates beside
/// destinations, outside the cache directory.
///
/// At start, every journal whose lock can be taken belongs to a process that
/// is gone, and what it left is removed, then the journal. The journal, like
/// everything in the cache directory, may have been written by anyone (the
/// directory may be shared, restored from an archive, synced), so nothing
/// it says can name a path in the cache directory, and a partial file is
/// removed only when courier can tell that it made it: see `Partial`.
final class Leftovers: Sendable {

    /// `<pid>-<nonce>`: names this process's files in `tmp/`.
    let owner: String
    /// `<cache dir>/tmp`, where bodies stream when not beside a destination.
    let temporary: DirectoryHandle
    /// `<cache dir>/downloads/<pid>`, this process's `path` files.
    let downloads: DirectoryHandle
    private let journals: DirectoryHandle
    private let downloadsParent: DirectoryHandle
    private let fd: Int32

    /// Takes this process's journal, removes what dead processes left, and
    /// makes this process's `downloads/<pid>`, all under `root`.
    init(root: CacheRoot) throws(Destination.Failure) {
        journals = try root.directory("journals")
        temporary = try root.directory("tmp")
        downloadsParent = try root.directory("downloads")
        let pid = getpid()
        owner = "\(pid)-\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
        // Locked under a name no sweep reads, then named: another process
        // starting meanwhile never finds it unlocked.
        let unnamed = "." + owner
        fd = openat(journals.fd, unnamed, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .io("cannot create \(journals.path(of: unnamed)): \(Destination.errorText())") }
        flock(fd, LOCK_EX)
        guard renameat(journals.fd, unnamed, journals.fd, owner) == 0 else {
            let reason = Destination.errorText()
            close(fd)
            journals.remove(unnamed)
            throw .io("cannot create \(journals.path(of: owner)): \(reason)")
        }
        Self.sweep(journals: journals, temporary: temporary, downloads: downloadsParent)
        do {
            downloads = try root.directory(String(pid), in: downloadsParent)
        } catch {
            close(fd)
            journals.remove(owner)
            throw error
        }
    }

    deinit { close(fd) }

    /// Notes a partial file about to be created as `name` in `directory`,
    /// beside a destination.
    func record(partial name: String, in directory: DirectoryHandle) {
        guard let identity = directory.identity else { return }
        let record = Partial(
            device: identity.device, inode: identity.inode, directory: Array(directory.path.utf8), name: Array(name.utf8))
        var line = record.line
        line.append(UInt8(ascii: "\n"))
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// Ends this process's files at a clean exit: its `downloads/<pid>`
    /// directory and its journal (what the journal named is gone already).
    func finish() {
        downloadsParent.removeTree(String(getpid()).utf8)
        journals.remove(owner)
    }

    // MARK: - Sweeping

    /// The largest part of a journal read, and the longest line taken.
    static let journalLimit = 64 << 20
    static let lineLimit = 16 << 10

    /// Removes what every process that died left. A journal is opened only
    /// when it is a regular file, without following a symbolic link or
    /// blocking; a name of a journal that is anything else (a FIFO, a
    /// socket, a symbolic link) is removed. Names are compared as bytes.
    /// `downloads/<pid>` goes only when no running process has that pid
    /// (another PID namespace may reuse it).
    static func sweep(journals: DirectoryHandle, temporary: DirectoryHandle, downloads: DirectoryHandle) {
        // First every journal's state, so that no running process's pid is
        // missed; no descriptor is held meanwhile, however many there are.
        var dead: [(owner: [UInt8], pid: [UInt8])] = []
        var running: Set<[UInt8]> = []
        journals.forEachName { name in
            guard let pid = processID(ofOwner: name), let info = journals.status(of: name) else { return }
            guard info.st_mode & S_IFMT == S_IFREG else {
                journals.remove(name)
                return
            }
            guard let (fd, _) = journals.openFile(name) else { return }
            defer { close(fd) }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { dead.append((name, pid)) } else { running.insert(pid) }
        }
        guard !dead.isEmpty else { return }
        let deadOwners = Set(dead.map(\.owner))
        temporary.forEachName { name in
            if let owner = ownerOfTemporaryName(name), deadOwners.contains(owner) { temporary.remove(name) }
        }
        for (owner, pid) in dead {
            // Taken again: another process starting meanwhile may be
            // sweeping it.
            guard let (fd, info) = journals.openFile(owner) else { continue }
            defer { close(fd) }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }
            if !running.contains(pid) { downloads.removeTree(pid) }
            // Another user's journal names nothing outside the cache
            // directory that this user's courier would remove.
            if info.st_uid == geteuid() {
                var opened = OpenedDirectory()
                forEachLine(fd) { line in Partial(line: line, pid: pid)?.remove(using: &opened) }
            }
            journals.remove(owner)
        }
    }

    /// The pid of an owner name as courier writes it: `<pid>-<nonce>`, the
    /// pid in decimal without leading zeros, the nonce of 1 to 13 base-36
    /// digits. Nil for any other name.
    static func processID(ofOwner name: [UInt8]) -> [UInt8]? {
        guard let dash = name.firstIndex(of: UInt8(ascii: "-")) else { return nil }
        let pid = name[..<dash]
        let nonce = name[(dash + 1)...]
        guard isProcessID(pid), (1...13).contains(nonce.count), nonce.allSatisfy(isBase36) else { return nil }
        return Array(pid)
    }

    /// The owner a name in `tmp/` is a body of (`<owner>-<rest>`), as bytes.
    private static func ownerOfTemporaryName(_ name: [UInt8]) -> [UInt8]? {
        guard let first = name.firstIndex(of: UInt8(ascii: "-")),
            let second = name[(first + 1)...].firstIndex(of: UInt8(ascii: "-"))
        else { return nil }
        let owner = Array(name[..<second])
        return processID(ofOwner: owner) != nil ? owner : nil
    }

    /// 1 to 10 decimal digits without a leading zero, at most `Int32.max`.
    private static func isProcessID(_ digits: ArraySlice<UInt8>) -> Bool {
        guard (1...10).contains(digits.count), digits.first != UInt8(ascii: "0"),
            digits.allSatisfy({ (0x30...0x39).contains($0) })
        else { return false }
        return Int64(String(decoding: digits, as: UTF8.self)).map { $0 <= Int64(Int32.max) } ?? false
    }

    private static func isBase36(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x61...0x7A).contains(byte)
    }

    /// Calls `body` with each line `fd` holds (without its newline), read
    /// in pieces of 64 KiB up to `journalLimit` bytes; a line longer than
    /// `lineLimit` is skipped whole, and nothing more is held.
    static func forEachLine(_ fd: Int32, _ body: (ArraySlice<UInt8>) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var line: [UInt8] = []
        var overlong = false
        var total = 0
        while total < journalLimit {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, min($0.count, journalLimit - total)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            total += count
            for byte in buffer[..<count] {
                if byte == UInt8(ascii: "\n") {
                    if !overlong, !line.isEmpty { body(line[...]) }
                    line.removeAll(keepingCapacity: true)
                    overlong = false
                } else if line.count < lineLimit {
                    line.append(byte)
                } else {
                    overlong = true
                }
            }
        }
    }
}

extension Leftovers {
    /// A journal's record of a partial file beside a destination:
    /// `partial <device> <inode> <path>`, the device and inode (in decimal)
    /// of the directory the file was made in, and the file's path in it as
    /// the process reached it.
    ///
    /// The record is taken only when the path is absolute and its last
    /// component is a name `Destination.temporaryName` gives for the
    /// journal's own pid; the file is removed only when the path still leads
    /// to that very directory (its device and inode), the file there is a
    /// regular file of this user's (not a symbolic link), and the journal
    /// itself is this user's. So a planted journal cannot point courier at a
    /// victim directory: whoever cannot write as this user cannot forge a
    /// journal that counts, and a journal that arrived with the cache
    /// directory (an archive, a sync) cannot know the device and inode a
    /// directory has on this machine.
    struct Partial: Equatable {
        var device: UInt64
        var inode: UInt64
        var directory: [UInt8]
        var name: [UInt8]

        init(device: UInt64, inode: UInt64, directory: [UInt8], name: [UInt8]) {
            self.device = device
            self.inode = inode
            self.directory = directory
            self.name = name
        }

        /// The record `line` holds for the process `pid`, or nil when it is
        /// not one courier writes.
        init?(line: ArraySlice<UInt8>, pid: [UInt8]) {
            let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 3, omittingEmptySubsequences: false)
            guard fields.count == 4, fields[0].elementsEqual("partial".utf8),
                let device = Self.number(fields[1]), let inode = Self.number(fields[2])
            else { return nil }
            let path = fields[3]
            guard path.first == UInt8(ascii: "/"), !path.contains(0), let slash = path.lastIndex(of: UInt8(ascii: "/")),
                Self.isPartialName(path[(slash + 1)...], pid: pid)
            else { return nil }
            let directory = slash == path.startIndex ? [UInt8(ascii: "/")] : Array(path[..<slash])
            self.init(device: device, inode: inode, directory: directory, name: Array(path[(slash + 1)...]))
        }

        /// The line courier writes for this record.
        var line: [UInt8] {
            let slash = UInt8(ascii: "/")
            var line: [UInt8] = []
            // Two numbers of up to 20 digits, and the newline `record` adds.
            line.reserveCapacity(51 + directory.count + name.count)
            line += "partial \(device) \(inode) ".utf8
            line += directory
            if directory != [slash] { line.append(slash) }
            line += name
            return line
        }

        /// Whether `name` is one `Destination.temporaryName` gives for
        /// `pid`: `.<name>.courier-<pid>-<random>.part`, the random part of
        /// 1 to 13 base-36 digits.
        static func isPartialName(_ name: ArraySlice<UInt8>, pid: [UInt8]) -> Bool {
            let suffix = Array(".part".utf8)
            guard !pid.isEmpty, name.first == UInt8(ascii: "."), name.count > suffix.count,
                name.reversed().starts(with: suffix.reversed()), !name.contains(0), !name.contains(UInt8(ascii: "/"))
            else { return false }
            let stem = name.dropLast(suffix.count)
            guard let dash = stem.lastIndex(of: UInt8(ascii: "-")) else { return false }
            let random = stem[(dash + 1)...]
            let marker = Array(".courier-".utf8) + pid
            let head = stem[..<dash]
            return (1...13).contains(random.count) && random.allSatisfy(Leftovers.isBase36)
                && head.count > marker.count + 1 && head.reversed().starts(with: marker.reversed())
        }

        /// Removes the file when the path leads to the recorded directory
        /// and the file is a regular file of this user's. `opened` keeps the
        /// last directory opened, for the journal's next record.
        func remove(using opened: inout OpenedDirectory) {
            guard let directory = opened.open(directory), let info = directory.status,
                UInt64(info.st_dev) == device, UInt64(info.st_ino) == inode,
                let file = directory.handle.status(of: name), file.st_mode & S_IFMT == S_IFREG, file.st_uid == geteuid()
            else { return }
            directory.handle.remove(name)
        }

        /// Digits only, within 64 bits.
        private static func number(_ digits: ArraySlice<UInt8>) -> UInt64? {
            guard (1...20).contains(digits.count), digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            return UInt64(String(decoding: digits, as: UTF8.self))
        }
    }

    /// The directory a journal's last partial record named, opened by its
    /// path as the process that wrote the record reached it (following
    /// symbolic links, as a destination without a download root may), with
    /// its status.
    struct OpenedDirectory {
        private var path: [UInt8]?
        private var opened: (handle: DirectoryHandle, status: stat?)?

        init() {}

        mutating func open(_ directory: [UInt8]) -> (handle: DirectoryHandle, status: stat?)? {
            if path != directory {
                path = directory
                let fd = (directory + [0]).withUnsafeBufferPointer { buffer in
                    buffer.withMemoryRebound(to: CChar.self) { Glibc.open($0.baseAddress!, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC) }
                }
                opened = fd >= 0 ? Self.described(DirectoryHandle(fd: fd, path: String(decoding: directory, as: UTF8.self))) : nil
            }
            return opened
        }

        private static func described(_ handle: DirectoryHandle) -> (handle: DirectoryHandle, status: stat?) {
            var info = stat()
            return (handle, fstat(handle.fd, &info) == 0 ? info : nil)
        }
    }
}
