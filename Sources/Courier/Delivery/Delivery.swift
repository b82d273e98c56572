import Curl
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging

/// Turns a response and its body into each receipt's outcome: checks the
/// response against what each receipt accepts, decodes text, reads image
/// sizes, and places the body at each destination. Runs on the delivery
/// queue (or, for a cache hit, the caller's thread), never under the
/// scheduler's lock; it owns the body file it is given and removes it.
struct Delivery {
    let response: ResponseHead
    let size: Int64
    let body: BodyFile
    let source: OutcomeSource
    let downloadsDirectory: String
    /// `--download-root`, which every destination lies inside.
    let downloadRoot: String?
    /// Where partial files beside destinations are noted.
    let leftovers: Leftovers?
    /// `--max-memory-body`: the limit of receipts asking for `text` or `base64`.
    let memoryBodyLimit: Int64
    let logger: Logger
    /// For a stored body: a name that stays the same while the stored
    /// response does, so repeated hits share one `path` file.
    var sharedName: String? = nil
    /// The body's file name, when the caller knows it already.
    var fileName: String? = nil
    /// The response's `headerObject`, when the caller knows it already.
    var headerObject: [String: String]? = nil

    /// The outcomes of a transfer that failed.
    static func failures(of result: TransferResult, for requests: [DownloadRequest]) -> [Outcome] {
        let failure = result.failure ?? TransferFailure(code: .network, message: "no response")
        return requests.map { request in
            var outcome = result.response.map { Outcome(url: request.url, response: $0) }
                ?? Outcome(url: request.url)
            outcome.error = failure
            return outcome
        }
    }

    /// Each receipt's outcome in its own kind. Receipts of one transfer may
    /// ask for different things (a file, text, base64, several
    /// destinations): bodies held in memory are read before any file is
    /// moved away, and only the last receipt that needs the file may move it.
    func deliver(to receipts: [(id: String, request: DownloadRequest)]) -> [Outcome] {
        defer { body.discard() }
        let failures = receipts.map {
            $0.request.refusal(of: response, size: size, memoryBodyLimit: memoryBodyLimit)
        }
        let accepted = receipts.indices.filter { failures[$0] == nil }
        let fileConsumers = accepted.filter {
            receipts[$0].request.destination != nil || receipts[$0].request.body == .none
        }
        let bytes = accepted.contains { receipts[$0].request.body != .none } ? body.bytes : nil
        let image = ImageInfo.sniff(body.prefix(ImageInfo.sniffLength))
        var outcomes: [Outcome] = []
        // Made once and shared, so coalesced receipts asking for the same
        // text or base64 hold one copy between them; nil: too large as JSON.
        var texts: [(charset: String?, text: String?)] = []
        var base64: String?

        for (index, receipt) in receipts.enumerated() {
            let request = receipt.request
            var outcome = Outcome(url: request.url, response: response, headers: headerObject)
            outcome.size = size
            outcome.source = source
            if let failure = failures[index] {
                outcome.error = failure
                outcomes.append(outcome)
                continue
            }
            outcome.image = image
            if request.body != .none, bytes?.count != Int(size) {
                outcome.error = TransferFailure(code: .io, message: "cannot read the body back: \(body.readError ?? "short read")")
                outcomes.append(outcome)
                continue
            }
            switch request.body {
            case .text:
                let charset = request.textCharset(contentType: response.contentType)
                let text: String?
                if let made = texts.first(where: { $0.charset == charset }) {
                    text = made.text
                } else {
                    text = TextDecoding.decode(bytes ?? [], charset: charset, jsonLimit: memoryBodyLimit)
                    texts.append((charset, text))
                }
                guard let text else {
                    outcome.error = DownloadRequest.tooLargeAsJSON(.text, limit: memoryBodyLimit)
                    outcomes.append(outcome)
                    continue
                }
                outcome.text = text
            case .base64:
                base64 = base64 ?? Data(bytes ?? []).base64EncodedString()
                outcome.base64 = base64
            case .none:
                break
            }
            let isLastConsumer = fileConsumers.last == index
            do {
                if let destination = request.destination {
                    if isLastConsumer, body.moveBeside(to: destination, root: downloadRoot) {
                        outcome.path = destination
                        outcomes.append(outcome)
                        continue
                    }
                    let source = try body.file(in: downloadsDirectory)
                    do throws(Destination.Failure) {
                        try Destination(destination, root: downloadRoot)
                            .place(from: source, move: isLastConsumer, recordingPartial: leftovers?.record(partial:))
                    } catch {
                        outcome.error = error.transferFailure
                        (outcome.text, outcome.base64) = (nil, nil)
                        outcomes.append(outcome)
                        continue
                    }
                    outcome.path = destination
                } else if request.body == .none {
                    let name = fileName ?? Self.fileName(for: response.finalURL ?? request.url)
                    let path = "\(downloadsDirectory)/\(sharedName ?? receipt.id)-\(name)"
                    if sharedName == nil || Self.fileSize(path) != size {
                        try place(body.file(in: downloadsDirectory), at: path, move: isLastConsumer, link: true)
                    }
                    outcome.path = path
                }
            } catch {
                outcome.error = TransferFailure(code: .io, message: "\(error)")
                (outcome.path, outcome.text, outcome.base64) = (nil, nil, nil)
            }
            outcomes.append(outcome)
        }
        return outcomes
    }

    /// Puts the body at `path` in courier's own downloads directory: by
    /// rename when this is its last use, else by a hard link or a copy
    /// renamed into place, so the file never holds a partial body.
    private func place(_ source: String, at path: String, move: Bool, link: Bool = false) throws {
        let directory = PathName.directory(of: path)
        if move, rename(source, path) == 0 { return }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if move, rename(source, path) == 0 { return }
        if link {
            unlink(path)
            if Glibc.link(source, path) == 0 { return }
        }
        let partial = "\(directory)/.\(PathName.lastComponent(of: path)).courier-\(getpid()).partial"
        unlink(partial)
        do {
            try FileManager.default.copyItem(atPath: source, toPath: partial)
            guard rename(partial, path) == 0 else {
                throw CocoaError(.fileWriteUnknown)
            }
        } catch {
            unlink(partial)
            throw PlacementError(path: path, reason: String(cString: strerror(errno)))
        }
    }

    struct PlacementError: Error, CustomStringConvertible {
        var path: String
        var reason: String
        var description: String { "cannot write \(path): \(reason)" }
    }

    private static func fileSize(_ path: String) -> Int64? {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : nil
    }

    /// A safe file name from a URL's last path component: its letters,
    /// digits, `.`, `_` and `-`, every other character as `_`, at most 80
    /// characters, and `body` when that leaves nothing but dots.
    static func fileName(for url: String) -> String {
        let path = CurlURL(url)?.path ?? ""
        // In ASCII without CR (which pairs with LF into one character), a
        // byte is a character: the usual path, done on bytes.
        guard path.utf8.allSatisfy({ $0 < 0x80 && $0 != UInt8(ascii: "\r") }) else { return unicodeFileName(path) }
        let slash = UInt8(ascii: "/")
        let bytes = Array(path.utf8)
        var end = bytes.endIndex
        while end > 0, bytes[end - 1] == slash { end -= 1 }
        var start = end
        while start > 0, bytes[start - 1] != slash { start -= 1 }
        var safe: [UInt8] = []
        safe.reserveCapacity(min(end - start, 80))
        for byte in bytes[start..<min(end, start + 80)] {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                safe.append(byte)
            default:
                safe.append(UInt8(ascii: "_"))
            }
        }
        return safe.allSatisfy({ $0 == UInt8(ascii: ".") }) ? "body" : String(decoding: safe, as: UTF8.self)
    }

    private static func unicodeFileName(_ path: String) -> String {
        let last = path.split(separator: "/").last.map(String.init) ?? ""
        let safe = String(last.map { $0.isLetter || $0.isNumber || "._-".contains($0) ? $0 : "_" }.prefix(80))
        return safe.isEmpty || safe.allSatisfy({ $0 == "." }) ? "body" : safe
    }
}

/// A body on disk, in memory, or both: read from disk at most once, written
/// to disk at most once.
final class BodyFile {
    private var path: String?
    private var loaded: [UInt8]?
    private var prefixBytes: [UInt8]?
    /// The body's file, when it streamed beside a destination.
    private var beside: BodyTarget?

    /// A file courier owns; `firstBytes`, when known, spare reading it to
    /// recognise an image. `beside`: the file was made beside a destination,
    /// in a directory opened when the transfer started.
    init(path: String, firstBytes: [UInt8]? = nil, bytes: [UInt8]? = nil, beside: BodyTarget? = nil) {
        self.path = path
        self.prefixBytes = firstBytes
        self.loaded = bytes
        self.beside = beside
    }

    /// Renames the file over `destination` within the directory it streamed
    /// into, when it streamed beside that very destination (the same bytes):
    /// no walk of the path again. Under a download root, a symbolic link
    /// planted at the destination since is still refused, by the walk
    /// `Destination.place` makes, so this declines.
    func moveBeside(to destination: String, root: String?) -> Bool {
        guard let beside, let target = beside.destination, target.path.isExactly(destination), path != nil else { return false }
        if root != nil {
            var info = stat()
            if fstatat(beside.directory.fd, target.name, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFLNK {
                return false
            }
        }
        guard renameat(beside.directory.fd, beside.name, beside.directory.fd, target.name) == 0 else { return false }
        path = nil
        self.beside = nil
        return true
    }

    init(bytes: [UInt8]) { self.loaded = bytes }

    /// Why the body could not be read, when it could not.
    private(set) var readError: String?

    /// The whole body, read from its file at most once; nil when the file
    /// cannot be read.
    var bytes: [UInt8]? {
        if let loaded { return loaded }
        guard let path, readError == nil else { return nil }
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            readError = "cannot open \(path): \(Destination.errorText())"
            return nil
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, let read = CacheFileIO.read(fd, count: Int(info.st_size), at: 0) else {
            readError = "cannot read \(path): \(Destination.errorText())"
            return nil
        }
        loaded = read
        return read
    }

    func prefix(_ count: Int) -> [UInt8] {
        if let prefixBytes { return Array(prefixBytes.prefix(count)) }
        return Array((bytes ?? []).prefix(count))
    }

    /// The body as a file, written into `directory` if it was only in memory.
    func file(in directory: String) throws -> String {
        if let path { return path }
        let written = "\(directory)/.body-\(UInt64.random(in: 0...UInt64.max)).part"
        let fd = open(written, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Delivery.PlacementError(path: written, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        path = written
        let complete = (loaded ?? []).withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let count = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }
        guard complete else { throw Delivery.PlacementError(path: written, reason: String(cString: strerror(errno))) }
        return written
    }

    /// Removes the file, if one is left.
    func discard() {
        if let path { unlink(path) }
    }
}
