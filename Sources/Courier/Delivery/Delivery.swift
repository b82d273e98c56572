import Curl
import FoundationEssentials
import JSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging

/// Turns a response and its body into each receipt's outcome: checks the
/// response against what each receipt accepts, decodes text, reads image
/// sizes, and places the body at each destination. Runs on the delivery
/// queue (`TransferDelivery`); on the engine's thread only for a hit that
/// makes and reads no file (`TransferDelivery.serveAtOnce`). It owns the
/// body file it is given and removes it.
struct Delivery {
    let response: ResponseHead
    let size: Int64
    let body: BodyFile
    let source: OutcomeSource
    /// `<cache dir>/downloads/<pid>`, where `path` files are kept.
    let downloads: DirectoryHandle
    /// `--download-root`, which every destination lies inside.
    let downloadRoot: String?
    /// Where partial files beside destinations are noted.
    let leftovers: Leftovers?
    /// `--max-memory-body`: the limit of receipts asking for `text` or `base64`.
    let memoryBodyLimit: Int64
    let logger: Logger
    /// For a stored body: the `path` file's name, the same while the stored
    /// response is, so repeated hits share one file.
    var sharedFileName: String? = nil
    /// Set when the caller has found the `path` file `sharedFileName`
    /// names kept already (`isKept`): it is not looked at again.
    var sharedFileIsKept = false
    /// The response's `headerObject`, when the caller knows it already.
    var headerObject: [String: String]? = nil
    /// `headerObject` as text the outcomes share, when the caller has one.
    var sharedHeaders: SharedJSON? = nil
    /// The byte the transfer went on from, when it continued a kept body.
    var resumedFrom: Int64? = nil

    /// The outcomes of a transfer that failed: how far its body got
    /// (`size`, the bytes received, those of a continued kept body
    /// included) and where it went on from.
    static func failures(of result: TransferResult, for requests: [DownloadRequest]) -> [Outcome] {
        let failure = result.failure ?? TransferFailure(code: .network, message: "no response")
        return requests.map { request in
            var fields = result.response.map { Outcome.Fields(url: request.url, response: $0) }
                ?? Outcome.Fields(url: request.url)
            fields.error = failure
            fields.size = result.size
            fields.resumedFrom = result.resumedFrom
            return Outcome(fields)
        }
    }

    /// Each receipt's outcome in its own kind. Receipts of one transfer may
    /// ask for different things (a file, text, base64, several
    /// destinations): bodies held in memory are read before any file is
    /// moved away, and only the last receipt that needs the file may move it.
    /// A receipt the response suits whose entry in `failing` is a failure
    /// (its `integrity_mismatch`) ends with it and gets no body.
    func deliver(to receipts: [(id: ReceiptID, request: DownloadRequest)], failing: [TransferFailure?] = []) -> [Outcome] {
        defer { body.discard() }
        var failures: [TransferFailure?] = []
        failures.reserveCapacity(receipts.count)
        // The last accepted receipt that needs the file, and whether one
        // needs the bytes.
        var lastFileConsumer: Int?
        var needsBytes = false
        for (index, receipt) in receipts.enumerated() {
            let request = receipt.request
            let failure =
                request.refusal(of: response, size: size, memoryBodyLimit: memoryBodyLimit)
                ?? (index < failing.count ? failing[index] : nil)
            failures.append(failure)
            guard failure == nil else { continue }
            if request.destination != nil || request.body == .none { lastFileConsumer = index }
            if request.body != .none { needsBytes = true }
        }
        let bytes = needsBytes ? body.bytes : nil
        let image = ImageInfo.sniff(body.prefix(ImageInfo.sniffLength))
        let headers = headerObject ?? response.headerObject
        var outcomes: [Outcome] = []
        outcomes.reserveCapacity(receipts.count)
        // Made once and shared, so coalesced receipts asking for the same
        // text or base64 hold one copy between them; nil: too large as JSON.
        var texts: [(charset: String?, text: String?)] = []
        var base64: String?

        for (index, receipt) in receipts.enumerated() {
            let request = receipt.request
            var outcome = Outcome.Fields(url: request.url, response: response, headers: headers)
            outcome.sharedHeaders = sharedHeaders
            outcome.size = size
            outcome.source = source
            outcome.resumedFrom = resumedFrom
            if let failure = failures[index] {
                outcome.error = failure
                outcomes.append(Outcome(outcome))
                continue
            }
            outcome.image = image
            if request.body != .none, bytes?.count != Int(size) {
                outcome.error = TransferFailure(code: .io, message: "cannot read the body back: \(body.readError ?? "short read")")
                outcomes.append(Outcome(outcome))
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
                    outcomes.append(Outcome(outcome))
                    continue
                }
                outcome.text = text
            case .base64:
                base64 = base64 ?? Data(bytes ?? []).base64EncodedString()
                outcome.base64 = base64
            case .none:
                break
            }
            let isLastConsumer = lastFileConsumer == index
            do {
                if let destination = request.destination {
                    if isLastConsumer, body.moveBeside(to: destination, root: downloadRoot) {
                        outcome.path = destination
                        outcomes.append(Outcome(outcome))
                        continue
                    }
                    let source = try body.file(in: downloads)
                    do throws(Destination.Failure) {
                        try Destination(destination, root: downloadRoot).place(
                            from: source.directory.path(of: source.name), move: isLastConsumer,
                            recordingPartial: leftovers.map { leftovers in { leftovers.record(partial: $1, in: $0) } })
                    } catch {
                        outcome.error = error.transferFailure
                        (outcome.text, outcome.base64) = (nil, nil)
                        outcomes.append(Outcome(outcome))
                        continue
                    }
                    outcome.path = destination
                } else if request.body == .none {
                    let name = sharedFileName ?? "\(receipt.id)-\(Self.fileName(for: response.finalURL ?? request.url))"
                    if sharedFileName == nil || !(sharedFileIsKept || isKept(name)) {
                        try place(body.file(in: downloads), as: name, move: isLastConsumer)
                    }
                    outcome.path = downloads.path(of: name)
                }
            } catch {
                outcome.error = TransferFailure(code: .io, message: "\(error)")
                (outcome.path, outcome.text, outcome.base64) = (nil, nil, nil)
            }
            outcomes.append(Outcome(outcome))
        }
        return outcomes
    }

    /// Puts the body at `name` in courier's own downloads directory, all
    /// relative to the directories' descriptors: by rename when this is its
    /// last use, else by a hard link, else by a copy in bounded chunks
    /// renamed into place, so the file never holds a partial body.
    private func place(_ source: (directory: DirectoryHandle, name: String), as name: String, move: Bool) throws {
        if move, renameat(source.directory.fd, source.name, downloads.fd, name) == 0 { return }
        downloads.remove(name)
        if linkat(source.directory.fd, source.name, downloads.fd, name, 0) == 0 { return }
        let partial = ".\(name).courier-\(getpid()).partial"
        downloads.remove(partial)
        func failure() -> PlacementError {
            let error = PlacementError(path: downloads.path(of: name), reason: Destination.errorText())
            downloads.remove(partial)
            return error
        }
        guard let (input, info) = source.directory.openFile(source.name) else { throw failure() }
        defer { close(input) }
        guard let output = try? downloads.createFile(partial, mode: 0o600) else { throw failure() }
        let copied = CacheFileIO.copy(from: input, offset: 0, length: Int64(info.st_size), to: output) != nil
        guard close(output) == 0, copied, renameat(downloads.fd, partial, downloads.fd, name) == 0 else { throw failure() }
    }

    struct PlacementError: Error, CustomStringConvertible {
        var path: String
        var reason: String
        var description: String { "cannot write \(path): \(reason)" }
    }

    /// Whether `name` in the downloads directory is a regular file of the
    /// body's size already (a `path` file an earlier hit of the same stored
    /// response made).
    func isKept(_ name: String) -> Bool {
        guard let info = downloads.status(of: name) else { return false }
        return info.st_mode & S_IFMT == S_IFREG && Int64(info.st_size) == size
    }

    /// A safe file name from a URL's last path component: its letters,
    /// digits, `.`, `_` and `-`, every other character as `_`, at most 80
    /// characters, and `body` when that leaves nothing but dots.
    static func fileName(for url: String) -> String {
        let path = plainPath(of: url) ?? Substring(CurlURL(url)?.path ?? "")
        // In ASCII without CR (which pairs with LF into one character), a
        // byte is a character: the usual path, done on bytes.
        guard path.utf8.allSatisfy({ $0 < 0x80 && $0 != UInt8(ascii: "\r") }) else { return unicodeFileName(String(path)) }
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

    /// The path of an `http` or `https` URL that libcurl's parse would
    /// give as it is written, read from the text: printable ASCII without
    /// `\`, `%`, `@` or a dot segment, the scheme in lower case, a host
    /// named. Nil for any other URL, which is left to libcurl. Most URLs
    /// are plain, and libcurl's parse, which copies out every part of the
    /// URL, is most of what a name costs.
    private static func plainPath(of url: String) -> Substring? {
        let http = "http://".utf8, https = "https://".utf8
        let bytes = url.utf8
        let schemeLength =
            bytes.starts(with: http) ? http.count : bytes.starts(with: https) ? https.count : nil
        guard let schemeLength,
            bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") && $0 != UInt8(ascii: "%") })
        else { return nil }
        let rest = bytes.dropFirst(schemeLength)
        let isPathEnd = { (byte: UInt8) in byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") }
        let pathStart = rest.firstIndex { $0 == UInt8(ascii: "/") || isPathEnd($0) } ?? rest.endIndex
        guard pathStart > rest.startIndex, !rest[..<pathStart].contains(UInt8(ascii: "@")) else { return nil }
        let pathEnd = rest[pathStart...].firstIndex(where: isPathEnd) ?? rest.endIndex
        let path = Substring(url.utf8[pathStart..<pathEnd])
        var previous = UInt8(ascii: "/")
        for byte in path.utf8 {
            if previous == UInt8(ascii: "/"), byte == UInt8(ascii: ".") { return nil }
            previous = byte
        }
        return path
    }

    private static func unicodeFileName(_ path: String) -> String {
        let last = path.split(separator: "/").last.map(String.init) ?? ""
        let safe = String(last.map { $0.isLetter || $0.isNumber || "._-".contains($0) ? $0 : "_" }.prefix(80))
        return safe.isEmpty || safe.allSatisfy({ $0 == "." }) ? "body" : safe
    }
}

/// A body on disk, in memory, or both: read from disk at most once, written
/// to disk at most once. A body the disk tier kept in its file is never read
/// whole unless a receipt needs the bytes: a receipt that needs a file gets
/// it linked or copied in bounded chunks.
final class BodyFile {
    /// The body's file, when it has one: where the transfer wrote it (in
    /// `tmp/` or beside a destination), or where it was put for a receipt.
    private var file: (directory: DirectoryHandle, name: String)?
    private var loaded: [UInt8]?
    private var prefixBytes: [UInt8]?
    /// The body's file, when it streamed beside a destination.
    private var beside: BodyTarget?
    /// The disk tier's body file, when the body is a stored one left there.
    private var stored: StoredBodyFile?
    /// The file made ahead beside the destination, once the body held in
    /// memory is written to it (`unnamedFile`) and until it is named there.
    private var unnamed: StoresBehind.OpenFile?
    /// The body's length, as the transfer or the stored entry gave it.
    private let length: Int64

    /// The file a transfer wrote, `length` bytes; `firstBytes`, when known,
    /// spare reading it to recognise an image. When the transfer streamed
    /// beside a destination, `target.destination` says which. A body the
    /// transfer held in memory alone (`written` false) is `bytes`, written
    /// at `target` when it is placed beside its destination.
    init(target: BodyTarget, length: Int64, firstBytes: [UInt8]? = nil, bytes: [UInt8]? = nil, written: Bool = true) {
        self.file = written ? (target.directory, target.name) : nil
        self.length = length
        self.prefixBytes = firstBytes
        self.loaded = bytes
        self.beside = target.destination != nil ? target : nil
    }

    /// A cache hit's body.
    init(_ body: CachedBody) {
        length = body.length
        switch body {
        case .bytes(let bytes): loaded = bytes
        case .file(let file): stored = file
        }
    }

    /// Renames the file over `destination` in the destination's directory
    /// opened when the body began to stream, when it streamed for that very
    /// destination (the same bytes), beside it or in the partial store on
    /// its file system: no walk of the path again. A file from the partial
    /// store (0600, as everything in the cache directory) then gets the
    /// mode a new file of the client's gets. Under a download root, a
    /// symbolic link planted at the destination since is still refused, by
    /// the walk `Destination.place` makes, so this declines.
    func moveBeside(to destination: String, root: String?) -> Bool {
        guard let beside, let target = beside.destination, target.path.isExactly(destination), file != nil || loaded != nil
        else { return false }
        let directory = beside.destinationDirectory ?? beside.directory
        // A link made ahead never replaces what has the name, a symbolic
        // link included: only a rename needs to look first.
        if file == nil, let unnamed = unnamedFile() {
            switch directory.link(unnamed.descriptor, as: target.name) {
            case nil:
                closeUnnamed()
                self.beside = nil
                return true
            case EEXIST?:
                break
            default:
                return false
            }
        }
        if root != nil {
            var info = stat()
            if fstatat(directory.fd, target.name, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFLNK {
                return false
            }
        }
        // Through the descriptor the partial store holds: no name is
        // followed to change a mode.
        if beside.destinationDirectory != nil, let partial = beside.partial { fchmod(partial.fd, Destination.fileMode) }
        if file == nil, let loaded {
            guard write(loaded, as: beside) else { return false }
            file = (beside.directory, beside.name)
        }
        guard renameat(beside.directory.fd, beside.name, directory.fd, target.name) == 0 else { return false }
        file = nil
        self.beside = nil
        return true
    }

    /// The file made ahead beside the destination (`BodyTarget.prepared`),
    /// holding the whole body held in memory alone: written on the first
    /// call, before it has a name, so the disk tier may link the body from
    /// it (`CacheBodyFile.unnamed`) and `moveBeside` names it at the
    /// destination. Nil when no file was made ahead, or it could not be
    /// written (then the body is placed as any other is). Closed once named
    /// or discarded, and once a store made behind the outcome that holds it
    /// too (`StoresBehind`) is made.
    func unnamedFile() -> StoresBehind.OpenFile? {
        if let unnamed { return unnamed }
        // The target's members read where they are: a copy of it retains
        // each it holds.
        guard file == nil, loaded != nil, let prepared = beside?.prepared, let directory = beside?.directory,
            let mode = beside?.mode, let fd = prepared.take(makingIn: directory, mode: mode)
        else { return nil }
        let opened = StoresBehind.OpenFile(owning: fd)
        guard let loaded, CacheFileIO.write(fd, loaded) else { return nil }
        unnamed = opened
        return opened
    }

    private func closeUnnamed() {
        unnamed = nil
    }

    /// Writes `bytes` as the file `target` names (created exclusively,
    /// with the mode a new file of the client's gets): false, with nothing
    /// left there, when it cannot be written whole.
    private func write(_ bytes: [UInt8], as target: BodyTarget) -> Bool {
        guard let fd = try? target.create() else { return false }
        let written = CacheFileIO.write(fd, bytes)
        guard close(fd) == 0, written else {
            target.remove()
            return false
        }
        return true
    }

    /// Why the body could not be read, when it could not.
    private(set) var readError: String?

    /// The whole body, read from its file at most once (and then only when
    /// the file is a regular file of the body's length); nil when it cannot
    /// be read.
    var bytes: [UInt8]? {
        if let loaded { return loaded }
        guard readError == nil else { return nil }
        if let stored {
            loaded = stored.read()
            if loaded == nil { readError = "the stored body no longer matches its length or checksum" }
            return loaded
        }
        guard let file else { return nil }
        guard let (fd, info) = file.directory.openFile(file.name) else {
            readError = "cannot open \(file.directory.path(of: file.name)): \(Destination.errorText())"
            return nil
        }
        defer { close(fd) }
        guard Int64(info.st_size) == length, let read = CacheFileIO.read(fd, count: Int(length), at: 0) else {
            readError = "cannot read \(file.directory.path(of: file.name)): \(Destination.errorText())"
            return nil
        }
        loaded = read
        return read
    }

    /// Up to `count` bytes from the body's start, without reading the rest;
    /// bytes held in memory that fit are shared, not copied.
    func prefix(_ count: Int) -> [UInt8] {
        if let held = prefixBytes ?? loaded { return held.count <= count ? held : Array(held.prefix(count)) }
        if let stored { return stored.prefix(count) }
        guard let file, let (fd, info) = file.directory.openFile(file.name) else { return [] }
        defer { close(fd) }
        return CacheFileIO.read(fd, count: Int(min(Int64(count), Int64(info.st_size))), at: 0) ?? []
    }

    /// The body as a file: its own, else one made in `directory` (from the
    /// bytes in memory, or from the disk tier's file, linked or copied and
    /// checked as `StoredBodyFile.place` does).
    func file(in directory: DirectoryHandle) throws -> (directory: DirectoryHandle, name: String) {
        if let file { return file }
        let name = ".body-\(UInt64.random(in: 0...UInt64.max)).part"
        func failure(_ reason: String) -> Delivery.PlacementError {
            Delivery.PlacementError(path: directory.path(of: name), reason: reason)
        }
        if let stored {
            guard stored.place(in: directory, as: name) else {
                throw failure("the stored body no longer matches its length or checksum")
            }
        } else {
            let fd = try directory.createFile(name, mode: 0o600)
            let written = CacheFileIO.write(fd, loaded ?? [])
            let reason = Destination.errorText()
            close(fd)
            guard written else {
                directory.remove(name)
                throw failure(reason)
            }
        }
        file = (directory, name)
        return (directory, name)
    }

    /// Removes the file, if one is left.
    func discard() {
        closeUnnamed()
        if let file { file.directory.remove(file.name) }
    }
}
