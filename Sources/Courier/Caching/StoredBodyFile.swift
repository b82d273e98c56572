#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A disk tier body file held open from the lookup that checked it to the
/// delivery that uses it, so another process evicting or replacing the
/// entry meanwhile takes nothing away: the descriptor still reads the file
/// that was checked. Its bytes are read whole only when asked for, and
/// checked against `length` and `checksum` again whenever they are read,
/// since the file may share its inode with a client's destination that is
/// rewritten in place.
final class StoredBodyFile: Sendable {
    /// The directory the body file is in, and its name there.
    let directory: DirectoryHandle
    let name: String
    let length: Int64
    /// XXH3-64 of the body.
    let checksum: UInt64
    /// Read only, and only with `pread`: shared by every thread that reads.
    private let fd: Int32

    /// Takes `fd`, an open regular file of `length` bytes.
    init(fd: Int32, directory: DirectoryHandle, name: String, length: Int64, checksum: UInt64) {
        self.fd = fd
        self.directory = directory
        self.name = name
        self.length = length
        self.checksum = checksum
    }

    deinit { close(fd) }

    /// The whole body, when it still hashes to `checksum`. The caller bounds
    /// `length`.
    func read() -> [UInt8]? {
        guard length <= Int64(Int32.max), let bytes = CacheFileIO.read(fd, count: Int(length), at: 0),
            XXH3.hash(bytes) == checksum
        else { return nil }
        return bytes
    }

    /// The body's digests by each of `algorithms`, read through in bounded
    /// chunks; nil when it cannot be read whole.
    func digests(_ algorithms: Set<HashAlgorithm>) -> BodyDigests? {
        CacheFileIO.digests(fd, length: length, algorithms)
    }

    /// Up to `count` bytes from the body's start, unchecked (what a reader
    /// of image sizes needs).
    func prefix(_ count: Int) -> [UInt8] {
        CacheFileIO.read(fd, count: Int(min(Int64(count), length)), at: 0) ?? []
    }

    /// Puts the body at `target` in `directory`, a name made there
    /// exclusively: a hard link of the file when its name still leads to
    /// the file held open, which is this user's own and has no other name
    /// (so a large body costs no write, two of a client's files never come
    /// to share one inode, and a file of another user is never handed on),
    /// else a copy from the open file in bounded chunks. What is left there
    /// has been read through and matched `length` and `checksum`; false,
    /// and nothing left, when it did not.
    func place(in target: DirectoryHandle, as targetName: String) -> Bool {
        if linkat(directory.fd, name, target.fd, targetName, 0) == 0 {
            var held = stat()
            if fstat(fd, &held) == 0, let (linked, info) = target.openFile(targetName) {
                defer { close(linked) }
                if info.st_dev == held.st_dev, info.st_ino == held.st_ino, info.st_uid == geteuid(), info.st_nlink == 2,
                    Int64(info.st_size) == length, CacheFileIO.hash(linked, length: length) == checksum
                {
                    return true
                }
            }
            target.remove(targetName)
        }
        guard let output = try? target.createFile(targetName, mode: 0o600) else { return false }
        let copied = CacheFileIO.copy(from: fd, offset: 0, length: length, to: output) == checksum
        let closed = close(output) == 0
        guard copied, closed else {
            target.remove(targetName)
            return false
        }
        return true
    }
}
