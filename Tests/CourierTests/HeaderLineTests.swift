import Testing

@testable import Courier

/// Response header lines are read as bytes, as libcurl hands them over.
@Suite(.timeLimit(.minutes(1)))
struct HeaderLineTests {
    private func line(_ bytes: [UInt8]) -> HeaderLine {
        bytes.withUnsafeBytes { HeaderLine($0) }
    }

    private func line(_ text: String) -> HeaderLine { line(Array(text.utf8)) }

    private func head(_ lines: [String]) -> (ResponseHead, ended: Bool) {
        var head = ResponseHead(status: 0, headers: [])
        var ended = false
        for text in lines { ended = head.read(line(text)) }
        return (head, ended)
    }

    @Test func statusLines() {
        #expect(line("HTTP/1.1 200 OK\r\n") == .status(200, version: "1.1"))
        #expect(line("HTTP/2 304\r\n") == .status(304, version: "2"))
        // curl reads three digits, whatever follows them.
        #expect(line("HTTP/1.1 2045 Odd\r\n") == .status(204, version: "1.1"))
        #expect(line("HTTP/1.1 20x OK\r\n") == .status(0, version: "1.1"))
        #expect(line("HTTP/1.1\r\n") == .status(0, version: "1.1"))
    }

    @Test func fields() {
        #expect(line("Content-Type: text/plain\r\n") == .field(name: "content-type", value: "text/plain"))
        #expect(line("ETag:\t \"a b\" \t\r\n") == .field(name: "etag", value: "\"a b\""))
        #expect(line("X-Empty:\r\n") == .field(name: "x-empty", value: ""))
        // Only the first colon splits.
        #expect(line("Location: http://a:1/\r\n") == .field(name: "location", value: "http://a:1/"))
        // A bare LF ends a line as well as CR LF.
        #expect(line("A: b\n") == .field(name: "a", value: "b"))
    }

    @Test func namesAreTokens() {
        #expect(line("Bad Name: x\r\n") == .ignored)
        #expect(line(": x\r\n") == .ignored)
        #expect(line("no colon here\r\n") == .ignored)
        #expect(line([0xC3, 0xA9, 0x3A, 0x20, 0x78, 0x0D, 0x0A]) == .ignored)
        // A Kelvin sign is not a K: names are compared as bytes.
        #expect(line("\u{212A}ey: x\r\n") == .ignored)
    }

    @Test func endAndContinuation() {
        #expect(line("\r\n") == .end)
        #expect(line("\n") == .end)
        #expect(line("  folded  text\r\n") == .continuation("folded  text"))
        #expect(line("\tx\r\n") == .continuation("x"))
    }

    @Test func headJoinsContinuationsAndStartsOverAtEachStatusLine() {
        let (first, firstEnded) = head(["HTTP/1.1 301 Moved\r\n", "Location: /b\r\n", "X-Long: one\r\n", " two\r\n"])
        #expect(!firstEnded)
        #expect(first.status == 301)
        #expect(first.header("x-long") == "one two")
        let (second, ended) = head([
            "HTTP/1.1 301 Moved\r\n", "Location: /b\r\n", "\r\n", "HTTP/2 200\r\n", "Content-Length: 3\r\n", "\r\n",
        ])
        #expect(ended)
        #expect(second.status == 200)
        #expect(second.httpVersion == "2")
        #expect(second.header("location") == nil)
        #expect(second.header("content-length") == "3")
    }

    /// A value that is not UTF-8 is text with U+FFFD, and keeps its bytes;
    /// a UTF-8 one keeps none, and a later field of the name replaces them.
    @Test func valuesThatAreNotUTF8KeepTheirBytes() {
        let raw: [UInt8] = Array("ETag: \"caf".utf8) + [0xE9, 0x2D, 0xFF] + Array("\"\r\n".utf8)
        let tag: [UInt8] = Array("\"caf".utf8) + [0xE9, 0x2D, 0xFF, 0x22]
        #expect(line(raw) == .field(name: "etag", value: "\"caf\u{FFFD}-\u{FFFD}\"", bytes: tag))
        #expect(line("ETag: \"caf\u{E9}\"\r\n") == .field(name: "etag", value: "\"caf\u{E9}\"", bytes: nil))

        var head = ResponseHead(status: 200, headers: [])
        _ = head.read(line(raw))
        _ = head.read(line([0x20, 0xE9, 0x0D, 0x0A]))
        #expect(head.header("etag") == "\"caf\u{FFFD}-\u{FFFD}\" \u{FFFD}")
        #expect(head.headerBytes("etag") == tag + [0x20, 0xE9])
        _ = head.read(line("ETag: \"v2\"\r\n"))
        #expect(head.headerBytes("etag") == Array("\"v2\"".utf8))
        #expect(head.rawValues.isEmpty)
    }

    /// RFC 9112 §2.2: whitespace before the first field is no continuation
    /// of anything; the line is left out.
    @Test func continuationBeforeAnyFieldIsLeftOut() {
        let (head, _) = head(["HTTP/1.1 200 OK\r\n", " X-Sneaky: 1\r\n", "A: b\r\n"])
        #expect(head.headers.count == 1)
        #expect(head.header("x-sneaky") == nil)
        #expect(head.header("a") == "b")
    }

    /// Every byte is a token character exactly when RFC 9110 §5.6.2 says.
    @Test func tokenBytesAreTheRFCs() {
        let tokens = Set(Array("!#$%&'*+-.^_`|~".utf8) + Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8))
        for byte in UInt8.min...UInt8.max {
            #expect(HTTPField.isTokenByte(byte) == tokens.contains(byte), "byte \(byte)")
        }
    }

    /// A byte past ASCII is found wherever it stands, in a whole word or in
    /// the bytes after the last one.
    @Test func asciiCheckFindsEveryHighByte() {
        for length in 0...20 {
            let plain = [UInt8](repeating: UInt8(ascii: "a"), count: length)
            #expect(plain.withUnsafeBufferPointer { HeaderLine.isASCII($0) })
            for position in 0..<length {
                for high: UInt8 in [0x80, 0xC3, 0xFF] {
                    var bytes = plain
                    bytes[position] = high
                    #expect(!bytes.withUnsafeBufferPointer { HeaderLine.isASCII($0) }, "length \(length), at \(position)")
                }
            }
        }
    }

    /// Names are lowered letter by letter; the other token characters stay
    /// as they are (`^` is not `~`, nor `_` DEL), and a long name too.
    @Test func namesAreLowered() {
        #expect(line("X-ABC^_`|~09Z: v\r\n") == .field(name: "x-abc^_`|~09z", value: "v"))
        #expect(line("X-A-Rather-Long-Field-Name: v\r\n") == .field(name: "x-a-rather-long-field-name", value: "v"))
        // The usual names, in any case, and names one byte from them.
        #expect(line("CONTENT-LENGTH: 3\r\n") == .field(name: "content-length", value: "3"))
        #expect(line("eTaG: \"x\"\r\n") == .field(name: "etag", value: "\"x\""))
        #expect(line("Content_Type: v\r\n") == .field(name: "content_type", value: "v"))
        #expect(line("Content-Typf: v\r\n") == .field(name: "content-typf", value: "v"))
        #expect(line("Dat3: v\r\n") == .field(name: "dat3", value: "v"))
        #expect(line("Last-Modified2: v\r\n") == .field(name: "last-modified2", value: "v"))
        for name in ["Date", "ETag", "Server", "Connection", "Content-Type", "Last-Modified", "Accept-Ranges", "Cache-Control"] {
            #expect(line("\(name): v\r\n") == .field(name: name.lowercased(), value: "v"))
        }
        #expect(line("@Name: v\r\n") == .ignored)
        #expect(line("[Name]: v\r\n") == .ignored)
    }

    /// A long value, ASCII or not, is read whole: the check runs over
    /// whole words and the bytes after them.
    @Test func longValues() {
        let ascii = String(repeating: "0123456789", count: 5) + "abc"
        #expect(line("X-Long: \(ascii)\r\n") == .field(name: "x-long", value: ascii))
        let utf8 = String(repeating: "0123456789", count: 2) + "caf\u{E9}"
        #expect(line("X-Long: \(utf8)\r\n") == .field(name: "x-long", value: utf8))
        let raw: [UInt8] = Array("X-Long: ".utf8) + Array(repeating: 0x61, count: 17) + [0xFF] + Array("\r\n".utf8)
        #expect(line(raw) == .field(name: "x-long", value: String(repeating: "a", count: 17) + "\u{FFFD}",
            bytes: Array(repeating: 0x61, count: 17) + [0xFF]))
    }

    /// The last field of a name answers, whichever fields of the same
    /// length stand after it.
    /// The announced length is the last `Content-Length`'s, unless the last
    /// `Content-Encoding` names a coding other than `identity`, wherever
    /// either stands among the fields.
    @Test(arguments: [
        ([("content-length", "5")], 5), ([("content-length", "5"), ("content-length", "7")], 7),
        ([("content-encoding", "gzip"), ("content-length", "5")], nil),
        ([("content-length", "5"), ("content-encoding", "gzip")], nil),
        ([("content-encoding", "IDENTITY"), ("date", "x"), ("content-length", " 9 ")], 9),
        ([("content-encoding", "gzip"), ("content-encoding", "identity"), ("content-length", "3")], 3),
        ([("content-encoding", "identity"), ("content-encoding", "br"), ("content-length", "3")], nil),
        ([("content-type", "text/plain"), ("etag", "\"x\"")], nil), ([(String, String)](), nil),
    ] as [([(String, String)], Int64?)])
    func announcedLengthReadsTheLastFields(headers: [(String, String)], length: Int64?) {
        let head = ResponseHead(status: 200, headers: headers.map { (name: $0.0, value: $0.1) })
        #expect(head.announcedLength == length)
    }

    @Test func lookupTakesTheLastFieldOfTheName() {
        let (head, _) = head(["HTTP/1.1 200 OK\r\n", "Etag: \"a\"\r\n", "Date: x\r\n", "ETag: \"b\"\r\n", "Vary: y\r\n"])
        #expect(head.header("etag") == "\"b\"")
        #expect(head.header("date") == "x")
        #expect(head.header("none") == nil)
        #expect(ResponseHead(status: 200, headers: []).header("etag") == nil)
    }
}
