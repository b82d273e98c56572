import Curl
import FoundationEssentials
import JSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Receives a transfer's events on the engine's thread.
protocol TransferObserver: AnyObject, Sendable {
    /// The final response's headers are in (after any redirects); return
    /// false to stop the transfer.
    func transferDidReceiveResponse(_ transfer: Transfer, _ response: ResponseHead) -> Bool
    /// Bytes of the body have arrived: `received` so far (a body larger
    /// than `BodyWriter.directLimit` reaches its file a little later), which
    /// take at least `textLength` bytes as a JSON string read as UTF-8 when
    /// the transfer counts it (`countsText`). Called for the first bytes,
    /// then after each turn of the engine in which some arrived and every
    /// `Transfer.reportStride` bytes within a turn, not per piece libcurl
    /// hands over; return false to stop the transfer.
    func transferDidReceiveData(_ transfer: Transfer, received: Int64, textLength: Int64?, expected: Int64?) -> Bool
    func transferDidComplete(_ transfer: Transfer, _ result: TransferResult)
}

/// The status line and headers of a response.
struct ResponseHead: Sendable {
    var status: Int
    /// In arrival order, names in lower case.
    var headers: [(name: String, value: String)]
    var finalURL: String?
    /// The protocol version of the status line: "1.0", "1.1", "2" or "3".
    var httpVersion: String?

    func header(_ name: String) -> String? {
        headers.last(where: { $0.name == name })?.value
    }

    var contentType: String? { header("content-type") }

    /// The body's size as announced, when it is the size of what courier will
    /// receive (not of an encoded form).
    var announcedLength: Int64? {
        guard header("content-encoding").map({ $0.lowercased() == "identity" }) ?? true else { return nil }
        guard let value = header("content-length")?.trimmingBlanks, !value.isEmpty,
            value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
        else { return nil }
        return Int64(value)
    }

    /// Repeated headers joined with ", ", as HTTP allows.
    var headerObject: [String: String] { Self.joined(headers) }

    static func joined(_ headers: [(name: String, value: String)]) -> [String: String] {
        var object: [String: String] = [:]
        for (name, value) in headers {
            if let existing = object[name] {
                object[name] = existing + ", " + value
            } else {
                object[name] = value
            }
        }
        return object
    }
}

/// How a transfer ended.
struct TransferResult: Sendable {
    var response: ResponseHead?
    var size: Int64
    /// The file holding the body, when the transfer succeeded.
    var bodyPath: String?
    /// Where that file is, when the transfer succeeded.
    var body: BodyTarget? = nil
    /// The body's first bytes (up to `ImageInfo.sniffLength`), kept while
    /// they streamed by so nobody reads the file again to recognise an image.
    var head: [UInt8] = []
    /// XXH3-64 of the `size` bytes written to the body file, taken as they
    /// were written, so the cache stores the body without reading it back.
    var checksum = XXH3.empty
    /// The whole body, when it stayed within the transfer's copy limit.
    var bytes: [UInt8]? = nil
    /// The redirect responses followed on the way, oldest first.
    var redirects: [ResponseHead] = []
    var failure: TransferFailure?
}

/// Why a transfer failed.
struct TransferFailure: Error, Sendable {
    var code: OutcomeErrorCode
    var message: String
    var curlCode: Int32?
}

/// Where a transfer's body streams: a file created exclusively (never
/// through a symlink, never over an existing file) in a directory opened
/// beforehand.
struct BodyTarget: Sendable {
    let directory: DirectoryHandle
    let name: String
    /// 0600 for files in courier's own directories; 0666 (less the umask)
    /// for one that becomes the client's destination.
    let mode: mode_t
    /// Set when the body streams beside a destination: that destination as
    /// the client gave it, and its name in `directory`.
    var destination: (path: String, name: String)? = nil

    var path: String { directory.path + "/" + name }

    func create() throws(Destination.Failure) -> Int32 { try directory.createFile(name, mode: mode) }

    func remove() { directory.remove(name) }
}

/// What a redirect may do: at most `limit` hops, to http or https only,
/// from https down to http only when `allowsInsecure`.
struct RedirectPolicy: Sendable {
    static let schemes: Set<String> = ["http", "https"]
    static let statuses: Set<Int> = [301, 302, 303, 307, 308]

    var limit = 10
    var allowsInsecure = false

    /// Why the hop from `current` to `target` may not be taken, if it may not.
    func refusal(from current: CurlURL?, to target: CurlURL, hop: Int) -> TransferFailure? {
        if hop > limit {
            return TransferFailure(
                code: .tooManyRedirects, message: "Maximum (\(limit)) redirects followed",
                curlCode: Int32(CurlFailure.tooManyRedirectsCode))
        }
        if !Self.schemes.contains(target.scheme) {
            return TransferFailure(code: .schemeNotAllowed, message: "a redirect to a \(target.scheme) URL is not allowed")
        }
        if current?.scheme == "https", target.scheme == "http", !allowsInsecure {
            return TransferFailure(code: .insecureRedirect, message: "a redirect from https down to http is not allowed")
        }
        return nil
    }

    /// The request headers of the next hop: credential headers stay behind
    /// when the target is another origin (scheme, host or port).
    static func headers(
        _ headers: [(name: String, value: String)], from current: CurlURL?, to target: CurlURL
    ) -> [(name: String, value: String)] {
        guard current?.origin != target.origin else { return headers }
        return headers.filter { !DownloadRequest.credentialHeaders.contains($0.name.lowercased()) }
    }
}

/// One HTTP transfer: an easy handle, its response, and the temporary file its
/// body streams into. It follows redirects itself, hop by hop, so each hop
/// is checked against `RedirectPolicy` before anything is sent to it.
/// Everything but the immutable configuration is touched only on the
/// engine's thread.
final class Transfer: EasyHandleDelegate, @unchecked Sendable {
    let id: TransferID
    /// When the first request was sent, for the stored response's age.
    let requestDate = Date()
    let options: EasyOptions
    let redirectPolicy: RedirectPolicy
    let body: BodyTarget
    /// The largest body kept in memory as well as in its file.
    let copyLimit: Int
    private let observer: any TransferObserver
    /// What the body takes as a JSON string, read as UTF-8, counted as it
    /// arrives when a receipt asks for it as text.
    private var textLength: JSONStringLength?
    /// Set from any thread when the downloader has let the transfer go; its
    /// body file is then never created again.
    let isAbandoned = Atomic(false)

    private var easy: EasyHandle?
    /// The body file, while this thread writes it.
    private var fd: Int32 = -1
    /// Takes the body's writes once it is known to pass
    /// `BodyWriter.directLimit`; then `stream` is the file's, and `pending`
    /// the piece being filled.
    private var writer: BodyWriter?
    private var stream: BodyWriter.Stream?
    private var pending: [UInt8] = []
    private var head = ResponseHead(status: 0, headers: [])
    private var announced = false
    private var received: Int64 = 0
    /// Bytes have arrived since the observer last heard of them.
    private var unreported = false
    /// `received` when the observer last heard of it.
    private var reported: Int64 = 0
    /// Within one turn the observer still hears of the first bytes at once
    /// and then of every this many: its byte limits stop a transfer at
    /// most this far past them, whatever one read of libcurl brings.
    static let reportStride: Int64 = 256 << 10
    private var firstBytes: [UInt8] = []
    /// Of the bytes this thread wrote to the body file; the body writer
    /// goes on from it.
    private let hasher = XXH3()
    /// The bytes written to the body file, until they pass `copyLimit`.
    private var copy: [UInt8]?
    private var stopReason: TransferFailure?
    /// How the transfer ended, while the body writer closes its file.
    private var ending: TransferFailure?
    /// The options of the hop under way.
    private var hopOptions: EasyOptions
    /// The current response is a redirect that will be followed: its body
    /// is skipped.
    private var redirecting = false
    private var redirects: [ResponseHead] = []
    private var deadline = Double.infinity
    /// Suspended by the client: a redirect's next hop starts paused too.
    private var paused = false

    init(
        id: TransferID, options: EasyOptions, redirectPolicy: RedirectPolicy = RedirectPolicy(), body: BodyTarget,
        copyLimit: Int = 0, countsText: Bool = false, observer: any TransferObserver
    ) {
        self.id = id
        self.options = options
        self.redirectPolicy = redirectPolicy
        self.body = body
        self.copyLimit = copyLimit
        self.textLength = countsText ? JSONStringLength() : nil
        self.observer = observer
        hopOptions = options
        hopOptions.followRedirects = false
    }

    func begin(on multi: MultiHandle, writer: BodyWriter? = nil) {
        self.writer = writer
        if let timeout = options.timeoutMilliseconds { deadline = MonotonicClock.now() + Double(timeout) / 1000 }
        start(hopOptions, on: multi)
    }

    private func start(_ options: EasyOptions, on multi: MultiHandle) {
        let easy = multi.makeEasyHandle()
        easy.delegate = self
        easy.configure(options)
        self.easy = easy
        multi.add(easy)
        if paused { easy.pause() }
    }

    /// Takes the redirect the current response names, if it is allowed:
    /// true when the next hop has started.
    private func followRedirect(on multi: MultiHandle) throws(TransferFailure) -> Bool {
        guard let location = easy?.redirectURL.flatMap(CurlURL.redirectTarget), let target = CurlURL(location) else {
            return false
        }
        let current = CurlURL(hopOptions.url)
        if let refusal = redirectPolicy.refusal(from: current, to: target, hop: redirects.count + 1) { throw refusal }
        var next = hopOptions
        next.url = location
        next.headers = RedirectPolicy.headers(hopOptions.headers, from: current, to: target)
        if options.timeoutMilliseconds != nil {
            let remaining = Int(((deadline - MonotonicClock.now()) * 1000).rounded(.up))
            guard remaining > 0 else {
                throw TransferFailure(code: .timeout, message: "Operation timed out after \(options.timeoutMilliseconds!) milliseconds")
            }
            next.timeoutMilliseconds = remaining
        }
        redirects.append(head)
        if let easy { multi.recycle(easy) }
        easy = nil
        hopOptions = next
        head = ResponseHead(status: 0, headers: [])
        redirecting = false
        start(next, on: multi)
        return true
    }

    func pause() {
        paused = true
        easy?.pause()
    }

    func resume() {
        paused = false
        easy?.unpause()
    }

    /// Stops the transfer without reporting it, and removes its file.
    func abandon(on multi: MultiHandle) {
        release(on: multi)
        if let stream, let writer {
            writer.close(stream) { _, _ in }
            self.stream = nil
            pending = []
        }
        body.remove()
    }

    /// How `complete` left the transfer.
    enum Completion {
        /// The next hop of a redirect has started.
        case redirected
        /// The observer has heard how it ended.
        case ended
        /// The body writer may still have bytes of it to write: close the
        /// stream through the writer, then call
        /// `finish(writeFailure:checksum:)` with what it reports.
        case flushing(BodyWriter.Stream)
    }

    /// Tells the observer of the bytes that arrived since it last heard;
    /// the engine calls it after each turn of libcurl, so a burst of
    /// 16 KiB pieces from one read costs one report. When the observer says
    /// stop, the next piece aborts the transfer, or its completion fails.
    func reportData() {
        guard unreported else { return }
        unreported = false
        reported = received
        if !observer.transferDidReceiveData(
            self, received: received, textLength: textLength?.completeCount, expected: head.announcedLength)
        {
            stopReason = stopReason ?? TransferFailure(code: .cancelled, message: "stopped")
        }
    }

    /// The transfer's easy handle has finished: reports the outcome, or
    /// starts the next hop of a redirect, or hands the outcome's last step
    /// to the body writer.
    func complete(code: Int32, on multi: MultiHandle) -> Completion {
        reportData()
        if redirecting, code == 0, stopReason == nil {
            do throws(TransferFailure) {
                if try followRedirect(on: multi) { return .redirected }
            } catch {
                stopReason = error
            }
        }
        var failure = stopReason
        if failure == nil, code != 0 {
            var kind = CurlFailure(code: code)
            // An http(s) URL was allowed before it was sent, and redirects are
            // checked hop by hop: curl's "unsupported protocol" then means a
            // response it could not read as HTTP.
            if kind == .schemeNotAllowed, RedirectPolicy.schemes.contains(CurlURL(hopOptions.url)?.scheme ?? "") {
                kind = .network
            }
            let message = easy?.errorMessage(code: code) ?? "transfer failed"
            failure = TransferFailure(code: OutcomeErrorCode(kind), message: message, curlCode: code)
        } else if failure != nil, code != 0 {
            failure?.curlCode = code
        }
        if failure == nil, fd < 0, stream == nil {
            do throws(Destination.Failure) {
                fd = try body.create()
                if copyLimit > 0 { copy = [] }
            } catch {
                failure = error.transferFailure
            }
        }
        if head.finalURL == nil { head.finalURL = easy?.effectiveURL }
        if !announced, failure == nil {
            announced = true
            if !observer.transferDidReceiveResponse(self, head) {
                failure = stopReason ?? TransferFailure(code: .cancelled, message: "stopped")
            }
        }
        release(on: multi)
        if let stream, let writer {
            if failure == nil { writer.write(pending, to: stream) }
            pending = []
            self.stream = nil
            ending = failure
            return .flushing(stream)
        }
        finish(failure, checksum: hasher.finalize())
        return .ended
    }

    /// The body writer has written and closed the body file: reports the
    /// outcome `complete` found, or the writer's failure.
    func finish(writeFailure: TransferFailure?, checksum: UInt64) {
        finish(ending ?? writeFailure, checksum: checksum)
    }

    private func finish(_ failure: TransferFailure?, checksum: UInt64) {
        if failure != nil { body.remove() }
        let result = TransferResult(
            response: head.status == 0 && failure != nil ? nil : head, size: received,
            bodyPath: failure == nil ? body.path : nil, body: failure == nil ? body : nil, head: firstBytes,
            checksum: checksum, bytes: failure == nil ? copy : nil, redirects: redirects, failure: failure)
        copy = nil
        observer.transferDidComplete(self, result)
    }

    /// From here on the body writer writes the body file, when there is one.
    private func handOverFile() {
        guard let writer else { return }
        stream = BodyWriter.Stream(fd: fd, path: body.path, hashed: hasher)
        fd = -1
        pending = writer.buffer()
    }

    /// Ends the transfer at the next callback with `failure` as its reason.
    private func stop(_ failure: TransferFailure) -> WriteDecision {
        stopReason = stopReason ?? failure
        return .abort
    }

    private func release(on multi: MultiHandle) {
        if let easy {
            multi.recycle(easy)
            self.easy = nil
        }
        if fd >= 0 {
            close(fd)
            fd = -1
        }
    }

    // MARK: - EasyHandleDelegate

    func easyHandle(_ handle: EasyHandle, didReceiveHeaderLine line: UnsafeRawBufferPointer) {
        let bytes = line.bindMemory(to: UInt8.self)
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D { end -= 1 }
        let text = UnsafeBufferPointer(rebasing: bytes[..<end])
        if text.isEmpty {
            redirecting = RedirectPolicy.statuses.contains(head.status) && head.header("location") != nil
            return
        }
        if text.starts(with: "HTTP/".utf8) {
            let fields = text.split(separator: 0x20, maxSplits: 2)
            // The three digits curl reads, whatever follows them.
            let digits = fields.count > 1 ? Array(fields[1].prefix(3)) : []
            let status = digits.count == 3 && digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
                ? digits.reduce(0) { $0 * 10 + Int($1 - 0x30) } : 0
            let version = String(decoding: fields[0].dropFirst(5), as: UTF8.self)
            head = ResponseHead(status: status, headers: [], httpVersion: version)
            return
        }
        if let first = text.first, first == 0x20 || first == 0x09, !head.headers.isEmpty {
            head.headers[head.headers.count - 1].value += " " + String(decoding: Self.trimmingBlanks(text[...]), as: UTF8.self)
            return
        }
        guard let colon = text.firstIndex(of: UInt8(ascii: ":")) else { return }
        let nameBytes = Self.trimmingBlanks(text[..<colon])
        guard !nameBytes.isEmpty, nameBytes.allSatisfy(HTTPField.isTokenByte) else { return }
        let name = String(decoding: nameBytes.map(Self.lowercased), as: UTF8.self)
        let value = String(decoding: Self.trimmingBlanks(text[(colon + 1)...]), as: UTF8.self)
        head.headers.append((name, value))
    }

    private static func trimmingBlanks(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Slice<UnsafeBufferPointer<UInt8>> {
        var slice = bytes
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
        return slice
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    func easyHandle(_ handle: EasyHandle, didReceive data: UnsafeRawBufferPointer) -> WriteDecision {
        if redirecting { return .accept }
        if stopReason != nil { return .abort }
        if !announced {
            announced = true
            head.finalURL = handle.effectiveURL
            guard observer.transferDidReceiveResponse(self, head) else {
                return stop(TransferFailure(code: .cancelled, message: "stopped"))
            }
            guard !isAbandoned.load(ordering: .acquiring) else {
                return stop(TransferFailure(code: .cancelled, message: "stopped"))
            }
            do throws(Destination.Failure) {
                fd = try body.create()
            } catch {
                return stop(error.transferFailure)
            }
            let announcedLength = head.announcedLength ?? 0
            if copyLimit > 0, announcedLength <= Int64(copyLimit) {
                copy = []
                copy?.reserveCapacity(Int(announcedLength))
            }
            if announcedLength > BodyWriter.directLimit { handOverFile() }
        }
        if stream == nil, received + Int64(data.count) > BodyWriter.directLimit { handOverFile() }
        if let stream, let writer {
            if let failure = stream.failure { return stop(failure) }
            if pending.count + data.count > pending.capacity {
                writer.write(pending, to: stream)
                pending = writer.buffer()
            }
            if data.count > pending.capacity {
                writer.write(Array(data), to: stream)
            } else {
                pending.append(contentsOf: data)
            }
        } else if let failure = BodyWriter.writeAll(data, to: fd, path: body.path) {
            return stop(failure)
        }
        received += Int64(data.count)
        textLength?.add(data)
        if stream == nil { hasher.update(data) }
        if copy != nil {
            if received <= Int64(copyLimit) {
                copy?.append(contentsOf: data)
            } else {
                copy = nil
            }
        }
        if firstBytes.count < ImageInfo.sniffLength {
            firstBytes.append(contentsOf: data.prefix(ImageInfo.sniffLength - firstBytes.count))
        }
        if let limit = options.maxFileSize, received > limit {
            return stop(TransferFailure(code: .tooLarge, message: "the body exceeds \(limit) bytes"))
        }
        unreported = true
        if reported == 0 || received - reported >= Self.reportStride {
            reportData()
            if stopReason != nil { return .abort }
        }
        return .accept
    }
}
