#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Locking
import Logging

/// The cache directory, opened once: every directory courier keeps there
/// (`http`, `tmp`, `journals`, `downloads`, `downloads/<pid>`, and whatever
/// a later store keeps beside them) is handed out from here, each opened
/// relative to its parent's descriptor, so that nothing below the root is
/// reached by a path again.
///
/// The cache directory itself is the user's choice and may be a symbolic
/// link (a cache on another disk): it is made when missing and opened once,
/// following links. Below it nothing is followed. A directory is opened with
/// `O_NOFOLLOW | O_DIRECTORY` and made (0700) when missing; a name there
/// that is a symbolic link or not a directory at all (a file, a FIFO, a
/// socket) is removed — the name itself: removing a symbolic link removes
/// nothing it points at — and a directory made in its place, with one line
/// in the log. What is found in the cache directory never redirects courier
/// and never stops it.
final class CacheRoot: Sendable {
    /// The cache directory.
    let handle: DirectoryHandle
    let logger: Logger
    private let opened = Locked<CacheDatabase?>(nil)

    init(opening path: String, logger: Logger) throws(Destination.Failure) {
        try DirectoryHandle.makePrivateDirectories(path)
        handle = try DirectoryHandle(opening: path)
        self.logger = logger
    }

    var path: String { handle.path }

    /// `Cache.db`, opened on first use and shared by every store of this
    /// process (the disk tier, the partial bodies): one connection, so a
    /// damaged database is dropped and made anew in one place.
    var database: CacheDatabase {
        opened.withLock { opened in
            if let opened { return opened }
            let database = CacheDatabase(root: handle, logger: logger)
            opened = database
            return database
        }
    }

    /// The directory `name` in `parent` (the cache directory when nil), one
    /// of courier's own names: opened, made when missing, and put in place
    /// of anything else found there. Throws only when none of that can be
    /// done (a directory courier may not write, say).
    func directory(_ name: String, in parent: DirectoryHandle? = nil) throws(Destination.Failure) -> DirectoryHandle {
        let parent = parent ?? handle
        let shown = parent.path(of: name)
        var reason = ""
        // Other processes may be doing the same: a few rounds settle it.
        for _ in 0..<4 {
            if let directory = parent.openDirectory(name) { return directory }
            reason = Destination.errorText()
            guard let info = parent.status(of: name) else {
                if mkdirat(parent.fd, name, 0o700) != 0, errno != EEXIST {
                    throw .io("cannot create \(shown): \(Destination.errorText())")
                }
                continue
            }
            // A directory now: made by another process meanwhile, or one
            // this user may not open (then the rounds run out).
            if info.st_mode & S_IFMT == S_IFDIR { continue }
            if parent.remove(name) {
                logger.warning("\(shown) was \(Self.kind(of: info)), not a directory: removed it and made a directory in its place")
            }
        }
        throw .io("cannot open \(shown): \(reason)")
    }

    /// What a file's mode says it is, for the log.
    private static func kind(of info: stat) -> String {
        switch info.st_mode & S_IFMT {
        case S_IFLNK: "a symbolic link"
        case S_IFREG: "a regular file"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR, S_IFBLK: "a device"
        default: "something else"
        }
    }
}
