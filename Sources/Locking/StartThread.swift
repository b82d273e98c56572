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
    /// What the new thread is handed, through a pointer the compiler
    /// does not follow: `Sendable`, so that it may cross.
    final class Start: Sendable {
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
