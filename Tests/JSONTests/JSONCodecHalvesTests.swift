import CJanssonShim
import CLibjansson
@testable import JSON
import Testing

/// A JSON-RPC batch of `count` requests, as a client writes it.
/// The entry at `missingComma` lacks the comma before its method.
private func batchText(_ count: Int, separator: String = ",", missingComma: Int? = nil) -> String {
    "[" + (0..<count).map { index in
        let comma = index == missingComma ? " " : ","
        return #"{"jsonrpc":"2.0","id":\#(index)\#(comma)"method":"download","params":{"url":"http://127.0.0.1:8080/f/\#(index)","destination":"/tmp/out/\#(index)"}}"#
    }.joined(separator: separator) + "]"
}

/// The same batch, made as values.
private func batchValue(_ count: Int) -> JSON {
    .array((0..<count).map { index in
        [
            "jsonrpc": "2.0", "id": .integer(Int64(index)), "method": "download",
            "params": ["url": .string("http://127.0.0.1:8080/f/\(index)"), "destination": .string("/tmp/out/\(index)")],
        ]
    })
}

/// Whether the text parses in two halves: the root jansson's two threads
/// made, or nil.
private func parsedInHalves(_ text: String) -> JSON? {
    var bytes = Array(text.utf8)
    return bytes.withUnsafeMutableBufferPointer { buffer -> JSON? in
        let flags = Int(JSON_DECODE_ANY | JSON_ALLOW_NUL)
        let parsed = buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
            courier_json_loadb_arena_halves($0, buffer.count, flags)
        }
        defer { courier_json_parsed_drop(parsed) }
        return parsed.root.map { ParsedJSON($0).json }
    }
}

/// Where jansson, parsing `text` whole, finds it wrong.
private func wholeErrorPosition(_ text: String) -> Int? {
    var error = json_error_t()
    let root = text.withCString { json_loadb($0, text.utf8.count, Int(JSON_DECODE_ANY | JSON_ALLOW_NUL), &error) }
    if let root {
        courier_json_decref(root)
        return nil
    }
    return Int(error.position)
}

@Suite(.timeLimit(.minutes(1)))
struct JSONCodecHalvesTests {
    @Test(arguments: [",", " , ", ",\n", "\r\n,\t"])
    func aLongBatchParsesInHalvesToTheSameValue(separator: String) throws {
        // Given a batch of 2,000 requests, some 260 KiB
        let text = batchText(2000, separator: separator)
        #expect(text.utf8.count > 200_000)

        // When it is parsed in halves and by the codec
        let halves = try #require(parsedInHalves(text))

        // Then both are the batch, every request in order
        #expect(halves == batchValue(2000))
        #expect(try JSONCodec.decode(text) == batchValue(2000))
    }

    @Test func aShortBatchIsParsedWhole() throws {
        let text = batchText(20)
        #expect(parsedInHalves(text) == nil)
        #expect(try JSONCodec.decode(text) == batchValue(20))
    }

    @Test func anArrayWithoutObjectsIsParsedWhole() throws {
        let numbers = (0..<20_000).map { JSON.integer(Int64($0)) }
        let text = String(decoding: JSONCodec.encode(.array(numbers)), as: UTF8.self)
        #expect(parsedInHalves(text) == nil)
        #expect(try JSONCodec.decode(text) == .array(numbers))
    }

    @Test func textsWhoseTreesTakeSeveralLargeChunksParseWhole() throws {
        // Given texts whose trees outgrow a first chunk of mapped huge
        // pages: many small values, a string of megabytes, and values
        // after it that need chunks of their own
        let numbers = (0..<400_000).map { JSON.integer(Int64($0 % 7)) }
        let long = String(repeating: "abcdefgh", count: 600_000)
        let mixed: JSON = .array([.string(long), .array(numbers), .string(long + "!"), ["key": .string(long)]])

        // When each is parsed, again and again
        for _ in 0..<3 {
            for value in [JSON.array(numbers), .string(long), mixed] {
                let text = JSONCodec.encode(value)

                // Then each reads back as it was written
                #expect(try JSONCodec.decode(text) == value)
            }
        }
    }

    @Test func aCommaInsideAStringIsNoPlaceToCut() throws {
        // Given a batch whose middle lies in a string of `},{` over and over
        let filler = String(repeating: "},{", count: 20_000)
        let text = #"[{"a":1},{"text":"\#(filler)"},{"b":2}]"#

        // Then the halves do not parse, and the whole does, to its value
        #expect(parsedInHalves(text) == nil)
        #expect(try JSONCodec.decode(text) == [["a": 1], ["text": .string(filler)], ["b": 2]])
    }

    @Test func aNestedCommaIsNoPlaceToCut() throws {
        // Given one request whose params hold a long list of objects
        let list = (0..<4000).map { #"{"v":\#($0)}"# }.joined(separator: ",")
        let text = #"[{"jsonrpc":"2.0","id":1,"method":"m","params":{"list":[\#(list)]}}]"#

        // Then it is read whole, the same value
        #expect(parsedInHalves(text) == nil)
        let value = try JSONCodec.decode(text)
        #expect(value.arrayValue?.count == 1)
        #expect(value.arrayValue?.first?["params"]?["list"]?.arrayValue?[3999] == ["v": 3999])
    }

    @Test(arguments: [
        ("a missing bracket in the second half", #"{"jsonrpc":"2.0","id":1999,"method":"x""#),
        ("an integer beyond 64 bits in the second half", #"{"id":99999999999999999999}"#),
        ("trailing bytes", #"{"id":1}]]"#),
    ])
    func aBatchWrongInItsSecondHalfFailsAsAWholeParseDoes(what: String, last: String) {
        // Given a long batch whose last entry is wrong
        let text = String(batchText(2000).dropLast()) + "," + last + (last.hasSuffix("]") ? "" : "]")

        // Then the halves give nothing, and the codec's error is a whole parse's
        #expect(parsedInHalves(text) == nil, "\(what)")
        do {
            _ = try JSONCodec.decode(text)
            Issue.record("\(what) parsed")
        } catch {
            #expect(error.position == wholeErrorPosition(text), "\(what)")
            #expect(error.position > text.utf8.count / 2, "\(what)")
        }
    }

    @Test func aBatchWrongInItsFirstHalfSaysWhere() {
        // Given a long batch whose 11th entry lacks a comma between members
        let text = batchText(2000, missingComma: 10)

        // Then the error is where that entry is
        do {
            _ = try JSONCodec.decode(text)
            Issue.record("parsed")
        } catch {
            #expect(error.position < 2000)
            #expect(error.position == wholeErrorPosition(text))
        }
    }
}
