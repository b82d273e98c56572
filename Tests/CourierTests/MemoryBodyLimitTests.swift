import JSON
import JSONRPC
import Logging
import Testing

@testable import Courier

/// `--max-memory-body` counts what a `text` or `base64` body takes as the
/// JSON string its outcome carries, not only the bytes received: while the
/// body streams (`DownloadRequest.limitRefusal`), when it is decoded
/// (`TextDecoding`), and once for every receipt that shares it (`Delivery`).
@Suite struct MemoryBodyLimitTests {
    private static func request(_ params: [String: JSON]) throws -> DownloadRequest {
        var params = params
        params["url"] = "http://o/a"
        return try DownloadRequest(Params(.object(params)), defaults: Configuration(cacheDir: "/nonexistent"))
    }

    // MARK: - While the body streams

    @Test func eachBodyKindCountsWhatItTakesAsJSON() throws {
        let text = try Self.request(["body": "text"])
        let base64 = try Self.request(["body": "base64"])
        let none = try Self.request(["body": "none"])

        // Text: the escaped length when known, else the bytes
        #expect(text.limitRefusal(received: 100, textLength: 600, memoryBodyLimit: 599)?.code == .tooLarge)
        #expect(text.limitRefusal(received: 100, textLength: 599, memoryBodyLimit: 599) == nil)
        #expect(text.limitRefusal(received: 600, memoryBodyLimit: 599)?.code == .tooLarge)
        // Base64: four bytes for every three, the last group padded
        #expect(base64.limitRefusal(received: 300, memoryBodyLimit: 400) == nil)
        #expect(base64.limitRefusal(received: 301, memoryBodyLimit: 400)?.code == .tooLarge)
        // A file costs no memory
        #expect(none.limitRefusal(received: 1 << 40, textLength: 6 << 40, memoryBodyLimit: 1) == nil)
    }

    @Test func theFailureNamesTheLimitItPassed() throws {
        let limited = try Self.request(["body": "text", "maxBytes": 10])
        #expect(limited.limitRefusal(received: 11, memoryBodyLimit: 100)?.message.contains("maxBytes (10 bytes)") == true)
        let text = try Self.request(["body": "text"])
        let bytes = try #require(text.limitRefusal(received: 101, memoryBodyLimit: 100))
        #expect(bytes.message.contains("maxMemoryBody (100 bytes)"))
        let json = try #require(text.limitRefusal(received: 50, textLength: 300, memoryBodyLimit: 100))
        #expect(json.message == "the body takes more than maxMemoryBody (100 bytes) as the JSON string of its text")
    }

    @Test func aHugeAnnouncedLengthCannotOverflowTheBase64Count() throws {
        #expect(DownloadRequest.base64Length(of: .max) == .max)
        #expect(DownloadRequest.base64Length(of: 0) == 0)
        #expect(DownloadRequest.base64Length(of: 4) == 8)
        let base64 = try Self.request(["body": "base64"])
        #expect(base64.limitRefusal(received: .max / 2, memoryBodyLimit: .max / 2)?.code == .tooLarge)
    }

    // MARK: - When it is decoded

    @Test func textIsMadeOnlyWhenItsJSONFits() {
        let controls = [UInt8](repeating: 1, count: 1000)
        #expect(TextDecoding.decode(controls, charset: nil, jsonLimit: 6000) == String(repeating: "\u{1}", count: 1000))
        #expect(TextDecoding.decode(controls, charset: "utf-8", jsonLimit: 5999) == nil)
        // Through iconv: Latin-1 bytes above 0x7F take two bytes in UTF-8
        let latin = [UInt8](repeating: 0xE9, count: 1000)
        #expect(TextDecoding.decode(latin, charset: "iso-8859-1", jsonLimit: 2000) == String(repeating: "é", count: 1000))
        #expect(TextDecoding.decode(latin, charset: "iso-8859-1", jsonLimit: 1999) == nil)
        // Invalid UTF-8 counts as its replacement
        #expect(TextDecoding.decode([0xFF, 0xFF], charset: nil, jsonLimit: 5) == nil)
        #expect(TextDecoding.decode([0xFF, 0xFF], charset: nil, jsonLimit: 6) == "\u{FFFD}\u{FFFD}")
    }

    // MARK: - Once for every receipt

    private static func deliver(_ body: [UInt8], limit: Int64, to requests: [DownloadRequest]) throws -> [Outcome] {
        let response = ResponseHead(status: 200, headers: [("content-type", "text/plain")])
        // Text and base64 receipts never touch the downloads directory.
        return Delivery(
            response: response, size: Int64(body.count), body: BodyFile(.bytes(body)), source: .network,
            downloads: try DirectoryHandle(opening: "/"), downloadRoot: nil, leftovers: nil, memoryBodyLimit: limit,
            logger: Logger(label: "test")
        ).deliver(to: requests.enumerated().map { (ReceiptID($0.offset + 1), $0.element) })
    }

    @Test func coalescedReceiptsShareOneTextAndOneBase64() throws {
        let text = try Self.request(["body": "text"])
        let base64 = try Self.request(["body": "base64"])
        let outcomes = try Self.deliver(Array("shared body, more than fifteen bytes".utf8), limit: 1000, to: [text, base64, text, base64])
        #expect(outcomes.allSatisfy { $0.error == nil })
        #expect(storage(of: outcomes[0].text) != nil && storage(of: outcomes[0].text) == storage(of: outcomes[2].text))
        #expect(storage(of: outcomes[1].base64) != nil && storage(of: outcomes[1].base64) == storage(of: outcomes[3].base64))
    }

    @Test func textThatEscapesPastTheLimitFailsWhenItIsDecoded() throws {
        // Given a body whose bytes fit and whose JSON does not (the transfer
        // did not count its escapes)
        let text = try Self.request(["body": "text"])
        let latin = try Self.request(["body": "text", "textEncoding": "iso-8859-1"])
        let base64 = try Self.request(["body": "base64"])
        let outcomes = try Self.deliver([UInt8](repeating: 1, count: 100), limit: 500, to: [text, latin, base64, text])

        // Then each text receipt fails too_large, and base64 (136 bytes) is delivered
        for index in [0, 1, 3] {
            #expect(outcomes[index].error?.code == .tooLarge)
            #expect(outcomes[index].error?.message.contains("JSON string of its text") == true)
            #expect(outcomes[index].text == nil)
        }
        #expect(outcomes[2].error == nil && outcomes[2].base64?.utf8.count == 136)
    }

    /// Where a string's bytes are: equal for copies that share one buffer.
    private func storage(of text: String?) -> UInt? {
        guard var text else { return nil }
        return text.withUTF8 { $0.baseAddress.map { UInt(bitPattern: $0) } }
    }
}
