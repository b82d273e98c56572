#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Locking
import Synchronization

/// An unnamed file (`O_TMPFILE`) made ahead, on a thread of its own, in the
/// directory a body held in memory will be placed in. Creating a file is
/// on most file systems the costliest step of placing a small body, and
/// on ext4 creations in one directory contend and scan the inode table
/// again when run at once; so every such file is made by one thread, in
/// order, while delivery does everything else on another. The files asked
/// for on a queue while it has not yet begun making the last ones asked
/// for there join them, so a run of bodies finished together costs that
/// queue one hand-over (and its thread one wake-up), not one each. On a
/// file system held in memory, where a creation costs about what that
/// hand-over does, nobody asks for it ahead: whoever places the body makes
/// it when it takes it (`take(makingIn:mode:)`). Made at most once and
/// taken at most once: a file made after it was taken, or never taken, is
/// closed (and so vanishes). At most `limit` are open in the process at a
/// time; past that, none is made and whoever places the body creates its
/// file.
final class PreparedFile: Sendable {
    private enum State {
        /// Nobody asked for it.
        case unasked
        /// Asked for, not made yet.
        case pending
        case made(Int32)
        /// Not made (too many open, or the file system makes none), or
        /// taken.
        case none
    }

    /// A file asked for and not made yet.
    private struct Request: Sendable {
        let file: PreparedFile
        let directory: DirectoryHandle
        let mode: mode_t
    }

    private let state = Monitor(State.unasked)
    private static let open = Atomic(0)
    /// The files asked for and not made yet, by the queue that makes them,
    /// oldest first; a queue is listed only while one hand-over to it is
    /// pending, which makes them all.
    private static let requests = Locked<[ObjectIdentifier: [Request]]>([:])
    /// An eighth of the descriptors the process may open
    /// (`RLIMIT_NOFILE`), between 64 and 1,024. Bodies finish ahead of
    /// their delivery when the engine outpaces the delivery queue (W1:
    /// hundreds at a time), and each one past the limit costs the delivery
    /// a named file and a rename; the rest of the descriptors stay for
    /// transfers and the cache.
    static let limit: Int = {
        var limits = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limits) == 0 else { return 64 }
        let soft = Int(clamping: limits.rlim_cur)
        return min(1024, max(64, soft / 8))
    }()

    init() {}

    deinit {
        if case .made(let fd) = state.withLock({ $0 }) { Self.release(fd) }
    }

    /// Makes the file in `directory` with `mode` (less the umask) on
    /// `queue`; `take` waits for it from now on. Only the first call, and
    /// only before any `take`, asks for it.
    func make(in directory: DirectoryHandle, mode: mode_t, on queue: DispatchQueue) {
        let asked = state.withLock { state -> Bool in
            guard case .unasked = state else { return false }
            state = .pending
            return true
        }
        guard asked else { return }
        let key = ObjectIdentifier(queue)
        let request = Request(file: self, directory: directory, mode: mode)
        let isFirst = Self.requests.withLock { requests -> Bool in
            requests[key, default: []].append(request)
            return requests[key]?.count == 1
        }
        guard isFirst else { return }
        queue.async {
            for request in Self.requests.withLock({ $0.removeValue(forKey: key) ?? [] }) {
                request.file.makeFile(in: request.directory, mode: request.mode)
            }
        }
    }

    /// Makes the file asked for, on the queue it was asked for on, or on
    /// the thread that takes it (`take(makingIn:mode:)`).
    private func makeFile(in directory: DirectoryHandle, mode: mode_t) {
        var fd: Int32?
        if Self.open.add(1, ordering: .relaxed).newValue <= Self.limit {
            fd = directory.makeUnnamedFile(mode: mode)
        }
        if fd == nil { Self.open.subtract(1, ordering: .relaxed) }
        let late = state.withLock { state -> Bool in
            guard case .pending = state else { return true }
            state = fd.map { .made($0) } ?? .none
            return false
        }
        if late, let fd { Self.release(fd) }
    }

    /// The file, made now in `directory` with `mode` (less the umask) on
    /// the calling thread when nobody asked for it yet, else as `take()`
    /// gives it; the caller closes it.
    func take(makingIn directory: DirectoryHandle, mode: mode_t) -> Int32? {
        let asked = state.withLock(wake: false) { state -> Bool in
            guard case .unasked = state else { return false }
            state = .pending
            return true
        }
        if asked { makeFile(in: directory, mode: mode) }
        return take()
    }

    /// The file, once made, when it was asked for and could be made; the
    /// caller closes it. Nothing is made after this.
    func take() -> Int32? {
        let taken = state.wait(until: { if case .pending = $0 { false } else { true } }) { state -> Int32? in
            defer { state = .none }
            if case .made(let fd) = state { return fd }
            return nil
        }
        if taken != nil { Self.open.subtract(1, ordering: .relaxed) }
        return taken
    }

    private static func release(_ fd: Int32) {
        close(fd)
        open.subtract(1, ordering: .relaxed)
    }
}
