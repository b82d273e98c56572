import CFuzzDriver
import Foundation
import JSONRPC

/// A libFuzzer harness: the first byte picks the framing mode, the message limit
/// and where the stream is cut; the rest is the byte stream.
///
/// Properties: the stream yields the same events whether it arrives in one
/// chunk, byte by byte, or in uneven chunks (the sizes `tooLarge` reports
/// may differ: they count what was seen before giving up); and the messages
/// found, framed again with Content-Length, read back as exactly themselves.
@main
enum FuzzFramer {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
            guard let data else { return 0 }
            return fuzzFramer(data, size)
        })
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFramer(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let control = Int(data[0])
    let stream = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let mode = FramingMode.allCases[control % FramingMode.allCases.count]
    let limit = control & 0x80 != 0 ? 48 : 16 << 20

    let whole = events(stream, mode: mode, limit: limit, chunkSizes: [max(stream.count, 1)])
    let bytewise = events(stream, mode: mode, limit: limit, chunkSizes: [1])
    let uneven = events(stream, mode: mode, limit: limit, chunkSizes: [1 + (control >> 2) % 7, 13, 2, 64, 3])
    check(whole, bytewise, "one chunk", "byte by byte", stream, mode, limit)
    check(whole, uneven, "one chunk", "uneven chunks", stream, mode, limit)

    let messages = whole.compactMap { event -> [UInt8]? in
        if case .message(let bytes) = event { return bytes }
        return nil
    }
    let reframed = messages.flatMap { Framing.lsp.frame($0) }
    let reread = events(reframed, mode: .auto, limit: 16 << 20, chunkSizes: [5, 1, 300])
    let expected = messages.map(FramerEvent.message)
    if reread != expected {
        fatalError("reframed messages read back as \(reread), expected \(expected); stream \(stream)")
    }
    return 0
}

private func events(_ stream: [UInt8], mode: FramingMode, limit: Int, chunkSizes: [Int]) -> [FramerEvent] {
    var framer = MessageFramer(mode: mode, maxMessageBytes: limit)
    var result: [FramerEvent] = []
    var offset = 0
    var turn = 0
    while offset < stream.count {
        let end = min(stream.count, offset + chunkSizes[turn % chunkSizes.count])
        framer.push(stream[offset..<end])
        while let event = framer.next() { result.append(event) }
        offset = end
        turn += 1
    }
    result += framer.finish()
    return result
}

/// Events with the sizes of skipped messages left out.
private func normalized(_ events: [FramerEvent]) -> [FramerEvent] {
    events.map { event in
        if case .tooLarge = event { return .tooLarge(0) }
        return event
    }
}

private func check(
    _ lhs: [FramerEvent], _ rhs: [FramerEvent], _ lhsName: String, _ rhsName: String, _ stream: [UInt8],
    _ mode: FramingMode, _ limit: Int
) {
    guard normalized(lhs) != normalized(rhs) else { return }
    fatalError("\(lhsName) gave \(lhs), \(rhsName) gave \(rhs); mode \(mode), limit \(limit), stream \(stream)")
}
