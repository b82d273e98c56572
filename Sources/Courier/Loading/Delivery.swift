import Curl
import Foundation
import Logging

/// Turns a response and its body into each receipt's outcome: checks the
/// response against what each receipt accepts, decodes text, reads image
/// sizes, and places the body at each destination. Runs without the
/// downloader's lock; it owns the body file it is given and removes it.
struct Delivery {
    let response: ResponseHead
    let size: Int64
    let body: BodyFile
    let source: OutcomeSource
    let downloadsDirectory: String
    /// `--download-root`, which every destination lies inside.
    let downloadRoot: String?
    let logger: Logger
    /// For a stored body: a name that stays the same while the stored
    /// response does, so repeated hits share one `path` file.
    var sharedName: String? = nil

    /// The outcomes of a transfer that failed.
    static func failures(of result: TransferResult, for receipts: [Receipt]) -> [Outcome] {
        let failure = result.failure ?? TransferFailure(code: .network, message: "no response")
        return receipts.map { receipt in
            var outcome = result.response.map { Outcome(url: receipt.request.url, response: $0) }
                ?? Outcome(url: receipt.request.url)
            outcome.error = failure
            return outcome
        }
    }

    func deliver(to receipts: [Receipt]) -> [Outcome] {
        defer { body.discard() }
        let image = ImageInfo.sniff(body.prefix(ImageInfo.sniffLength))
        var outcomes: [Outcome] = []
        var fileConsumers = receipts.indices.filter {
            receipts[$0].request.destination != nil || receipts[$0].request.body == .none
        }

        for (index, receipt) in receipts.enumerated() {
            let request = receipt.request
            var outcome = Outcome(url: request.url, response: response)
            outcome.size = size
            outcome.source = source
            if let failure = Downloader.check(request, response: response, size: size) {
                outcome.error = failure
                fileConsumers.removeAll { $0 == index }
                outcomes.append(outcome)
                continue
            }
            outcome.image = image
            switch request.body {
            case .text:
                let charset = request.textEncoding ?? TextDecoding.charset(ofContentType: response.contentType)
                outcome.text = TextDecoding.decode(body.bytes, charset: charset)
            case .base64:
                outcome.base64 = Data(body.bytes).base64EncodedString()
            case .none:
                break
            }
            let isLastConsumer = fileConsumers.last == index
            do {
                if let destination = request.destination {
                    let source = try body.file(in: downloadsDirectory)
                    do throws(Destination.Failure) {
                        try Destination(destination, root: downloadRoot).place(from: source, move: isLastConsumer)
                    } catch {
                        outcome.error = error.transferFailure
                        outcomes.append(outcome)
                        continue
                    }
                    outcome.path = destination
                } else if request.body == .none {
                    let name = Self.fileName(for: response.finalURL ?? request.url)
                    let path = "\(downloadsDirectory)/\(sharedName ?? receipt.id)-\(name)"
                    if sharedName == nil || Self.fileSize(path) != size {
                        try place(body.file(in: downloadsDirectory), at: path, move: isLastConsumer, link: true)
                    }
                    outcome.path = path
                }
            } catch {
                outcome.error = TransferFailure(code: .io, message: "\(error)")
                outcome.path = nil
            }
            outcomes.append(outcome)
        }
        return outcomes
    }

    /// Puts the body at `path` in courier's own downloads directory: by
    /// rename when this is its last use, else by a hard link or a copy
    /// renamed into place, so the file never holds a partial body.
    private func place(_ source: String, at path: String, move: Bool, link: Bool = false) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if move, rename(source, path) == 0 { return }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if move, rename(source, path) == 0 { return }
        if link {
            unlink(path)
            if Foundation.link(source, path) == 0 { return }
        }
        let partial = "\(directory)/.\((path as NSString).lastPathComponent).courier-\(getpid()).partial"
        unlink(partial)
        do {
            try FileManager.default.copyItem(atPath: source, toPath: partial)
            guard rename(partial, path) == 0 else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
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

    /// A safe file name from a URL's last path component.
    static func fileName(for url: String) -> String {
        let last = CurlURL(url)?.path.split(separator: "/").last.map(String.init) ?? ""
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

    /// A file courier owns; `firstBytes`, when known, spare reading it to
    /// recognise an image.
    init(path: String, firstBytes: [UInt8]? = nil, bytes: [UInt8]? = nil) {
        self.path = path
        self.prefixBytes = firstBytes
        self.loaded = bytes
    }

    init(bytes: [UInt8]) { self.loaded = bytes }

    var bytes: [UInt8] {
        if let loaded { return loaded }
        let data = path.flatMap { FileManager.default.contents(atPath: $0) }.map { [UInt8]($0) } ?? []
        loaded = data
        return data
    }

    func prefix(_ count: Int) -> [UInt8] {
        if let prefixBytes { return Array(prefixBytes.prefix(count)) }
        return Array(bytes.prefix(count))
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
