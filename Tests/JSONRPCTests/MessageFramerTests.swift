import JSONRPC
import Testing

/// Steele, Lea and Flood's SplitMix64: small, fast and seedable.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

private func message(_ text: String) -> FramerEvent { .message(Array(text.utf8)) }

private func lsp(_ body: String) -> String { "Content-Length: \(body.utf8.count)\r\n\r\n\(body)" }

/// Feeds `input` to a new framer in the given chunks, taking events after
/// each push, and optionally calls `finish` at the end.
private func events(
    _ input: [UInt8], chunks sizes: [Int]? = nil, mode: FramingMode = .auto, limit: Int = 1 << 20, finish: Bool = false
) -> (events: [FramerEvent], framing: Framing?) {
    var framer = MessageFramer(mode: mode, maxMessageBytes: limit)
    var found: [FramerEvent] = []
    var offset = 0
    for size in sizes ?? [input.count] where offset < input.count {
        let end = min(input.count, offset + size)
        framer.push(input[offset..<end])
        offset = end
        while let event = framer.next() { found.append(event) }
    }
    if offset < input.count {
        framer.push(input[offset...])
        while let event = framer.next() { found.append(event) }
    }
    if finish { found += framer.finish() }
    return (found, framer.framing)
}

/// Random chunk sizes that add up to at least `total`.
private func randomChunks(total: Int, using generator: inout SplitMix64) -> [Int] {
    var sizes: [Int] = []
    var sum = 0
    while sum < total {
        let size = Int.random(in: 1...max(1, min(64, total / 3 + 1)), using: &generator)
        sizes.append(size)
        sum += size
    }
    return sizes
}

/// The case of an event, without its payload.
private func kind(_ event: FramerEvent) -> String {
    switch event {
    case .message(let bytes): "message(\(String(decoding: bytes, as: UTF8.self)))"
    case .tooLarge: "tooLarge"
    case .malformed: "malformed"
    }
}

@Suite(.timeLimit(.minutes(1)))
struct MessageFramerChunkingTests {
    static let bodies = [#"{"jsonrpc":"2.0","id":1,"method":"a"}"#, "[1,2,3]", #"{"text":"é😀 line"}"#, "{}", #""x""#]

    static let ndjsonStream = bytes(bodies.joined(separator: "\n") + "\n")
    static let lspStream = bytes(bodies.map(lsp).joined())
    static let expected = bodies.map(message)

    @Test func ndjsonWhole() {
        let (found, framing) = events(Self.ndjsonStream)
        #expect(found == Self.expected)
        #expect(framing == .ndjson)
    }

    @Test func lspWhole() {
        let (found, framing) = events(Self.lspStream)
        #expect(found == Self.expected)
        #expect(framing == .lsp)
    }

    @Test(arguments: [Framing.ndjson, .lsp])
    func byteByByte(framing: Framing) {
        let stream = framing == .lsp ? Self.lspStream : Self.ndjsonStream
        let (found, detected) = events(stream, chunks: Array(repeating: 1, count: stream.count))
        #expect(found == Self.expected)
        #expect(detected == framing)
    }

    @Test(arguments: [Framing.ndjson, .lsp])
    func aFramedArrayReadsBackAsOneMessage(framing: Framing) {
        let elements = [Array(#"{"id":1}"#.utf8), Array("2".utf8), Array(#""é""#.utf8)]
        let (found, detected) = events(framing.frame(array: elements) + framing.frame(array: [[UInt8]]()))
        #expect(found == [message(#"[{"id":1},2,"é"]"#), message("[]")])
        #expect(detected == framing)
    }

    @Test(arguments: [Framing.ndjson, .lsp], [UInt64(1), 2, 3, 99, 12345])
    func randomChunkings(framing: Framing, seed: UInt64) {
        // Given a stream cut at random places
        let stream = framing == .lsp ? Self.lspStream : Self.ndjsonStream
        var generator = SplitMix64(seed: seed)
        let sizes = randomChunks(total: stream.count, using: &generator)

        // When it is fed chunk by chunk
        let (found, detected) = events(stream, chunks: sizes)

        // Then the same messages come out as when it is fed whole
        #expect(found == Self.expected, "chunks \(sizes)")
        #expect(detected == framing)
    }

    @Test(arguments: [UInt64(5), 6, 7, 8])
    func mixedEventsAreIndependentOfChunking(seed: UInt64) {
        // Given an LSP stream with valid, oversized and broken messages
        let big = String(repeating: "x", count: 100)
        let stream = bytes(
            lsp("{}") + lsp("[\"\(big)\"]") + "Content-Length: abc\r\n\r\n" + lsp("[1]")
                + "junk line\r\n" + "Content-Type: text/plain\r\n\r\n" + lsp(#"{"a":1}"#))
        let whole = events(stream, limit: 50).events
        #expect(whole.map(kind) == ["message({})", "tooLarge", "malformed", "message([1])", "malformed", "malformed", #"message({"a":1})"#])

        // When fed in random chunks
        var generator = SplitMix64(seed: seed)
        let sizes = randomChunks(total: stream.count, using: &generator)

        // Then the events are the same
        #expect(events(stream, chunks: sizes, limit: 50).events == whole, "chunks \(sizes)")
    }

    @Test(arguments: [UInt64(11), 12, 13])
    func ndjsonWithBlankLinesAndCRLFIsIndependentOfChunking(seed: UInt64) {
        let stream = bytes("\n\r\n  {\"a\":1}\r\n\r\n\n[2]\n \t \n\"three\"\r\n")
        let whole = events(stream).events
        #expect(whole == [message(#"{"a":1}"#), message("[2]"), message(#""three""#)])

        var generator = SplitMix64(seed: seed)
        let sizes = randomChunks(total: stream.count, using: &generator)
        #expect(events(stream, chunks: sizes).events == whole, "chunks \(sizes)")
        #expect(events(stream, chunks: Array(repeating: 1, count: stream.count)).events == whole)
    }

    @Test func pushAcceptsRawBuffers() {
        var framer = MessageFramer()
        let data = bytes("[1]\n[2]\n")
        data.withUnsafeBytes { framer.push($0) }
        #expect(framer.next() == message("[1]"))
        #expect(framer.next() == message("[2]"))
        #expect(framer.next() == nil)
    }

    @Test(arguments: [Framing.ndjson, .lsp], [[1 << 16], [100_000, 7], [3, 1 << 20], [1 << 20]])
    func longMessagesAmongShortOnes(framing: Framing, chunks: [Int]) {
        // Given long messages (each most of what the framer holds when it
        // is whole), short ones around them, and lines ended with CR LF
        let long = (0..<3).map { index in
            "[" + (0..<(40_000 + index * 20_000)).map { "\($0 % 10)" }.joined(separator: ",") + "]"
        }
        let bodies = [#"{"a":1}"#, long[0], long[1], "[2]", long[2], "{}"]
        let stream: [UInt8] = switch framing {
        case .ndjson: bytes(bodies.map { $0 + "\r\n" }.joined())
        case .lsp: bytes(bodies.map(lsp).joined())
        }

        // When it is pushed in chunks of these sizes, over and over
        let (found, _) = events(stream, chunks: Array(repeating: chunks, count: 200).flatMap { $0 })

        // Then every message comes out whole, in order, and nothing else
        #expect(found.count == bodies.count)
        #expect(found == bodies.map(message))
    }

    @Test func manyMessagesThroughOneFramer() {
        // Given far more bytes than the framer keeps before compacting
        var framer = MessageFramer()
        var found = 0
        for index in 0..<20_000 {
            framer.push(bytes(lsp("{\"index\":\(index)}")))
            while let event = framer.next() {
                #expect(event == message("{\"index\":\(index)}"))
                found += 1
            }
        }
        #expect(found == 20_000)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct MessageFramerDetectionTests {
    @Test(arguments: ["Content-Length: 2\r\n\r\n{}", "content-length: 2\r\n\r\n{}", "CONTENT-LENGTH: 2\r\n\r\n{}", "Content-Type: x\r\nContent-Length: 2\r\n\r\n{}"])
    func contentHeadersMeanLSP(text: String) {
        let (found, framing) = events(bytes(text))
        #expect(framing == .lsp)
        #expect(found == [message("{}")])
    }

    @Test(arguments: ["{}\n", "[1]\n", " {}\n", "\n\n{}\n", "\r\n\t{}\n", "42\n"])
    func jsonMeansNdjson(text: String) {
        let (found, framing) = events(bytes(text))
        #expect(framing == .ndjson)
        #expect(found.last == .message(Array(text.utf8.filter { $0 != 0x0A && $0 != 0x0D && $0 != 0x09 && $0 != 0x20 })))
        #expect(found.count == 1)
    }

    @Test func leadingBlankLinesBeforeLSPHeaders() {
        let (found, framing) = events(bytes("\r\n\r\n" + lsp("[]")))
        #expect(framing == .lsp)
        #expect(found == [message("[]")])
    }

    @Test(arguments: ["C", "Cont", "content", "Content", "  Cont", "\r\n co"])
    func partialPrefixWaitsForMore(prefix: String) {
        // Given only the start of "Content-Length"
        var framer = MessageFramer()
        framer.push(bytes(prefix))

        // Then nothing is decided yet
        #expect(framer.next() == nil)
        #expect(framer.framing == nil)

        // When the rest arrives
        let rest = String(lsp("{}").dropFirst(prefix.drop(while: \.isWhitespace).count))
        framer.push(bytes(rest))

        // Then it is LSP
        #expect(framer.next() == message("{}"))
        #expect(framer.framing == .lsp)
    }

    @Test func whitespaceAloneDecidesNothing() {
        var framer = MessageFramer()
        framer.push(bytes(" \r\n\n\t"))
        #expect(framer.next() == nil)
        #expect(framer.framing == nil)
        framer.push(bytes("{}\n"))
        #expect(framer.next() == message("{}"))
        #expect(framer.framing == .ndjson)
    }

    @Test func aPrefixThatTurnsAwayIsNdjson() {
        var framer = MessageFramer()
        framer.push(bytes("Cont"))
        #expect(framer.next() == nil)
        framer.push(bytes("inue\n"))
        #expect(framer.next() == message("Continue"))
        #expect(framer.framing == .ndjson)
    }

    @Test func forcedFramingIsNotDetected() {
        let (ndjson, framing) = events(bytes("Content-Length: 2\n"), mode: .ndjson)
        #expect(framing == .ndjson)
        #expect(ndjson == [message("Content-Length: 2")])

        let (lspEvents, lspFraming) = events(bytes("{}\n" + lsp("[]")), mode: .lsp)
        #expect(lspFraming == .lsp)
        #expect(lspEvents.map(kind) == ["malformed", "message([])"])
    }

    @Test func framingIsNilBeforeAnyBytes() {
        var framer = MessageFramer()
        #expect(framer.framing == nil)
        #expect(framer.next() == nil)
        #expect(MessageFramer(mode: .lsp).framing == .lsp)
        #expect(MessageFramer(mode: .ndjson).framing == .ndjson)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct MessageFramerNdjsonTests {
    @Test func blankLinesAndCRLFAreIgnored() {
        let (found, _) = events(bytes("{}\r\n\r\n\n   \n[1]\r\n"))
        #expect(found == [message("{}"), message("[1]")])
    }

    @Test func aMessageWaitsForItsNewline() {
        var framer = MessageFramer()
        framer.push(bytes(#"{"a":"#))
        #expect(framer.next() == nil)
        framer.push(bytes("1}"))
        #expect(framer.next() == nil)
        framer.push(bytes("\n"))
        #expect(framer.next() == message(#"{"a":1}"#))
        #expect(framer.next() == nil)
    }

    @Test func finishDeliversALastLineWithoutNewline() {
        let (found, _) = events(bytes("[1]\n  [2]"), finish: true)
        #expect(found == [message("[1]"), message("[2]")])
    }

    @Test func finishWithNothingLeftAddsNothing() {
        #expect(events(bytes("[1]\n\n  \n"), finish: true).events == [message("[1]")])
        #expect(events([], finish: true).events == [])
    }

    @Test func finishOnAnUndecidedBareWordIsAMessage() {
        // Given input that ended while it still looked like "Content-"
        let (found, framing) = events(bytes("Cont"), finish: true)

        // Then it is taken as one newline-delimited message
        #expect(framing == .ndjson)
        #expect(found == [message("Cont")])
    }

    @Test func overLimitLineIsSkippedAndTheNextComesOut() {
        // Given a line longer than the limit, in one push
        let long = "[" + String(repeating: "1,", count: 40) + "1]"
        let (found, _) = events(bytes(long + "\n[2]\n"), limit: 20)

        // Then it is reported with its size and the next message still comes out
        #expect(found == [.tooLarge(long.utf8.count), message("[2]")])
    }

    @Test func overLimitLineArrivingSlowlyIsSkipped() {
        // Given a long line that arrives in pieces, with no newline for a while
        let long = bytes("[" + String(repeating: "1,", count: 40) + "1]")
        var framer = MessageFramer(maxMessageBytes: 20)
        var found: [FramerEvent] = []
        for byte in long + bytes("\n[2]\n") {
            framer.push([byte])
            while let event = framer.next() { found.append(event) }
        }

        // Then it is given up on once past the limit, and the next comes out
        #expect(found.count == 2)
        if case .tooLarge(let size)? = found.first {
            #expect(size > 20)
            #expect(size <= long.count)
        } else {
            Issue.record("expected tooLarge, got \(found)")
        }
        #expect(found.last == message("[2]"))
    }

    @Test func lineAtTheLimitIsAccepted() {
        let exact = "[" + String(repeating: "1", count: 18) + "]"
        #expect(events(bytes(exact + "\n"), limit: 20).events == [message(exact)])
        #expect(events(bytes(exact + "1\n"), limit: 20).events == [.tooLarge(21)])
    }

    @Test func finishWithAnOverLimitLastLine() {
        let long = String(repeating: "x", count: 30)
        let (found, _) = events(bytes("[1]\n" + long), limit: 40, finish: true)
        #expect(found == [message("[1]"), message(long)])
        let (tooLong, _) = events(bytes("[1]\n" + long), limit: 20, finish: true)
        #expect(tooLong.first == message("[1]"))
        #expect(tooLong.dropFirst().map(kind) == ["tooLarge"])
    }
}

@Suite(.timeLimit(.minutes(1)))
struct MessageFramerLSPTests {
    @Test func contentTypeHeaderIsAccepted() {
        let text = "Content-Length: 7\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n[1,2,3]"
        #expect(events(bytes(text)).events == [message("[1,2,3]")])
    }

    @Test func headerNamesAreCaseInsensitive() {
        let text = "content-length: 2\r\n\r\n{}" + "CONTENT-LENGTH: 2\r\n\r\n[]" + "CoNtEnT-lEnGtH:3\r\n\r\n[1]"
        #expect(events(bytes(text)).events == [message("{}"), message("[]"), message("[1]")])
    }

    @Test func headersTolerateBareLineFeedsAndSpaces() {
        let text = "Content-Length:   2  \n\n{}" + "Content-Length:\t2\r\n\r\n[]"
        #expect(events(bytes(text)).events == [message("{}"), message("[]")])
    }

    @Test func indentedHeadersAreAccepted() {
        let text = lsp("[0]") + "Content-Type: x\r\n  Content-Length: 2\r\n\r\n{}"
        #expect(events(bytes(text)).events == [message("[0]"), message("{}")])
    }

    @Test func manyMessagesInOnePush() {
        let bodies = (0..<50).map { "{\"id\":\($0)}" }
        let (found, _) = events(bytes(bodies.map(lsp).joined()))
        #expect(found == bodies.map(message))
    }

    @Test func bodiesMayHoldNewlinesAndHeaderLookalikes() {
        let body = "{\n\"a\": \"Content-Length: 99\\r\\n\"\n}"
        #expect(events(bytes(lsp(body) + lsp("[]"))).events == [message(body), message("[]")])
    }

    @Test func bodyLengthCountsBytesNotCharacters() {
        let body = #"{"e":"é😀"}"#
        #expect(body.count != body.utf8.count)
        #expect(events(bytes(lsp(body) + lsp("{}"))).events == [message(body), message("{}")])
    }

    @Test func zeroLengthBodyIsAnEmptyMessage() {
        #expect(events(bytes("Content-Length: 0\r\n\r\n" + lsp("{}"))).events == [.message([]), message("{}")])
    }

    @Test func aBodyWaitsForAllItsBytes() {
        var framer = MessageFramer()
        framer.push(bytes("Content-Length: 10\r\n\r\n[1,2,"))
        #expect(framer.next() == nil)
        framer.push(bytes("3,4]"))
        #expect(framer.next() == nil)
        framer.push(bytes("]"))
        #expect(framer.next() == message("[1,2,3,4]]"))
    }

    @Test func overLimitMessageIsSkippedAndTheNextComesOut() {
        // Given a message longer than the limit, then a valid one
        let big = "[" + String(repeating: "0,", count: 50) + "0]"
        let input = bytes(lsp(big) + lsp("{}"))

        // Then the big one is reported with its declared size, whole or byte by byte
        let expected: [FramerEvent] = [.tooLarge(big.utf8.count), message("{}")]
        #expect(events(input, limit: 64).events == expected)
        #expect(events(input, chunks: Array(repeating: 1, count: input.count), limit: 64).events == expected)
    }

    @Test func overLimitMessageIsSkippedWithoutBufferingIt() {
        var framer = MessageFramer(maxMessageBytes: 10)
        framer.push(bytes("Content-Length: 1000000\r\n\r\n"))
        #expect(framer.next() == .tooLarge(1_000_000))
        for _ in 0..<100 {
            framer.push([UInt8](repeating: UInt8(ascii: "x"), count: 10_000))
            #expect(framer.next() == nil)
        }
        framer.push(bytes(lsp("[]")))
        #expect(framer.next() == message("[]"))
    }

    @Test(arguments: [
        "Content-Type: application/json\r\n\r\n",
        "Content-Length: abc\r\n\r\n",
        "Content-Length: -5\r\n\r\n",
        "Content-Length: 1.5\r\n\r\n",
        "Content-Length: \r\n\r\n",
        "Content-Length: 2\r\nContent-Length: 3\r\n\r\n",
        "this is not a header\r\n",
        "junk\r\n\r\n",
    ])
    func brokenHeadersAreMalformedAndTheNextMessageComesOut(broken: String) {
        // Given a valid message, a broken header block, then a valid message
        let input = bytes(lsp("[0]") + broken + lsp(#"{"ok":true}"#))

        // Then the broken block is reported and the valid message still comes out
        let found = events(input).events
        #expect(found.map(kind) == ["message([0])", "malformed", #"message({"ok":true})"#])

        // And the same, fed byte by byte
        #expect(events(input, chunks: Array(repeating: 1, count: input.count)).events == found)
    }

    @Test(arguments: [
        "Content-Length: abc\r\n\r\n{\"lost\":1}",
        "Content-Type: application/json\r\n\r\n[\"lost\"]",
        "Content-Length: -3\r\n\r\n{\n  \"lost\": true\n}",
        "Content-Length: 9\r\nnot a header\r\n\r\n[\"lost\"]",
    ])
    func aBodyWithoutAUsableLengthDoesNotSwallowLaterMessages(broken: String) {
        // Given a broken block whose body cannot be skipped, then valid messages
        let input = bytes(lsp("[0]") + broken + lsp("[1]") + lsp("[2]"))

        // Then the broken message is reported, and every later message comes out
        let found = events(input).events
        #expect(found.first == message("[0]"))
        #expect(Array(found.suffix(2)) == [message("[1]"), message("[2]")])
        #expect(found.dropFirst().dropLast(2).allSatisfy { kind($0) == "malformed" }, "\(found)")
        #expect(found.count >= 4)

        // And the same, fed byte by byte
        #expect(events(input, chunks: Array(repeating: 1, count: input.count)).events == found)
    }

    @Test func malformedEventsSayWhatWasWrong() {
        let found = events(bytes("Content-Length: abc\r\n\r\nnonsense\r\nContent-Type: x\r\n\r\n")).events
        guard found.count == 3, case .malformed(let first) = found[0], case .malformed(let second) = found[1],
            case .malformed(let third) = found[2]
        else {
            Issue.record("unexpected events \(found)")
            return
        }
        #expect(first.contains("Content-Length"))
        #expect(second.contains("nonsense"))
        #expect(third.contains("Content-Length"))
    }

    @Test func overlongHeaderLineIsMalformed() {
        // Given a header line longer than any header may be
        let line = "X-Long: " + String(repeating: "a", count: MessageFramer.maxHeaderLineBytes + 10)
        let input = bytes(lsp("{}") + line + "\r\n\r\n" + lsp("[]"))
        let expected = ["message({})", "malformed", "message([])"]

        // Then its block is reported, whole or in chunks, and the next message comes out
        #expect(events(input).events.map(kind) == expected)
        #expect(events(input, chunks: Array(repeating: 1000, count: input.count / 1000 + 1)).events.map(kind) == expected)
    }

    @Test func finishInsideABodyIsMalformed() {
        // Given a body that was cut short
        let (found, _) = events(bytes(lsp("{}") + "Content-Length: 20\r\n\r\n{\"partial\""), finish: true)

        // Then the complete message comes out and the cut one is reported
        #expect(found.map(kind) == ["message({})", "malformed"])
    }

    @Test func finishInsideHeadersIsMalformed() {
        let (found, _) = events(bytes(lsp("{}") + "Content-Length: 20\r\n"), finish: true)
        #expect(found.map(kind) == ["message({})", "malformed"])
    }

    @Test func finishAfterCompleteMessagesAddsNothing() {
        let (found, _) = events(bytes(lsp("{}") + lsp("[]")), finish: true)
        #expect(found == [message("{}"), message("[]")])
    }

    @Test func finishWhileSkippingAnOverLimitBodyAddsNothing() {
        let (found, _) = events(bytes("Content-Length: 500\r\n\r\nxxxx"), limit: 10, finish: true)
        #expect(found == [.tooLarge(500)])
    }
}
