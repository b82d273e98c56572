import Curl
import Foundation
import Synchronization

/// Receives a transfer's events on the engine's thread.
protocol TransferObserver: AnyObject, Sendable {
    /// The final response's headers are in (after any redirects); return
    /// false to stop the transfer.
    func transferDidReceiveResponse(_ transfer: Transfer, _ response: ResponseHead) -> Bool
    /// `received` bytes of body have arrived so far; return false to stop.
    func transferDidReceiveData(_ transfer: Transfer, received: Int64, expected: Int64?) -> Bool
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
        return header("content-length").flatMap { Int64($0.trimmingBlanks) }
    }

    /// Repeated headers joined with ", ", as HTTP allows.
    var headerObject: [String: String] {
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
    /// The body's first bytes (up to `ImageInfo.sniffLength`), kept while
    /// they streamed by so nobody reads the file again to recognise an image.
    var head: [UInt8] = []
    var failure: TransferFailure?
}

/// Why a transfer failed.
struct TransferFailure: Error, Sendable {
    var code: OutcomeErrorCode
    var message: String
    var curlCode: Int32?
}

/// One HTTP transfer: an easy handle, its response, and the temporary file its
/// body streams into. Everything but the immutable configuration is touched
/// only on the engine's thread.
final class Transfer: EasyHandleDelegate, @unchecked Sendable {
    let taskID: String
    let options: EasyOptions
    let bodyPath: String
    private let observer: any TransferObserver
    /// Set from any thread when the downloader has let the transfer go; its
    /// body file is then never created again.
    let isAbandoned = Atomic(false)

    private var easy: EasyHandle?
    private var fd: Int32 = -1
    private var head = ResponseHead(status: 0, headers: [])
    private var announced = false
    private var received: Int64 = 0
    private var firstBytes: [UInt8] = []
    private var stopReason: TransferFailure?

    init(taskID: String, options: EasyOptions, bodyPath: String, observer: any TransferObserver) {
        self.taskID = taskID
        self.options = options
        self.bodyPath = bodyPath
        self.observer = observer
    }

    func begin(on multi: MultiHandle) {
        let easy = multi.makeEasyHandle()
        easy.delegate = self
        easy.configure(options)
        self.easy = easy
        multi.add(easy)
    }

    func pause() { easy?.pause() }
    func resume() { easy?.unpause() }

    /// Stops the transfer without reporting it, and removes its file.
    func abandon(on multi: MultiHandle) {
        release(on: multi)
        unlink(bodyPath)
    }

    func complete(code: Int32, on multi: MultiHandle) {
        var failure = stopReason
        if failure == nil, code != 0 {
            let kind = CurlFailure(code: code)
            let message = easy?.errorMessage(code: code) ?? "transfer failed"
            failure = TransferFailure(code: OutcomeErrorCode(kind), message: message, curlCode: code)
        } else if failure != nil, code != 0 {
            failure?.curlCode = code
        }
        if failure == nil, fd < 0 {
            fd = open(bodyPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            if fd < 0 { failure = TransferFailure(code: .io, message: "cannot create \(bodyPath): \(String(cString: strerror(errno)))") }
        }
        if head.finalURL == nil { head.finalURL = easy?.effectiveURL }
        if !announced, failure == nil {
            announced = true
            if !observer.transferDidReceiveResponse(self, head) {
                failure = stopReason ?? TransferFailure(code: .cancelled, message: "stopped")
            }
        }
        release(on: multi)
        if failure != nil { unlink(bodyPath) }
        let result = TransferResult(
            response: head.status == 0 && failure != nil ? nil : head, size: received,
            bodyPath: failure == nil ? bodyPath : nil, head: firstBytes, failure: failure)
        observer.transferDidComplete(self, result)
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
        if text.starts(with: "HTTP/".utf8) {
            let fields = text.split(separator: 0x20, maxSplits: 2)
            let status = fields.count > 1 ? Int(String(decoding: fields[1], as: UTF8.self)) ?? 0 : 0
            let version = String(decoding: fields[0].dropFirst(5), as: UTF8.self)
            head = ResponseHead(status: status, headers: [], httpVersion: version)
            return
        }
        if let first = text.first, first == 0x20 || first == 0x09, !head.headers.isEmpty {
            head.headers[head.headers.count - 1].value += " " + String(decoding: Self.trimmingBlanks(text[...]), as: UTF8.self)
            return
        }
        guard let colon = text.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = String(decoding: Self.trimmingBlanks(text[..<colon]).map(Self.lowercased), as: UTF8.self)
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
        if !announced {
            announced = true
            head.finalURL = handle.effectiveURL
            guard observer.transferDidReceiveResponse(self, head) else {
                return stop(TransferFailure(code: .cancelled, message: "stopped"))
            }
            guard !isAbandoned.load(ordering: .acquiring) else {
                return stop(TransferFailure(code: .cancelled, message: "stopped"))
            }
            fd = open(bodyPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            if fd < 0 {
                return stop(TransferFailure(code: .io, message: "cannot create \(bodyPath): \(String(cString: strerror(errno)))"))
            }
        }
        var offset = 0
        while offset < data.count {
            let written = write(fd, data.baseAddress! + offset, data.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return stop(TransferFailure(code: .io, message: "cannot write \(bodyPath): \(String(cString: strerror(errno)))"))
            }
            offset += written
        }
        received += Int64(data.count)
        if firstBytes.count < ImageInfo.sniffLength {
            firstBytes.append(contentsOf: data.prefix(ImageInfo.sniffLength - firstBytes.count))
        }
        if let limit = options.maxFileSize, received > limit {
            return stop(TransferFailure(code: .tooLarge, message: "the body exceeds \(limit) bytes"))
        }
        guard observer.transferDidReceiveData(self, received: received, expected: head.announcedLength) else {
            return stop(TransferFailure(code: .cancelled, message: "stopped"))
        }
        return .accept
    }
}
