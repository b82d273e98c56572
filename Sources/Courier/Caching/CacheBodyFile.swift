import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A body file to be stored, described by what was written to it: its name
/// in an open directory, the length, XXH3-64 and digests of the bytes
/// written, and those bytes when they were kept. A transfer takes the length and checksum
/// as the bytes stream into the file, so storing the body never reads the
/// file back; the memory tier names a disk tier body file the same way. A
/// file changed since (in place, or another file renamed over its name)
/// fails the length or checksum check on every read, as a client's rewrite
/// of its destination does: the file is opened without following a
/// symbolic link or blocking on a FIFO, and taken only when it is a regular
/// file of `length` bytes.
struct CacheBodyFile: Sendable {
    /// The directory `name` is in; nil when `name` is a path.
    let directory: DirectoryHandle?
    let name: String
    let length: Int64
    /// XXH3-64 of the `length` bytes written.
    let checksum: UInt64
    /// The whole body, when it was kept while it streamed.
    let bytes: [UInt8]?
    /// The digests of the bytes written that were taken for some request's
    /// `integrity`, stored with the entry.
    let digests: BodyDigests
    /// An unnamed file (`O_TMPFILE`) that holds the whole body, written
    /// complete, for a body held in memory and written beside its
    /// destination before it has a name there: the disk tier links it by
    /// this descriptor rather than keep the bytes inline, and no other
    /// process can have changed it. The caller keeps it open while the
    /// body is stored.
    let unnamed: Int32?

    init(
        directory: DirectoryHandle?, name: String, length: Int64, checksum: UInt64, bytes: [UInt8]? = nil,
        digests: BodyDigests = BodyDigests(), unnamed: Int32? = nil
    ) {
        self.directory = directory
        self.name = name
        self.length = length
        self.checksum = checksum
        self.bytes = bytes.flatMap { Int64($0.count) == length ? $0 : nil }
        self.digests = digests
        self.unnamed = unnamed
    }

    /// Describes the regular file at `path` by reading it through: for a file
    /// whose bytes were not seen as they were written. Nil when it is not a
    /// readable regular file.
    init?(path: String) {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        let length = Int64(info.st_size)
        guard let checksum = CacheFileIO.hash(fd, length: length) else { return nil }
        self.init(directory: nil, name: path, length: length, checksum: checksum)
    }

    private var directoryFD: Int32 { directory?.fd ?? AT_FDCWD }

    /// Hard-links the file as `target` in `directory` (never following a
    /// symlink at its name), by its descriptor when it is `unnamed`. False
    /// when the link cannot be made (another file system, a file system
    /// without hard links, a link limit, a file not this user's).
    func link(into directory: DirectoryHandle, as target: String) -> Bool {
        if let unnamed { return directory.link(unnamed, as: target) == nil }
        return linkat(directoryFD, name, directory.fd, target, 0) == 0
    }

    /// The whole body: the kept bytes, else the file's, when they are
    /// `length` bytes that hash to `checksum`. The caller bounds `length`.
    func read() -> [UInt8]? {
        if let bytes { return bytes }
        guard length <= Int64(Int32.max), let source = openChecked() else { return nil }
        defer { close(source) }
        guard let read = CacheFileIO.read(source, count: Int(length), at: 0), XXH3.hash(read) == checksum else { return nil }
        return read
    }

    /// Writes the body to `fd`: the kept bytes, else the file's `length`
    /// bytes in bounded chunks, which must hash to `checksum`.
    func copy(to fd: Int32) -> Bool {
        if let bytes { return CacheFileIO.write(fd, bytes) }
        guard let source = openChecked() else { return false }
        defer { close(source) }
        return CacheFileIO.copy(from: source, offset: 0, length: length, to: fd) == checksum
    }

    /// The file, opened for reading when it is a regular file of `length`
    /// bytes: a second descriptor of the `unnamed` one when there is one,
    /// as the name may be gone or another file's by now. The caller closes it.
    private func openChecked() -> Int32? {
        let source = unnamed.map { dup($0) } ?? openat(directoryFD, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard source >= 0 else { return nil }
        var info = stat()
        guard fstat(source, &info) == 0, info.st_mode & S_IFMT == S_IFREG, Int64(info.st_size) == length else {
            close(source)
            return nil
        }
        return source
    }
}
