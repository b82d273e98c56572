import CCurlShim
import CLibcurl
import Locking

/// libcurl's multi handle. One thread makes it and drives it (`add`,
/// `remove`, `perform`, `poll`, `completed`, `cleanup`); other threads hold
/// only its `waker`.
public final class MultiHandle {
    /// Interrupts the driving thread's `poll` from any thread, for as long
    /// as the multi handle lives; after `cleanup` it does nothing.
    public final class Waker: Sendable {
        /// The multi handle while it lives: `cleanup` takes it away under
        /// the lock, so no wake-up reaches a freed handle.
        private let multi = Locked<Target?>(nil)

        /// A waker for a multi handle made later (`MultiHandle(waker:)`):
        /// until then it wakes nothing.
        public init() {}

        /// Interrupts a `poll` in progress (or the next one).
        public func wakeup() {
            multi.withLock { $0?.wakeup() }
        }

        fileprivate func attach(_ target: Target?) {
            multi.withLock { $0 = target }
        }

        /// The multi handle as other threads see it: all they can do with it
        /// is `curl_multi_wakeup`, the one call libcurl lets any thread make
        /// on a handle another thread drives. That promise of libcurl's,
        /// which the compiler cannot see behind a C pointer, is why it is
        /// `@unchecked Sendable`; the pointer stays private to it.
        fileprivate struct Target: @unchecked Sendable {
            private let raw: UnsafeMutableRawPointer

            init(_ raw: UnsafeMutableRawPointer) { self.raw = raw }

            func wakeup() { curl_multi_wakeup(raw) }
        }
    }

    private let raw: UnsafeMutableRawPointer
    /// The one part of the handle other threads may hold.
    public let waker: Waker
    /// Easy handles that finished a transfer, readied for the next one.
    /// Not checked for exclusive access at run time: only the driving
    /// thread takes from it and adds to it, and neither calls back.
    @exclusivity(unchecked) private var idle: [EasyHandle] = []
    /// How many idle handles are kept.
    public static let idleLimit = 32
    /// Handles `add` kept from libcurl because it refused one of their
    /// options: the next `completed()` reports them ended with its code.
    /// Like `mayHaveWork`, read for every transfer added, removed or
    /// ended and not checked for exclusive access at run time: only the
    /// driving thread reads and changes it, and neither calls back.
    @exclusivity(unchecked) private var refused: [(handle: EasyHandle, code: CURLcode)] = []
    /// A socket was ready at the last poll (or the poll failed), or a
    /// handle was added or removed, since `performIfDue` last ran libcurl.
    @exclusivity(unchecked) private var mayHaveWork = true

    public init(maxHostConnections: Int = 0, maxTotalConnections: Int = 0, waker: Waker = Waker()) {
        raw = curl_multi_init()
        self.waker = waker
        // Preferences, not needs: a libcurl that refuses one (built without
        // HTTP/2, or older than the option) runs every transfer as it would
        // by default, each on a connection of its own, without a bound.
        _ = courier_multi_setopt_long(raw, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        if maxHostConnections > 0 { _ = courier_multi_setopt_long(raw, CURLMOPT_MAX_HOST_CONNECTIONS, maxHostConnections) }
        if maxTotalConnections > 0 { _ = courier_multi_setopt_long(raw, CURLMOPT_MAX_TOTAL_CONNECTIONS, maxTotalConnections) }
        waker.attach(Waker.Target(raw))
    }

    /// An easy handle for a new transfer: an idle one when there is
    /// one, so each transfer does not allocate libcurl's buffers anew.
    public func makeEasyHandle() -> EasyHandle {
        idle.popLast() ?? EasyHandle()
    }

    /// Starts `easy`'s transfer, or, when libcurl refused one of its
    /// options, has the next `completed()` report it ended with that code.
    public func add(_ easy: EasyHandle) {
        if let refusal = easy.refusal {
            refused.append((easy, refusal))
            return
        }
        curl_multi_add_handle(raw, easy.raw)
        mayHaveWork = true
    }

    public func remove(_ easy: EasyHandle) {
        if !refused.isEmpty { refused.removeAll { $0.handle === easy } }
        curl_multi_remove_handle(raw, easy.raw)
        mayHaveWork = true
    }

    /// Removes `easy` from the multi handle and keeps it for a later
    /// transfer, or frees it when enough are kept.
    public func recycle(_ easy: EasyHandle) {
        remove(easy)
        guard idle.count < Self.idleLimit else {
            easy.cleanup()
            return
        }
        easy.prepareForReuse()
        idle.append(easy)
    }

    /// Lets libcurl do the work that is ready; returns the number of transfers
    /// still running.
    @discardableResult
    public func perform() -> Int {
        var running: Int32 = 0
        curl_multi_perform(raw, &running)
        return Int(running)
    }

    /// Runs `perform` when libcurl may have work: a socket was ready at the
    /// last `poll`, a handle was added or removed since libcurl last ran
    /// here, or libcurl's own timer is due (as it is at once after a
    /// handle is unpaused). A poll ended by a `wakeup` alone leaves nothing
    /// for libcurl to do, and each `perform` checks the socket of every
    /// transfer under way with a system call of its own. True when libcurl
    /// ran.
    @discardableResult
    public func performIfDue() -> Bool {
        guard mayHaveWork || timeoutMilliseconds == 0 else { return false }
        mayHaveWork = false
        perform()
        return true
    }

    /// Waits for activity on libcurl's sockets, a `wakeup`, or `timeout`
    /// milliseconds, whichever comes first.
    public func poll(timeoutMilliseconds: Int) {
        var ready: Int32 = 0
        // libcurl does not count its wake-up socket among the ready ones.
        let code = curl_multi_poll(raw, nil, 0, Int32(clamping: timeoutMilliseconds), &ready)
        if code != CURLM_OK || ready > 0 { mayHaveWork = true }
    }

    /// How long libcurl wants to wait at most before `perform` is due.
    public var timeoutMilliseconds: Int? {
        guard refused.isEmpty else { return 0 }
        var timeout = -1
        curl_multi_timeout(raw, &timeout)
        return timeout >= 0 ? timeout : nil
    }

    /// Transfers that have ended since the last call, with their result code.
    public func completed() -> [(handle: EasyHandle, code: Int32)] {
        var finished: [(handle: EasyHandle, code: Int32)] = []
        if !refused.isEmpty {
            finished = refused.map { (handle: $0.handle, code: Int32($0.code.rawValue)) }
            refused = []
        }
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(raw, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE else { continue }
            var userData: UnsafeMutableRawPointer?
            courier_easy_getinfo_ptr(message.pointee.easy_handle, CURLINFO_PRIVATE, &userData)
            let code = Int32(courier_msg_result(message).rawValue)
            finished.append((EasyHandle.from(userData: userData), code))
        }
        return finished
    }

    /// Frees the multi handle and the idle easy handles; every transfer must
    /// have been removed first.
    public func cleanup() {
        waker.attach(nil)
        idle.forEach { $0.cleanup() }
        idle = []
        curl_multi_cleanup(raw)
    }
}

@available(*, unavailable) extension MultiHandle: Sendable {}
