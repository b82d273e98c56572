#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CFileShim
import Locking
import Synchronization

/// An open directory, closed when the last reference goes.
///
/// Names in it are reached relative to its descriptor (`openat`,
/// `unlinkat`, `fstatat`, `mkdirat`), one name at a time, never following a
/// symbolic link at that name: whatever its path comes to name meanwhile,
/// and whatever is planted in it, the directory opened is the one used and
/// nothing outside it is reached. A name given as bytes (read from a
/// directory or a file) is used only when it is one name: not empty, not
/// `.` or `..`, without a slash or a NUL byte.
final class DirectoryHandle: Sendable {
    let fd: Int32
    /// The path it was opened by, for messages and for what courier reports.
    let path: String

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    /// Opens the directory at `path`, following symlinks (a path courier
    /// chose or was configured with).
    convenience init(opening path: String) throws(Destination.Failure) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .io("cannot open \(path): \(Destination.errorText())") }
        self.init(fd: fd, path: path)
    }

    deinit { close(fd) }

    /// The directory's device and inode, asked of the system once: a
    /// descriptor names the same directory for as long as it is open. Nil
    /// when `fstat` fails.
    var identity: Identity? {
        if let known = knownIdentity.withLock({ $0 }) { return known }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        let identity = Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        knownIdentity.withLock { $0 = identity }
        return identity
    }

    struct Identity: Sendable, Equatable {
        var device: UInt64
        var inode: UInt64
    }

    private let knownIdentity = Locked<Identity?>(nil)

    /// Whether the directory is on a file system held in memory (tmpfs,
    /// ramfs), asked of the system once (`fstatfs`): there a new file costs
    /// a few microseconds, about what handing its making to another thread
    /// costs; on a disk file system it costs more (an inode allocated, a
    /// journal entry). False when `fstatfs` fails.
    var isInMemory: Bool {
        switch knownInMemory.load(ordering: .relaxed) {
        case 1: return false
        case 2: return true
        default: break
        }
        let inMemory = courier_file_system_is_in_memory(fd) == 1
        knownInMemory.store(inMemory ? 2 : 1, ordering: .relaxed)
        return inMemory
    }

    /// `isInMemory` once asked: 0 not yet, 1 no, 2 yes.
    private let knownInMemory = Atomic<UInt8>(0)

    /// The path of `name` here, for messages and for what courier reports.
    func path(of name: String) -> String {
        // Made in one string of the length it needs: `path + "/" + name`
        // would make one for each `+`.
        let slash = !path.endsWithSlash
        var joined = ""
        joined.reserveCapacity(path.utf8.count + (slash ? 1 : 0) + name.utf8.count)
        joined += path
        if slash { joined += "/" }
        joined += name
        return joined
    }

    /// Creates `name` here exclusively: never through a symlink, never over
    /// an existing file. The caller closes the descriptor.
    func createFile(_ name: String, mode: mode_t) throws(Destination.Failure) -> Int32 {
        let fd = openat(self.fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw .io("cannot create \(path(of: name)): \(Destination.errorText())") }
        return fd
    }

    /// A new file here without a name, open for reading and writing: it
    /// vanishes with its last descriptor unless `link(_:as:)` names it, so
    /// nothing half-made is ever seen under a name. Nil where the file
    /// system makes no such files (`O_TMPFILE`). The caller closes it.
    func makeUnnamedFile(mode: mode_t) -> Int32? {
        let fd = openat(self.fd, ".", Self.unnamedFile | O_RDWR | O_CLOEXEC, mode)
        return fd >= 0 ? fd : nil
    }

    /// Gives the unnamed file `file` (from `makeUnnamedFile`) the name
    /// `name` here, unless something has that name (`EEXIST`): nil when it
    /// has it, else the `errno` of the link. By the descriptor itself
    /// (`AT_EMPTY_PATH`, which Linux allows since 6.10 for a file this
    /// process opened, and before only with `CAP_DAC_READ_SEARCH`); where
    /// that is refused, through `/proc/self/fd`, which needs no privilege
    /// but costs a walk of `/proc` on every link, and from then on only so.
    func link(_ file: Int32, as name: String) -> Int32? {
        // A short name (most are) is read from the stack here; passed as a
        // C string, it would be copied to the heap first.
        name.withCString { name -> Int32? in
            if Self.linksByDescriptor.load(ordering: .relaxed) {
                if linkat(file, "", fd, name, Self.emptyPath) == 0 { return nil }
                let refused = errno
                guard refused == ENOENT || refused == EPERM else { return refused }
                guard linkat(AT_FDCWD, "/proc/self/fd/\(file)", fd, name, AT_SYMLINK_FOLLOW) == 0 else { return errno }
                Self.linksByDescriptor.store(false, ordering: .relaxed)
                return nil
            }
            return linkat(AT_FDCWD, "/proc/self/fd/\(file)", fd, name, AT_SYMLINK_FOLLOW) == 0 ? nil : errno
        }
    }

    /// Whether `link` still tries `AT_EMPTY_PATH` first.
    private static let linksByDescriptor = Atomic(true)

    /// `AT_EMPTY_PATH`, which the Glibc module leaves out (it is declared
    /// only under `_GNU_SOURCE`).
    private static let emptyPath: Int32 = 0x1000

    /// `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`, the same on every Linux
    /// architecture courier builds for), which the Glibc module leaves out
    /// (it is declared only under `_GNU_SOURCE`).
    private static let unnamedFile: Int32 = 0o20_000_000 | O_DIRECTORY

    /// Removes the name `name` (a symbolic link itself, never what it points
    /// at; never a directory). False when nothing was removed.
    @discardableResult
    func remove(_ name: some Collection<UInt8>) -> Bool {
        Self.withName(name, refused: false) { unlinkat(fd, $0, 0) == 0 }
    }

    /// The status of `name` itself (a symbolic link is not followed); nil
    /// when there is nothing by that name.
    func status(of name: some Collection<UInt8>) -> stat? {
        Self.withName(name, refused: nil) { name in
            var info = stat()
            return fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
        }
    }

    /// Opens `name` for reading when it is a regular file: never through a
    /// symbolic link, never blocking on a FIFO or a device. The descriptor
    /// (the caller closes it) and its status, or nil when `name` is anything
    /// else or cannot be opened.
    func openFile(_ name: some Collection<UInt8>) -> (fd: Int32, info: stat)? {
        let opened = Self.withName(name, refused: Int32(-1)) { openat(fd, $0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard opened >= 0 else { return nil }
        var info = stat()
        guard fstat(opened, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(opened)
            return nil
        }
        return (opened, info)
    }

    /// Opens the directory `name` here, never through a symbolic link; nil
    /// (with `errno` set) when it is not a directory or cannot be opened.
    func openDirectory(_ name: some Collection<UInt8>) -> DirectoryHandle? {
        let opened = Self.withName(name, refused: Int32(-1)) {
            openat(fd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        }
        return opened >= 0 ? DirectoryHandle(fd: opened, path: path(of: String(decoding: name, as: UTF8.self))) : nil
    }

    /// Calls `body` with each name here (`.` and `..` left out), as bytes,
    /// as the directory is read: none are held, however many there are.
    /// Names may be removed meanwhile. Reads through a descriptor of its own,
    /// so listings on several threads do not share a position.
    func forEachName(_ body: ([UInt8]) -> Void) {
        let listing = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard listing >= 0 else { return }
        guard let stream = fdopendir(listing) else {
            close(listing)
            return
        }
        defer { closedir(stream) }
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(while: { $0 != 0 })) }
            if name == [UInt8(ascii: ".")] || name == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            body(name)
        }
    }

    /// Removes `name` here and, when it is a directory, everything in it:
    /// each directory is opened with `O_NOFOLLOW` relative to its parent and
    /// emptied with `unlinkat` relative to its own descriptor, so a symbolic
    /// link anywhere below is removed itself and never followed. Directories
    /// nested deeper than `depth` are left, with those that hold them.
    /// Returns whether `name` is gone (true when nothing stood there).
    @discardableResult
    func removeTree(_ name: some Collection<UInt8>, depth: Int = 16) -> Bool {
        guard let info = status(of: name) else { return true }
        guard info.st_mode & S_IFMT == S_IFDIR else { return remove(name) }
        guard depth > 0, let directory = openDirectory(name) else { return false }
        directory.forEachName { directory.removeTree($0, depth: depth - 1) }
        return Self.withName(name, refused: Int32(-1)) { unlinkat(fd, $0, AT_REMOVEDIR) } == 0
    }

    // The same, for names courier gives.

    @discardableResult
    func remove(_ name: String) -> Bool { remove(name.utf8) }

    func status(of name: String) -> stat? { status(of: name.utf8) }

    func openFile(_ name: String) -> (fd: Int32, info: stat)? { openFile(name.utf8) }

    func openDirectory(_ name: String) -> DirectoryHandle? { openDirectory(name.utf8) }

    @discardableResult
    func removeTree(_ name: String) -> Bool { removeTree(name.utf8) }

    /// Calls `body` with `name` as a C string when it is one name in a
    /// directory; else returns `refused`.
    private static func withName<Result>(
        _ name: some Collection<UInt8>, refused: Result, _ body: (UnsafePointer<CChar>) -> Result
    ) -> Result {
        if let result = name.withContiguousStorageIfAvailable({ withName($0, refused: refused, body) }) { return result }
        return Array(name).withUnsafeBufferPointer { withName($0, refused: refused, body) }
    }

    /// The name is copied, with its NUL, into a buffer on the stack (on the
    /// heap only past the size the standard library keeps there).
    private static func withName<Result>(
        _ name: UnsafeBufferPointer<UInt8>, refused: Result, _ body: (UnsafePointer<CChar>) -> Result
    ) -> Result {
        let dot = UInt8(ascii: ".")
        guard let start = name.baseAddress, !name.isEmpty, memchr(start, 0, name.count) == nil,
            memchr(start, Int32(UInt8(ascii: "/")), name.count) == nil,
            !(name.count <= 2 && name.allSatisfy { $0 == dot })
        else { return refused }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: name.count + 1) { buffer in
            memcpy(buffer.baseAddress!, start, name.count)
            buffer[name.count] = 0
            return body(UnsafePointer(buffer.baseAddress!))
        }
    }
}

extension DirectoryHandle {
    /// Makes `path` and any missing parents with mode 0700 (directories of
    /// fetched data are private to the user); existing ones are left as
    /// they are.
    static func makePrivateDirectories(_ path: String) throws(Destination.Failure) {
        var built = path.isAbsolutePath ? "" : "."
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            built += "/" + component
            if mkdir(built, 0o700) != 0, errno != EEXIST {
                throw .io("cannot create \(built): \(Destination.errorText())")
            }
        }
    }
}
