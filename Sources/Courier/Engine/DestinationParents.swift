#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Curl

/// The directory the last destinations lay in, kept open with what was
/// found of it, so that a run of downloads into one directory opens and
/// checks it once rather than per body (open, `faccessat`, `fstat`,
/// close). The first use in each turn of the engine (`checkAgain`) checks,
/// with one `stat` of its path, that the path still names that directory
/// with the same owner and mode; else it is opened and checked anew. The
/// bodies a turn starts (several when many downloads run) share that
/// check: a directory replaced within a turn is found at the next one.
/// Only for destinations the client is trusted with (no download root):
/// under a root each body's walk is made anew.
/// The owner closes them (`closeAll`) whenever no transfer runs, so an
/// idle courier holds no directory open (one that would keep its file
/// system from being unmounted). Used on the engine's thread alone.
final class DestinationParents {
    /// A destination's directory, open.
    struct Parent {
        let directory: DirectoryHandle
        /// Courier may create files in it.
        let isWritable: Bool
        /// The file system it is on.
        let device: dev_t
    }

    private struct Entry {
        let path: String
        let parent: Parent
        let identity: Identity
        /// The turn in which `identity` was last found at `path`.
        var checkedIn: Int
    }

    /// What tells a directory apart, and what decides who may write in it.
    private struct Identity: Equatable {
        let device: dev_t
        let inode: ino_t
        let mode: mode_t
        let owner: uid_t
        let group: gid_t

        init(_ info: stat) {
            (device, inode, mode, owner, group) = (info.st_dev, info.st_ino, info.st_mode, info.st_uid, info.st_gid)
        }
    }

    /// The directories kept, the latest last. Like `turn`, not checked for
    /// exclusive access at run time: both change on the engine's thread
    /// alone, and nothing their changes call reaches them.
    @exclusivity(unchecked) private var entries: [Entry] = []
    /// How many directories are kept open.
    static let limit = 4
    /// Counts the calls to `checkAgain`.
    @exclusivity(unchecked) private var turn = 0

    init() {}

    /// Has each directory kept checked again at its next use: called at
    /// each turn of the engine.
    func checkAgain() {
        turn &+= 1
    }

    /// The directory at `path` (a path from the client, symbolic links
    /// followed), open; nil when it cannot be opened.
    func parent(at path: String) -> Parent? {
        let known = entries.lastIndex(where: { $0.path.isExactly(path) })
        if let known, entries[known].checkedIn == turn { return entries[known].parent }
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let identity = Identity(info)
        if let known {
            if entries[known].identity == identity {
                entries[known].checkedIn = turn
                return entries[known].parent
            }
            entries.remove(at: known)
        }
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        let directory = DirectoryHandle(fd: fd, path: path)
        guard fstat(fd, &info) == 0 else { return nil }
        let parent = Parent(directory: directory, isWritable: faccessat(fd, ".", W_OK, 0) == 0, device: info.st_dev)
        if entries.count == Self.limit { entries.removeFirst() }
        entries.append(Entry(path: path, parent: parent, identity: Identity(info), checkedIn: turn))
        return parent
    }

    /// Lets every directory go (each closes once no body uses it).
    func closeAll() {
        entries = []
    }
}

@available(*, unavailable) extension DestinationParents: Sendable {}
