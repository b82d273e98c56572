import CCurlShim
import CLibcurl

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a transfer asks of libcurl.
///
/// The options every transfer of a run shares (schemes, redirects, buffer,
/// CA file, proxy, user agent) are held in one immutable box that copies
/// of the options share: a transfer's options are copied a few times on
/// their way to its handle, and each copy then retains one reference for
/// them rather than one per string, and a reused handle tells that they
/// did not change by the box alone.
public struct EasyOptions: Sendable {
    public var url: String
    /// Request header fields. A value is bytes: one an origin sent (an
    /// entity tag) goes back as it came, whether UTF-8 or not.
    public var headers: [(name: String, value: [UInt8])] = []
    public var timeoutMilliseconds: Int?
    public var connectTimeoutMilliseconds: Int?
    /// Bytes per second below which, for `lowSpeedTime` seconds, the
    /// transfer fails as timed out; 0 for no such check.
    public var lowSpeedLimit: Int64 = 0
    public var lowSpeedTime = 0
    /// Bodies announced larger than this fail before they are read.
    public var maxFileSize: Int64?
    /// Whether libcurl asks for every content coding it can decode
    /// (`Accept-Encoding`) and decodes the body. Off for a request for a
    /// range of a body kept in its identity form: its rest must come as it
    /// is.
    public var acceptsEncodings = true
    /// The options `EasyHandle.configure` sets once on a handle, which it
    /// resets to change.
    private var fixed = FixedOptions.standard

    /// Bytes libcurl reads from the network per write callback at most:
    /// 100 KiB, as the curl tool asks (libcurl's own default is 16 KiB), so
    /// a long body costs a sixth of the callbacks and file writes.
    public var bufferSize: Int {
        get { fixed.values.bufferSize }
        set { changeFixed { $0.bufferSize = newValue } }
    }
    /// Schemes a transfer may use, comma-separated ("http,https").
    public var protocols: String {
        get { fixed.values.protocols }
        set { changeFixed { $0.protocols = newValue } }
    }
    /// Schemes a redirect may lead to.
    public var redirectProtocols: String {
        get { fixed.values.redirectProtocols }
        set { changeFixed { $0.redirectProtocols = newValue } }
    }
    public var maxRedirects: Int {
        get { fixed.values.maxRedirects }
        set { changeFixed { $0.maxRedirects = newValue } }
    }
    /// Whether libcurl follows redirects itself. Off when the caller follows
    /// them (to check each hop), as courier's transfers do. Setting the
    /// value it has already keeps the shared box.
    public var followRedirects: Bool {
        get { fixed.values.followRedirects }
        set {
            guard newValue != followRedirects else { return }
            changeFixed { $0.followRedirects = newValue }
        }
    }
    public var caFile: String? {
        get { fixed.values.caFile }
        set { changeFixed { $0.caFile = newValue } }
    }
    /// The proxy for this transfer whatever the environment says, with no
    /// host bypassing it; nil for `proxyEnvironment`'s.
    public var proxy: String? {
        get { fixed.values.proxy }
        set { changeFixed { $0.proxy = newValue } }
    }
    /// The proxies the environment names, used when `proxy` is nil.
    public var proxyEnvironment: ProxyEnvironment {
        get { fixed.values.proxyEnvironment }
        set { changeFixed { $0.proxyEnvironment = newValue } }
    }
    public var userAgent: String {
        get { fixed.values.userAgent }
        set { changeFixed { $0.userAgent = newValue } }
    }

    /// Changes a shared option in a box of these options' own.
    private mutating func changeFixed(_ change: (inout FixedOptions.Values) -> Void) {
        var values = fixed.values
        change(&values)
        fixed = FixedOptions(values)
    }

    public init(url: String) { self.url = url }

    /// The URL's scheme is https (compared as bytes, in any case): read
    /// from the string's own storage where it has one, as a URL made here
    /// does, which a byte-by-byte iterator is not.
    var isHTTPS: Bool {
        url.utf8.withContiguousStorageIfAvailable(Self.isHTTPS)
            ?? Array(url.utf8.prefix(6)).withUnsafeBufferPointer(Self.isHTTPS)
    }

    private static func isHTTPS(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        // Each letter in either case (a byte that is one once 0x20 is set),
        // the colon as it is.
        bytes.count >= 6 && bytes[0] | 0x20 == UInt8(ascii: "h") && bytes[1] | 0x20 == UInt8(ascii: "t")
            && bytes[2] | 0x20 == UInt8(ascii: "t") && bytes[3] | 0x20 == UInt8(ascii: "p") && bytes[4] | 0x20 == UInt8(ascii: "s")
            && bytes[5] == UInt8(ascii: ":")
    }

    /// libcurl's low-speed check as set: (0, 0) for none.
    var lowSpeedCheck: (limit: Int, time: Int) {
        lowSpeedLimit > 0 && lowSpeedTime > 0 ? (Int(clamping: lowSpeedLimit), lowSpeedTime) : (0, 0)
    }

    /// Whether `other` asks for the options `EasyHandle.configure` sets once
    /// on a handle, which it resets to change: at once when both hold the
    /// same box of them, as the transfers of a run do.
    func sharesFixedOptions(with other: EasyOptions) -> Bool {
        if fixed === other.fixed { return true }
        return followRedirects == other.followRedirects && maxRedirects == other.maxRedirects && bufferSize == other.bufferSize
            && Self.same(protocols, other.protocols) && Self.same(redirectProtocols, other.redirectProtocols)
            && Self.same(userAgent, other.userAgent) && Self.same(caFile, other.caFile) && Self.same(proxy, other.proxy)
            && proxyEnvironment === other.proxyEnvironment
    }

    /// Both are absent, or hold the same bytes (the bytes libcurl is given).
    private static func same(_ a: String?, _ b: String?) -> Bool {
        switch (a, b) {
        case (nil, nil): true
        case (let a?, let b?): a.isExactly(b)
        default: false
        }
    }
}

/// The options of `EasyOptions` that every transfer of a run shares, in a
/// box no one changes: a change makes a new box.
final class FixedOptions: Sendable {
    struct Values: Sendable {
        var bufferSize = 100 << 10
        var protocols = "http,https"
        var redirectProtocols = "http,https"
        var maxRedirects = 10
        var followRedirects = true
        var caFile: String?
        var proxy: String?
        var proxyEnvironment = ProxyEnvironment.current
        var userAgent = "courier"
    }

    let values: Values

    init(_ values: Values) { self.values = values }

    /// libcurl's options as courier asks them by default, shared by every
    /// `EasyOptions` that changes none of them.
    static let standard = FixedOptions(Values())
}

/// What the write callback tells libcurl to do with the bytes it was given.
public enum WriteDecision: Sendable {
    case accept
    case abort
    /// Pauses the transfer (`CURL_WRITEFUNC_PAUSE`): libcurl keeps the bytes
    /// and hands them over again once the transfer is unpaused. A pause
    /// asked before the transfer began does not hold (libcurl resets it
    /// when the transfer starts), so this is how a transfer suspended before
    /// it began stops at its first bytes, and how one over its rate waits.
    case pause
}

/// Receives an easy handle's callbacks, on the thread that drives its multi
/// handle: subclass it. A class rather than a protocol, so the handle calls
/// it for every piece libcurl hands over without retaining it (see
/// `EasyHandle.delegate`), which a protocol's existential would not allow.
open class EasyHandleDelegate {
    public init() {}

    /// One header line, with its CRLF; a new status line starts a new
    /// response (after a redirect).
    open func easyHandle(_ handle: EasyHandle, didReceiveHeaderLine line: UnsafeRawBufferPointer) {}

    open func easyHandle(_ handle: EasyHandle, didReceive data: UnsafeRawBufferPointer) -> WriteDecision { .accept }
}

/// One libcurl easy handle. Create, use and `cleanup()` it on the thread that
/// owns its multi handle; it is never torn down in `deinit`.
public final class EasyHandle {
    let raw: UnsafeMutableRawPointer
    /// Hears the transfer's callbacks. Not retained: whoever sets it must
    /// outlive the handle's time in its multi handle, and take the handle
    /// out of it (`MultiHandle.recycle`, which clears it, or `remove`)
    /// before going away.
    public var delegate: EasyHandleDelegate? {
        get { delegateReference?.takeUnretainedValue() }
        set { delegateReference = newValue.map { Unmanaged.passUnretained($0) } }
    }
    /// Read for every piece libcurl hands over: neither retained nor
    /// checked for exclusive access there.
    @exclusivity(unchecked) private var delegateReference: Unmanaged<EasyHandleDelegate>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// `headerList` starts with `acceptEncodingField`.
    private var listWritesAcceptEncoding = false
    /// `headerList` starts with `User-Agent` and, unless the transfer names
    /// its own, `Accept: */*` (see `writesUserAgent`).
    private var listWritesUserAgent = false
    /// libcurl holds the user agent (`CURLOPT_USERAGENT`) of the options
    /// last applied.
    private var holdsUserAgent = false
    /// The options the handle holds from its last `configure`, when libcurl
    /// took every one of them: a reused handle's next `configure` sets only
    /// the options that differ.
    private var applied: EasyOptions?
    /// No option was set on the handle since it was made or reset.
    private var isFresh = true
    /// The URL of a transfer whose URL is plain (`PlainURL`), parsed by
    /// libcurl's URL API and handed to libcurl with it (`CURLOPT_CURLU`):
    /// libcurl then neither parses the text again nor writes it out anew
    /// for each transfer. Made with the first such URL and kept for the
    /// handle's life; changed only between its transfers.
    private var parsedURL: OpaquePointer?
    /// The scheme and authority of the URL `parsedURL` holds: a plain URL
    /// with the same ones changes only the path and query there.
    private var parsedOrigin: [UInt8] = []
    /// `parsedURL` holds a query.
    private var parsedHasQuery = false
    /// libcurl holds `parsedURL` as the handle's URL (`CURLOPT_CURLU`).
    private var handsParsedURL = false
    /// The URL libcurl reports as the effective one, known without asking:
    /// the text of a plain URL (`CURLOPT_URL`, which libcurl keeps as it is
    /// beside `parsedURL`) when libcurl follows no redirect.
    private var knownEffectiveURL: String?
    /// The code of the first option libcurl refused since the handle was
    /// made or readied for reuse: such a handle is not performed, and
    /// `MultiHandle.add` reports its transfer ended with this code (the
    /// error buffer says which option).
    private(set) var refusal: CURLcode?

    public init() {
        raw = curl_easy_init()
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        installCallbacks()
    }

    /// Readies the handle for another transfer, keeping what libcurl caches
    /// in it (its buffers, DNS and session entries) and the options it
    /// holds, which the next `configure` changes where they differ. A
    /// handle that refused an option keeps nothing of its options.
    func prepareForReuse() {
        delegate = nil
        errorBuffer[0] = 0
        if refusal != nil { applied = nil }
        refusal = nil
    }

    private func installCallbacks() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        check(courier_easy_setopt_ptr(raw, CURLOPT_PRIVATE, me), CURLOPT_PRIVATE)
        check(courier_easy_setopt_ptr(raw, CURLOPT_ERRORBUFFER, errorBuffer), CURLOPT_ERRORBUFFER)
        check(courier_easy_setopt_data_callback(raw, CURLOPT_WRITEFUNCTION, EasyHandle.writeCallback), CURLOPT_WRITEFUNCTION)
        check(courier_easy_setopt_ptr(raw, CURLOPT_WRITEDATA, me), CURLOPT_WRITEDATA)
        check(courier_easy_setopt_data_callback(raw, CURLOPT_HEADERFUNCTION, EasyHandle.headerCallback), CURLOPT_HEADERFUNCTION)
        check(courier_easy_setopt_ptr(raw, CURLOPT_HEADERDATA, me), CURLOPT_HEADERDATA)
    }

    static func from(userData: UnsafeMutableRawPointer?) -> EasyHandle {
        Unmanaged<EasyHandle>.fromOpaque(userData!).takeUnretainedValue()
    }

    /// Sets every option of `options`, with courier's safety defaults. An
    /// option libcurl refuses makes the transfer fail when it is added to
    /// its multi handle (`refusal`), rather than run without the option.
    ///
    /// A reused handle that holds options for the same protocols, proxy,
    /// CA file and buffer has only the options that differ set (each
    /// transfer's URL and headers at least), each one back to libcurl's
    /// default where `options` asks for none; any other is reset first.
    /// Without `proxy`, the environment's proxy for the URL's scheme is set
    /// (empty for none), so libcurl does not read the environment itself.
    public func configure(_ options: EasyOptions) {
        // Moved out of `applied` rather than read through it: each read of
        // the stored options for a call copied them, every reference in
        // them retained, and released again after.
        var held: EasyOptions?
        swap(&held, &applied)
        if held?.sharesFixedOptions(with: options) == true {
            configureChanges(from: held, to: options)
        } else {
            if !isFresh {
                curl_easy_reset(raw)
                handsParsedURL = false
                holdsUserAgent = false
                installCallbacks()
            }
            configureFixed(options)
            configureChanges(from: nil, to: options)
        }
        isFresh = false
        applied = refusal == nil ? options : nil
    }

    /// The options every transfer of a run shares, set on a new or reset
    /// handle.
    private func configureFixed(_ options: EasyOptions) {
        setLong(CURLOPT_NOSIGNAL, 1)
        setProtocols(CURLOPT_PROTOCOLS_STR, options.protocols)
        setProtocols(CURLOPT_REDIR_PROTOCOLS_STR, options.redirectProtocols)
        setLong(CURLOPT_FOLLOWLOCATION, options.followRedirects ? 1 : 0)
        setLong(CURLOPT_MAXREDIRS, options.maxRedirects)
        // A preference, not a need: a libcurl built without HTTP/2 refuses
        // it and speaks HTTP/1.1, as it would have anyway.
        _ = courier_easy_setopt_long(raw, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        // Refused on a handle that still holds the receive buffer of a
        // transfer that ended early (after a failed name lookup, in libcurl
        // 7.88): that buffer was made at the size every transfer asks for.
        _ = courier_easy_setopt_long(raw, CURLOPT_BUFFERSIZE, options.bufferSize)
        if let caFile = options.caFile {
            // CAINFO replaces libcurl's CA bundle. The system's hashed
            // directory, set beside it, keeps the system's CAs trusted: the
            // file adds CAs rather than replacing them.
            setString(CURLOPT_CAINFO, caFile)
            if let directory = Self.systemCertificateDirectory { setString(CURLOPT_CAPATH, directory) }
        }
        if let proxy = options.proxy {
            setString(CURLOPT_PROXY, proxy)
            setString(CURLOPT_NOPROXY, "")
        }
    }

    /// Sets `bytes`, NUL-terminated, as a string option.
    private func setBytes(_ option: CURLoption, _ bytes: [CChar]) {
        check(bytes.withUnsafeBufferPointer { courier_easy_setopt_ptr(raw, option, $0.baseAddress) }, option)
    }

    /// Sets the options of a transfer of its own that differ from those
    /// the handle holds (`old`; nil for libcurl's defaults), and its URL
    /// and headers.
    private func configureChanges(from old: EasyOptions?, to options: EasyOptions) {
        setString(CURLOPT_URL, options.url)
        let parsed = options.url.utf8.withContiguousStorageIfAvailable { parse($0) } ?? false
        if parsed || handsParsedURL {
            check(courier_easy_setopt_ptr(raw, CURLOPT_CURLU, parsed ? UnsafeRawPointer(parsedURL) : nil), CURLOPT_CURLU)
            handsParsedURL = parsed
        }
        knownEffectiveURL = parsed && !options.followRedirects ? options.url : nil
        if options.acceptsEncodings != (old?.acceptsEncodings ?? false) {
            // An empty string asks for every coding libcurl decodes; none
            // asks for none and decodes none.
            if options.acceptsEncodings {
                setString(CURLOPT_ACCEPT_ENCODING, "")
            } else {
                check(courier_easy_setopt_ptr(raw, CURLOPT_ACCEPT_ENCODING, nil), CURLOPT_ACCEPT_ENCODING)
            }
        }
        // Waiting to multiplex pays only where HTTP/2 can be negotiated (TLS);
        // on plain HTTP it would queue a transfer behind a busy HTTP/1.1
        // connection instead of opening another.
        let isHTTPS = options.isHTTPS
        let wasHTTPS = old?.isHTTPS
        if isHTTPS != (wasHTTPS ?? false) { setLong(CURLOPT_PIPEWAIT, isHTTPS ? 1 : 0) }
        // Given even when empty: libcurl reads the environment for every
        // request where either option is not set. `old`, if any, had the
        // same environment.
        var direct = false
        if options.proxy == nil {
            let environment = options.proxyEnvironment
            let proxy = environment.setting(https: isHTTPS)
            let previous = wasHTTPS.map { environment.setting(https: $0) }
            if proxy.proxy != previous?.proxy { setBytes(CURLOPT_PROXY, proxy.proxy) }
            if proxy.noProxy != previous?.noProxy { setBytes(CURLOPT_NOPROXY, proxy.noProxy) }
            direct = proxy.proxy.count <= 1
        }
        // 0 is libcurl's default for each: no limit, or (for the connect
        // timeout) its own.
        if options.timeoutMilliseconds != old?.timeoutMilliseconds {
            setLong(CURLOPT_TIMEOUT_MS, options.timeoutMilliseconds ?? 0)
        }
        if options.connectTimeoutMilliseconds != old?.connectTimeoutMilliseconds {
            setLong(CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeoutMilliseconds ?? 0)
        }
        let lowSpeed = options.lowSpeedCheck
        if lowSpeed != (old?.lowSpeedCheck ?? (0, 0)) {
            setLong(CURLOPT_LOW_SPEED_LIMIT, lowSpeed.limit)
            setLong(CURLOPT_LOW_SPEED_TIME, lowSpeed.time)
        }
        if options.maxFileSize != old?.maxFileSize {
            let limit = curl_off_t(options.maxFileSize ?? 0)
            check(courier_easy_setopt_off(raw, CURLOPT_MAXFILESIZE_LARGE, limit), CURLOPT_MAXFILESIZE_LARGE)
        }
        let writesAcceptEncoding =
            direct && !options.followRedirects && options.acceptsEncodings && !options.headers.contains { Self.isAcceptEncoding($0.name) }
        // A transfer straight to its origin at a plain URL (which names no
        // user, so no `Authorization` field comes before them) has the handle
        // write libcurl's `User-Agent` and `Accept` fields first among its
        // own, where libcurl would have written them, so the request is the
        // same, byte for byte; libcurl, finding them there, writes neither,
        // and no longer formats the user agent into a field of its own for
        // every transfer (`Curl_pretransfer`, some 3K instructions in
        // libcurl 7.88's printf).
        let writesUserAgent =
            direct && !options.followRedirects && parsed && !options.userAgent.isEmpty
            && !options.headers.contains { Self.isUserAgent($0.name) }
        if writesUserAgent, holdsUserAgent {
            check(courier_easy_setopt_ptr(raw, CURLOPT_USERAGENT, nil), CURLOPT_USERAGENT)
            holdsUserAgent = false
        } else if !writesUserAgent, !holdsUserAgent {
            setString(CURLOPT_USERAGENT, options.userAgent)
            holdsUserAgent = true
        }
        // The list the handle holds is kept when it would be made again of
        // the same lines: most transfers of a run send the same (none of
        // their own, often).
        if let old, writesAcceptEncoding == listWritesAcceptEncoding, writesUserAgent == listWritesUserAgent,
            Self.same(old.headers, options.headers)
        {
            return
        }
        var list: UnsafeMutablePointer<curl_slist>?
        if writesUserAgent {
            list = curl_slist_append(list, "User-Agent: " + options.userAgent)
            if !options.headers.contains(where: { Self.isAccept($0.name) }) { list = curl_slist_append(list, "Accept: */*") }
        }
        if writesAcceptEncoding {
            list = Self.acceptEncodingField.withUnsafeBufferPointer { curl_slist_append(list, $0.baseAddress!) }
        }
        for header in options.headers {
            let line = Array(header.name.utf8) + Array(": ".utf8) + header.value + [0]
            list = line.withUnsafeBytes { curl_slist_append(list, $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
        }
        if list != nil || headerList != nil {
            check(courier_easy_setopt_ptr(raw, CURLOPT_HTTPHEADER, list), CURLOPT_HTTPHEADER)
            curl_slist_free_all(headerList)
            headerList = list
        }
        listWritesAcceptEncoding = writesAcceptEncoding
        listWritesUserAgent = writesUserAgent
    }

    /// Puts `url` in `parsedURL` when it is plain (`PlainURL`), parsed
    /// with the flags libcurl parses `CURLOPT_URL` with: only its path and
    /// query, when the URL there has the same scheme and authority and
    /// neither part holds an escape. False when the URL is not plain, or
    /// libcurl's URL API does not take it (the transfer then goes by the
    /// text alone, and fails as libcurl fails it).
    private func parse(_ url: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = url.baseAddress else { return false }
        // A URL that starts with the origin `parsedURL` holds, which was
        // found plain, and goes on with a path has its path and query
        // checked alone.
        let sameOrigin =
            parsedURL != nil && !parsedOrigin.isEmpty && url.count > parsedOrigin.count
            && url[parsedOrigin.count] == UInt8(ascii: "/")
            && parsedOrigin.withUnsafeBufferPointer { memcmp($0.baseAddress!, base, $0.count) == 0 }
        guard let plain = sameOrigin ? PlainURL(url, pathStart: parsedOrigin.count) : PlainURL(url) else { return false }
        let origin = UnsafeBufferPointer(rebasing: url[..<plain.pathStart])
        if sameOrigin, !plain.hasPercent {
            let pathEnd = plain.queryMark ?? url.count
            var parts = CURLUE_OK
            withCString(base + plain.pathStart, count: pathEnd - plain.pathStart) { parts = curl_url_set(parsedURL, CURLUPART_PATH, $0, 0) }
            if let mark = plain.queryMark {
                if parts == CURLUE_OK {
                    withCString(base + mark + 1, count: url.count - mark - 1) { parts = curl_url_set(parsedURL, CURLUPART_QUERY, $0, 0) }
                }
            } else if parsedHasQuery, parts == CURLUE_OK {
                parts = curl_url_set(parsedURL, CURLUPART_QUERY, nil, 0)
            }
            if parts == CURLUE_OK {
                parsedHasQuery = plain.queryMark != nil
                return true
            }
        }
        if parsedURL == nil { parsedURL = curl_url() }
        guard let parsedURL else { return false }
        var code = CURLUE_OK
        withCString(base, count: url.count) {
            code = curl_url_set(parsedURL, CURLUPART_URL, $0, UInt32(CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME))
        }
        guard code == CURLUE_OK else {
            parsedOrigin = []
            return false
        }
        parsedOrigin = Array(origin)
        parsedHasQuery = plain.queryMark != nil
        return true
    }

    /// Runs `body` with the `count` bytes at `start`, NUL-terminated.
    private func withCString(_ start: UnsafePointer<UInt8>, count: Int, _ body: (UnsafePointer<CChar>) -> Void) {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: count + 1) { buffer in
            UnsafeMutableRawPointer(buffer.baseAddress!).copyMemory(from: start, byteCount: count)
            buffer[count] = 0
            body(buffer.baseAddress!)
        }
    }

    /// The `Accept-Encoding` field libcurl writes itself for an empty
    /// `CURLOPT_ACCEPT_ENCODING` (`Curl_all_content_encodings`): every
    /// content coding it decodes, in its order, or `identity` when it
    /// decodes none.
    ///
    /// A transfer that goes to its origin directly (through no proxy, and
    /// with no redirect libcurl follows to a URL that may take one) and
    /// names no such field of its own has the handle write this one first
    /// among the request's own headers, which libcurl writes right where it
    /// would have written its own field, so the request is the same, byte
    /// for byte; libcurl, finding the field among them, still decodes the
    /// codings the option asks for, and no longer formats the field once
    /// into a string of its own and again into the request (some 100
    /// instructions a byte in libcurl 7.88's printf). Through a proxy the
    /// request may carry a `Proxy-Connection` field after libcurl's own,
    /// so libcurl writes it there.
    static let acceptEncodingField: [CChar] = {
        let features = courier_version_info().pointee.features
        var codings: [String] = []
        if features & CURL_VERSION_LIBZ != 0 { codings += ["deflate", "gzip"] }
        if features & CURL_VERSION_BROTLI != 0 { codings.append("br") }
        if features & CURL_VERSION_ZSTD != 0 { codings.append("zstd") }
        return Array(("Accept-Encoding: " + (codings.isEmpty ? "identity" : codings.joined(separator: ", "))).utf8CString)
    }()

    /// `name` is `Accept-Encoding` in any case, as libcurl compares names.
    private static func isAcceptEncoding(_ name: String) -> Bool { matches(name, "accept-encoding") }

    /// `name` is `User-Agent` in any case.
    private static func isUserAgent(_ name: String) -> Bool { matches(name, "user-agent") }

    /// `name` is `Accept` in any case.
    private static func isAccept(_ name: String) -> Bool { matches(name, "accept") }

    /// `name` is `lowered` once its ASCII letters are lowered.
    private static func matches(_ name: String, _ lowered: String) -> Bool {
        let expected = lowered.utf8
        guard name.utf8.count == expected.count else { return false }
        return zip(name.utf8, expected).allSatisfy { byte, lower in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == lower : byte == lower
        }
    }

    /// The same header fields, names and values byte for byte, in order.
    private static func same(_ a: [(name: String, value: [UInt8])], _ b: [(name: String, value: [UInt8])]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.name.isExactly($1.name) && $0.value == $1.value }
    }

    /// Sets a comma-separated list of schemes. libcurl refuses the whole
    /// list for one scheme it does not know, having allowed the schemes
    /// before it and no other (none, when the unknown one comes first):
    /// such schemes are left out, as no URL of theirs could be fetched.
    private func setProtocols(_ option: CURLoption, _ schemes: String) {
        var code = store(schemes, in: option)
        if code == CURLE_UNSUPPORTED_PROTOCOL {
            let known = Set(CurlLibrary.current.protocols)
            code = store(schemes.split(separator: ",").filter { known.contains($0.lowercased()) }.joined(separator: ","), in: option)
        }
        check(code, option)
    }

    /// The system's directory of CA certificates named by their hashes, as
    /// OpenSSL finds it: `$SSL_CERT_DIR` (a colon-separated list), else
    /// `/etc/ssl/certs`; nil when it holds no hash link (`1a2b3c4d.0`).
    public static let systemCertificateDirectory: String? = {
        let fromEnvironment = getenv("SSL_CERT_DIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        let candidate = fromEnvironment ?? "/etc/ssl/certs"
        let hashed = candidate.split(separator: ":").contains { holdsHashLinks(String($0)) }
        return hashed ? candidate : nil
    }()

    private static func holdsHashLinks(_ directory: String) -> Bool {
        guard let stream = opendir(directory) else { return false }
        defer { closedir(stream) }
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(while: { $0 != 0 })) }
            // Eight hex digits, a dot, a digit or more.
            guard name.count >= 10, name[8] == UInt8(ascii: "."),
                name[..<8].allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }),
                name[9...].allSatisfy({ (0x30...0x39).contains($0) })
            else { continue }
            return true
        }
        return false
    }

    private func setLong(_ option: CURLoption, _ value: Int) {
        check(courier_easy_setopt_long(raw, option, value), option)
    }

    private func setString(_ option: CURLoption, _ value: String) {
        check(store(value, in: option), option)
    }

    /// Sets a string option; libcurl keeps a copy of every string option
    /// courier sets.
    private func store(_ value: String, in option: CURLoption) -> CURLcode {
        value.withCString { courier_easy_setopt_ptr(raw, option, $0) }
    }

    /// Keeps the first refusal, and leaves in the error buffer which option
    /// was refused and why, as the transfer's error message.
    private func check(_ code: CURLcode, _ option: CURLoption) {
        guard code != CURLE_OK, refusal == nil else { return }
        refusal = code
        let name = curl_easy_option_by_id(option).map { "CURLOPT_" + String(cString: $0.pointee.name) } ?? "option \(option.rawValue)"
        let text = "libcurl refused \(name): \(String(cString: curl_easy_strerror(code)))"
        let bytes = Array(text.utf8.prefix(Int(CURL_ERROR_SIZE) - 1))
        bytes.withUnsafeBufferPointer { buffer in
            UnsafeMutableRawPointer(errorBuffer).copyMemory(from: buffer.baseAddress!, byteCount: buffer.count)
        }
        errorBuffer[bytes.count] = 0
    }

    /// The URL the transfer ended at (`CURLINFO_EFFECTIVE_URL`); nil when
    /// its bytes are not UTF-8 (never the case for a URL courier set, which
    /// is a String or escaped by `CurlURL.redirectTarget`). For a plain URL
    /// that libcurl follows no redirect from, the text set, which is what
    /// libcurl would report, without asking it and checking its bytes.
    public var effectiveURL: String? {
        knownEffectiveURL ?? reportedEffectiveURL
    }

    /// `CURLINFO_EFFECTIVE_URL` as libcurl reports it.
    var reportedEffectiveURL: String? {
        var pointer: UnsafePointer<CChar>?
        guard courier_easy_getinfo_string(raw, CURLINFO_EFFECTIVE_URL, &pointer) == CURLE_OK, let pointer else { return nil }
        return String(validatingCString: pointer)
    }

    /// The bytes of the absolute URL a redirect response's `Location` names
    /// (`CURLINFO_REDIRECT_URL`), when libcurl did not follow it: the
    /// origin's bytes, which need not be UTF-8 (`CurlURL.redirectTarget`
    /// makes the URL libcurl itself would follow of them).
    public var redirectURL: [UInt8]? { info(CURLINFO_REDIRECT_URL) }

    /// A string `CURLINFO`, as the bytes libcurl holds.
    private func info(_ info: CURLINFO) -> [UInt8]? {
        var pointer: UnsafePointer<CChar>?
        guard courier_easy_getinfo_string(raw, info, &pointer) == CURLE_OK, let pointer else { return nil }
        return Array(UnsafeRawBufferPointer(start: pointer, count: strlen(pointer)))
    }

    /// The text libcurl left in the error buffer, or its generic text for
    /// `code`.
    public func errorMessage(code: Int32) -> String {
        let text = String(cString: errorBuffer)
        return text.isEmpty ? String(cString: curl_easy_strerror(CURLcode(UInt32(code)))) : text
    }

    public func pause() { curl_easy_pause(raw, courier_pause_all()) }
    /// Unpausing hands over, before it returns, the bytes held since a
    /// write callback paused the transfer.
    public func unpause() { curl_easy_pause(raw, courier_pause_cont()) }

    /// Frees the handle. The caller must have removed it from its multi
    /// handle first.
    public func cleanup() {
        curl_easy_cleanup(raw)
        curl_slist_free_all(headerList)
        headerList = nil
        curl_url_cleanup(parsedURL)
        parsedURL = nil
        errorBuffer.deallocate()
    }

    // The handle (`userData`) and its delegate are reached without being
    // retained: libcurl calls back only while the handle is in its multi
    // handle, where both live (see `delegate`).

    private static let writeCallback: courier_data_callback = { buffer, size, count, userData in
        let length = size * count
        return Unmanaged<EasyHandle>.fromOpaque(userData!)._withUnsafeGuaranteedRef { handle in
            guard let delegate = handle.delegateReference else { return 0 }
            let data = UnsafeRawBufferPointer(start: buffer, count: length)
            switch delegate._withUnsafeGuaranteedRef({ $0.easyHandle(handle, didReceive: data) }) {
            case .accept: return length
            case .abort: return 0
            case .pause: return courier_writefunc_pause()
            }
        }
    }

    private static let headerCallback: courier_data_callback = { buffer, size, count, userData in
        let length = size * count
        Unmanaged<EasyHandle>.fromOpaque(userData!)._withUnsafeGuaranteedRef { handle in
            let line = UnsafeRawBufferPointer(start: buffer, count: length)
            handle.delegateReference?._withUnsafeGuaranteedRef { $0.easyHandle(handle, didReceiveHeaderLine: line) }
        }
        return length
    }
}

@available(*, unavailable) extension EasyHandle: Sendable {}
