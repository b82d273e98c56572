import Foundation
import Logging

/// Turns a finished transfer into each receipt's outcome: checks the
/// response against what each receipt accepts, decodes text, reads image
/// sizes, and places the body at each destination. Runs without the
/// downloader's lock; it owns the transfer's body file and removes it.
struct Delivery {
    let result: TransferResult
    let downloadsDirectory: String
    let logger: Logger

    func deliver(to receipts: [Receipt]) -> [Outcome] {
        guard let response = result.response, let bodyPath = result.bodyPath, result.failure == nil else {
            let failure = result.failure ?? TransferFailure(code: .network, message: "no response")
            return receipts.map { receipt in
                var outcome = result.response.map { Outcome(url: receipt.request.url, response: $0) }
                    ?? Outcome(url: receipt.request.url)
                outcome.error = failure
                outcome.size = 0
                return outcome
            }
        }
        defer { unlink(bodyPath) }

        let body = BodyFile(path: bodyPath)
        let image = ImageInfo.sniff(result.head)
        var outcomes: [Outcome] = []
        var fileConsumers = receipts.indices.filter { receipts[$0].request.destination != nil || receipts[$0].request.body == .none }

        for (index, receipt) in receipts.enumerated() {
            let request = receipt.request
            var outcome = Outcome(url: request.url, response: response)
            outcome.size = result.size
            if let failure = Downloader.check(request, response: response, size: result.size) {
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
                    try place(bodyPath, at: destination, move: isLastConsumer)
                    outcome.path = destination
                } else if request.body == .none {
                    let path = "\(downloadsDirectory)/\(receipt.id)-\(Self.fileName(for: response.finalURL ?? request.url))"
                    try place(bodyPath, at: path, move: isLastConsumer, link: true)
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

    /// Puts the body at `path`: by rename when this is its last use, else by
    /// a hard link (files courier owns) or a copy renamed into place, so the
    /// destination never holds a partial body.
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

    /// A safe file name from a URL's last path component.
    static func fileName(for url: String) -> String {
        let last = URLComponents(string: url)?.path.split(separator: "/").last.map(String.init) ?? ""
        let safe = String(last.map { $0.isLetter || $0.isNumber || "._-".contains($0) ? $0 : "_" }.prefix(80))
        return safe.isEmpty || safe.allSatisfy({ $0 == "." }) ? "body" : safe
    }
}

/// A body on disk, read at most once.
final class BodyFile {
    let path: String
    private var loaded: [UInt8]?

    init(path: String) { self.path = path }

    var bytes: [UInt8] {
        if let loaded { return loaded }
        let data = FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? []
        loaded = data
        return data
    }
}
