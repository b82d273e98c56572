import CCurlShim
import CLibcurl

/// libcurl's multi handle. One thread drives it (`add`, `remove`, `perform`,
/// `poll`, `completed`, `cleanup`); `wakeup` may be called from any thread.
public final class MultiHandle: @unchecked Sendable {
    private let raw: UnsafeMutableRawPointer
    /// Easy handles that finished a transfer, reset for the next one.
    private var idle: [EasyHandle] = []
    /// How many idle handles are kept.
    public static let idleLimit = 32
    /// Handles `add` kept from libcurl because it refused one of their
    /// options: the next `completed()` reports them ended with its code.
    private var refused: [(handle: EasyHandle, code: CURLcode)] = []

    public init(maxHostConnections: Int = 0, maxTotalConnections: Int = 0) {
        raw = curl_multi_init()
        // Preferences, not needs: a libcurl that refuses one (built without
        // HTTP/2, or older than the option) runs every transfer as it would
        // by default, each on a connection of its own, without a bound.
        _ = courier_multi_setopt_long(raw, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        if maxHostConnections > 0 { _ = courier_multi_setopt_long(raw, CURLMOPT_MAX_HOST_CONNECTIONS, maxHostConnections) }
        if maxTotalConnections > 0 { _ = courier_multi_setopt_long(raw, CURLMOPT_MAX_TOTAL_CONNECTIONS, maxTotalConnections) }
    }

    /// An easy handle for a new transfer: a reset idle one when there is
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
    }

    public func remove(_ easy: EasyHandle) {
        if !refused.isEmpty { refused.removeAll { $0.handle === easy } }
        curl_multi_remove_handle(raw, easy.raw)
    }

    /// Removes `easy` from the multi handle and keeps it for a later
    /// transfer, or frees it when enough are kept.
    public func recycle(_ easy: EasyHandle) {
        remove(easy)
        guard idle.count < Self.idleLimit else {
            easy.cleanup()
            return
        }
        easy.reset()
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

    /// Waits for activity on libcurl's sockets, a `wakeup`, or `timeout`
    /// milliseconds, whichever comes first.
    public func poll(timeoutMilliseconds: Int) {
        var ready: Int32 = 0
        curl_multi_poll(raw, nil, 0, Int32(clamping: timeoutMilliseconds), &ready)
    }

    /// How long libcurl wants to wait at most before `perform` is due.
    public var timeoutMilliseconds: Int? {
        guard refused.isEmpty else { return 0 }
        var timeout = -1
        curl_multi_timeout(raw, &timeout)
        return timeout >= 0 ? timeout : nil
    }

    /// Interrupts a `poll` in progress (or the next one). Thread-safe.
    public func wakeup() {
        curl_multi_wakeup(raw)
    }

    /// Transfers that have ended since the last call, with their result code.
    public func completed() -> [(handle: EasyHandle, code: Int32)] {
        var finished = refused.map { ($0.handle, Int32($0.code.rawValue)) }
        refused = []
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
        idle.forEach { $0.cleanup() }
        idle = []
        curl_multi_cleanup(raw)
    }
}
