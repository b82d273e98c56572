#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CThreadShim

/// Starts a thread of the system's own that runs `body` and ends: the
/// threads a server keeps for its input, its output and its transfers.
/// `stackSize` zero keeps the system's default.
public func startThread(named name: String, stackSize: Int = 0, _ body: @escaping @Sendable () -> Void) {
    final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    if stackSize > 0 { pthread_attr_setstacksize(&attributes, stackSize) }
    let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
    #if canImport(Glibc)
    var thread = pthread_t()
    #else
    var thread: pthread_t?
    #endif
    let created = pthread_create(&thread, &attributes, { context in
        let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
        courier_name_this_thread(start.name)
        start.body()
        return nil
    }, start)
    precondition(created == 0, "cannot start thread \(name): error \(created)")
}

/// Has every thread allocate from one malloc arena (glibc's
/// `M_ARENA_MAX`), called before any thread starts. A thread that takes an
/// arena of its own grows and shrinks that arena's heap with `mprotect` as
/// its allocations come and go, about two system calls per small download
/// in courier, and each arena holds memory of its own; courier's few
/// threads seldom allocate at the same moment, so sharing the main arena
/// costs them no waiting.
public func useOneMallocArena() {
    courier_use_one_malloc_arena()
}
