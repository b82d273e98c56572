import Foundation

/// A body file to be stored, opened once: its descriptor, length and XXH64,
/// and its bytes when they were asked for. The disk tier hard-links the
/// very inode this descriptor holds, so what was hashed is what is linked.
/// The owner calls `close()`.
struct CacheBodyFile {
    let fd: Int32
    let length: Int64
    /// XXH64 of the `length` bytes.
    let checksum: UInt64
    /// The whole body, when opened with `readingWhole`.
    let bytes: [UInt8]?
    let device: UInt64
    let inode: UInt64

    /// Opens the regular file at `path` and hashes it: from memory when
    /// `readingWhole` (the bytes are kept), else streamed. Nil when it is
    /// not a readable regular file or cannot be read whole.
    init?(path: String, readingWhole: Bool) {
        guard let (fd, info) = CacheFileIO.openRegular(path) else { return nil }
        let length = Int64(info.st_size)
        var bytes: [UInt8]?
        var checksum: UInt64?
        if readingWhole, length <= Int64(Int32.max) {
            bytes = CacheFileIO.read(fd, count: Int(length), at: 0)
            checksum = bytes.map { XXH64.hash($0) }
        } else {
            checksum = CacheFileIO.hash(fd, length: length)
        }
        guard let checksum else {
            Foundation.close(fd)
            return nil
        }
        self.fd = fd
        self.length = length
        self.checksum = checksum
        self.bytes = bytes
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    func close() { Foundation.close(fd) }

    /// Hard-links this file's inode as `target`. On Linux through
    /// `/proc/self/fd`, which names the inode the descriptor holds, not
    /// whatever file has its old path now; elsewhere by `path`, checked to be
    /// the same inode afterwards. False when the link cannot be made (another
    /// file system, a file system without hard links, a link limit).
    func link(from path: String, to target: String) -> Bool {
        #if os(Linux)
            if linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, target, AT_SYMLINK_FOLLOW) == 0 { return true }
            guard errno == ENOENT else { return false }
        #endif
        guard Foundation.link(path, target) == 0 else { return false }
        var info = stat()
        if lstat(target, &info) == 0, UInt64(info.st_dev) == device, UInt64(info.st_ino) == inode { return true }
        unlink(target)
        return false
    }
}
