@testable import JSON
import Testing

/// The text `encode` writes, as a string.
private func encoded(_ value: JSON) -> String {
    String(decoding: JSONCodec.encode(value), as: UTF8.self)
}

/// Decodes `value`'s encoding.
private func roundTrip(_ value: JSON) throws -> JSON {
    try JSONCodec.decode(JSONCodec.encode(value))
}

/// The reason decoding `bytes` fails, or nil when it succeeds.
private func failureReason(_ bytes: [UInt8]) -> JSONDecodeError.Reason? {
    do {
        _ = try JSONCodec.decode(bytes)
        return nil
    } catch {
        return error.reason
    }
}

@Suite(.timeLimit(.minutes(1)))
struct JSONCodecRoundTripTests {
    @Test(arguments: [
        JSON.null, true, false, 0, -1, 42, 1.5, -0.25, "", "text", [], [:],
        [1, "two", 3.5, nil, true, [false]],
        ["a": 1, "b": ["c": [1, 2, ["d": nil]]], "e": "", "f": [:], "g": []],
    ])
    func everyTypeRoundTrips(value: JSON) throws {
        #expect(try roundTrip(value) == value)
    }

    @Test func typesAreKeptApart() throws {
        // Given values that look alike in text but differ in type
        let value: JSON = ["int": 1, "real": 1.0, "string": "1", "bool": true, "null": nil]

        // When they go through the codec
        let back = try roundTrip(value)

        // Then each keeps its own type
        #expect(back["int"] == .integer(1))
        #expect(back["real"] == .double(1.0))
        #expect(back["string"] == .string("1"))
        #expect(back["bool"] == .bool(true))
        #expect(back["null"] == .null)
    }

    @Test func topLevelScalarsDecode() throws {
        #expect(try JSONCodec.decode("42") == .integer(42))
        #expect(try JSONCodec.decode("-7") == .integer(-7))
        #expect(try JSONCodec.decode("2.5") == .double(2.5))
        #expect(try JSONCodec.decode("\"hi\"") == .string("hi"))
        #expect(try JSONCodec.decode("true") == .bool(true))
        #expect(try JSONCodec.decode("false") == .bool(false))
        #expect(try JSONCodec.decode("null") == .null)
        #expect(try JSONCodec.decode("  [ 1 , {\"a\" : null} ]\n") == [1, ["a": nil]])
    }

    @Test func decodesFromSlicesAndRawBuffers() throws {
        let bytes = Array("xx[1,2]yy".utf8)
        #expect(try JSONCodec.decode(bytes[2..<7]) == [1, 2])
        let value = try bytes[2..<7].withUnsafeBytes { try JSONCodec.decode($0) }
        #expect(value == [1, 2])
    }

    @Test func encodingIsCompactWithSortedKeys() {
        let value: JSON = ["b": [1, 2, ["z": true, "y": nil]], "a": "x", "B": 0, "aa": [:], "": []]
        #expect(encoded(value) == #"{"":[],"B":0,"a":"x","aa":{},"b":[1,2,{"y":null,"z":true}]}"#)
    }

    @Test func aRepeatedKeyInALiteralKeepsItsLastValue() {
        let value: JSON = ["a": 1, "b": 2, "a": 3]
        #expect(value == .object(["a": .integer(3), "b": .integer(2)]))
        #expect(encoded(value) == #"{"a":3,"b":2}"#)
    }

    @Test func estimatedCountIsExactWithoutEscapesOrReals() {
        let values: [JSON] = [
            nil, true, false, 0, 9, 10, -1, -10, .integer(.max), .integer(.min), "", "héllo",
            [], [:], [1, "a", [nil]], ["b": [1, 2, ["z": true, "y": nil]], "a": "x", "B": 0, "aa": [:], "": []],
        ]
        for value in values {
            #expect(value.estimatedEncodedCount == JSONCodec.encode(value).count, "\(value)")
        }
        // Escapes make the text longer than the estimate, never shorter.
        #expect(JSON.string("a\"b\n").estimatedEncodedCount <= JSONCodec.encode("a\"b\n").count)
    }

    @Test func scalarsEncodeAtTopLevel() {
        #expect(encoded(nil) == "null")
        #expect(encoded(true) == "true")
        #expect(encoded(false) == "false")
        #expect(encoded(-12) == "-12")
        #expect(encoded("a\"b\\c") == #""a\"b\\c""#)
        #expect(encoded([]) == "[]")
        #expect(encoded([:]) == "{}")
    }

    @Test func largeValuesGrowTheOutputBuffer() throws {
        // Given a value whose text is far longer than the first buffer
        let value = JSON.array((0..<5000).map { .string("element \($0)") })

        // When it is encoded
        let bytes = JSONCodec.encode(value)

        // Then the whole text is there and reads back
        #expect(bytes.count > 50_000)
        #expect(bytes.last == UInt8(ascii: "]"))
        #expect(try JSONCodec.decode(bytes) == value)
    }

    @Test func emptyInputIsAnError() {
        #expect(failureReason([]) == .syntax)
        #expect(failureReason(Array("   \n".utf8)) == .syntax)
    }

    @Test(arguments: ["{", "[1,", "{\"a\"}", "tru", "1 2", "[1]]", "'x'", "{\"a\":1,}", "nul", "01"])
    func brokenTextIsASyntaxError(text: String) {
        #expect(failureReason(Array(text.utf8)) == .syntax)
    }

    @Test func errorsSayWhereTheyHappened() {
        do {
            _ = try JSONCodec.decode("[1, 2, x]")
            Issue.record("decoding succeeded")
        } catch {
            #expect(error.reason == .syntax)
            #expect(error.position > 0)
            #expect(!error.message.isEmpty)
            #expect(error.description.contains("at byte"))
        }
    }

    @Test func libraryVersionIsReported() {
        #expect(JSONCodec.libraryVersion.first?.isNumber == true)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct JSONCodecUnicodeTests {
    @Test(arguments: ["é", "日本語", "😀", "👩‍👩‍👧", "a\u{0}b", "\u{0}", "\u{1F}\u{7F}\u{2028}", "line\nbreak\ttab\r", "\u{FFFF}\u{10FFFF}"])
    func stringsRoundTrip(text: String) throws {
        let value: JSON = ["key": .string(text), "list": [.string(text)]]
        let back = try roundTrip(value)
        #expect(back == value)
        #expect(back["key"]?.stringValue.map { Array($0.utf8) } == Array(text.utf8))
    }

    @Test func escapesDecode() throws {
        #expect(try JSONCodec.decode(#""\u00e9""#) == "é")
        #expect(try JSONCodec.decode(#""\u65E5""#) == "日")
        #expect(try JSONCodec.decode(#""\ud83d\ude00""#) == "😀")
        #expect(try JSONCodec.decode(#""\uD83D\uDE00""#) == "😀")
        #expect(try JSONCodec.decode(#""\"\\\/\b\f\n\r\t""#) == "\"\\/\u{8}\u{C}\n\r\t")
    }

    @Test func rawUTF8Decodes() throws {
        // Given the UTF-8 bytes of BMP and astral characters, unescaped
        let bytes: [UInt8] = [0x22, 0xC3, 0xA9, 0xE6, 0x97, 0xA5, 0xF0, 0x9F, 0x98, 0x80, 0x22]

        // Then they decode to the same characters
        #expect(try JSONCodec.decode(bytes) == "é日😀")
    }

    @Test func loneSurrogateEscapeIsAnError() {
        #expect(failureReason(Array(#""\ud800""#.utf8)) != nil)
        #expect(failureReason(Array(#""\ude00x""#.utf8)) != nil)
    }

    @Test func nulInsideStrings() throws {
        // Given NUL escaped inside strings
        let text = #"{"a":"x\u0000y","b":["\u0000"]}"#

        // When decoded
        let value = try JSONCodec.decode(text)

        // Then the NUL bytes are kept, not truncated at
        #expect(value == ["a": "x\u{0}y", "b": ["\u{0}"]])
        #expect(value["a"]?.stringValue?.utf8.count == 3)
        // And they are escaped again when encoded
        #expect(encoded(value) == #"{"a":"x\u0000y","b":["\u0000"]}"#)
    }

    @Test func nulInsideKeysIsEncodedButRefusedWhenDecoding() {
        // Given a key holding NUL
        let value: JSON = ["a\u{0}b": 1]

        // Then it is written escaped
        #expect(encoded(value) == #"{"a\u0000b":1}"#)

        // But jansson refuses such a key when reading, with a message that says so
        do {
            _ = try JSONCodec.decode(#"{"a\u0000b":1}"#)
            Issue.record("decoding succeeded")
        } catch {
            #expect(error.reason == .syntax)
            #expect(error.message.contains("NUL"))
        }
    }

    @Test func nonASCIIIsWrittenAsUTF8AndControlsEscaped() {
        #expect(JSONCodec.encode("é😀") == [0x22, 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80, 0x22])
        #expect(encoded("\u{0}\u{1}\n\u{1F}") == #""\u0000\u0001\n\u001F""#)
    }

    @Test func nonASCIIKeysRoundTripAndSortByBytes() throws {
        let value: JSON = ["é": 1, "z": 2, "😀": 3, "a": 4]
        #expect(encoded(value) == #"{"a":4,"z":2,"é":1,"😀":3}"#)
        #expect(try roundTrip(value) == value)
    }

    @Test(arguments: [
        [UInt8]([0x22, 0xFF, 0x22]),
        [0x22, 0xC3, 0x22],
        [0x22, 0xC0, 0x80, 0x22],
        [0x22, 0xED, 0xA0, 0x80, 0x22],
        [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],
        [0x5B, 0x31, 0x2C, 0xFE, 0x5D],
        [0x7B, 0x22, 0x80, 0x22, 0x3A, 0x31, 0x7D],
    ])
    func invalidUTF8IsReported(bytes: [UInt8]) {
        #expect(failureReason(bytes) == .invalidUTF8)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct JSONCodecNumberTests {
    @Test func sixtyFourBitIntegersAreExact() throws {
        #expect(try JSONCodec.decode("9223372036854775807") == .integer(.max))
        #expect(try JSONCodec.decode("-9223372036854775808") == .integer(.min))
        #expect(encoded(.integer(.max)) == "9223372036854775807")
        #expect(encoded(.integer(.min)) == "-9223372036854775808")
        #expect(try roundTrip([.integer(.max), .integer(.min), 0]) == [.integer(.max), .integer(.min), 0])
    }

    @Test func integersBeyondDoublePrecisionAreExact() throws {
        // Given an integer a double cannot hold
        let text = "9007199254740993"

        // When it is decoded and encoded again
        let value = try JSONCodec.decode(text)

        // Then not a digit changes
        #expect(value == .integer(9_007_199_254_740_993))
        #expect(encoded(value) == text)
    }

    @Test(arguments: ["9223372036854775808", "-9223372036854775809", "123456789012345678901234567890", "[1,99999999999999999999]"])
    func integersBeyond64BitsOverflow(text: String) {
        #expect(failureReason(Array(text.utf8)) == .integerOverflow)
    }

    @Test(arguments: ["1e400", "-1e400", "[0.5,1.0e309]", "1.8e308"])
    func realsBeyondADoubleOverflowAsReals(text: String) {
        #expect(failureReason(Array(text.utf8)) == .realOverflow)
    }

    @Test func fractionalNumbersUseTheShortestText() {
        #expect(encoded(0.1) == "0.1")
        #expect(encoded(1.5) == "1.5")
        #expect(encoded(-2.75) == "-2.75")
        #expect(encoded(1e-7) == "1e-7")
        #expect(encoded(100.0) == "100.0")
        #expect(encoded(0.0) == "0.0")
        #expect(encoded(123456.0) == "123456.0")
        #expect(encoded(1e300) == "1e300")
        #expect(encoded(-1e-300) == "-1e-300")
        #expect(encoded(0.30000000000000004) == "0.30000000000000004")
        #expect(encoded(.double(1.0 / 3.0)) == "0.3333333333333333")
        #expect(encoded(.double(2.0 / 3.0)) == "0.6666666666666666")
    }

    @Test(arguments: [
        0.1, 1.5, 1e-7, 100.0, 1e300, 0.30000000000000004, 1.0 / 3.0, 2.0 / 3.0, 123456789.123,
        1e16, 1e17, 12345678901234567.0, 2.2250738585072014e-308, Double.greatestFiniteMagnitude,
        -0.0, .leastNonzeroMagnitude, 9007199254740993.0, 0.1 + 0.2, 1e21, 1e22, 1e23, 3.14159,
    ])
    func realsRoundTripExactly(number: Double) throws {
        let back = try roundTrip(.double(number))
        guard case .double(let value) = back else {
            Issue.record("\(number) came back as \(back)")
            return
        }
        #expect(value.bitPattern == number.bitPattern)
    }

    @Test func realsNeverComeBackAsIntegers() throws {
        for number in [100.0, 1e16, 1e17, 1e22, -5.0, 0.0] {
            #expect(try roundTrip(.double(number)) == .double(number))
        }
    }

    @Test func aMessageUsesTheDigitsItsMostPreciseRealNeeds() throws {
        // Given reals that each need few digits
        #expect(encoded([0.1, 1.5, 100.0, 1e-7]) == "[0.1,1.5,100.0,1e-7]")

        // Given one real that needs 17 digits beside one that needs one
        let mixed: JSON = ["a": 0.1, "b": 0.30000000000000004]

        // Then both are written with 17, and both read back exactly
        #expect(encoded(mixed) == #"{"a":0.10000000000000001,"b":0.30000000000000004}"#)
        #expect(try roundTrip(mixed) == mixed)
    }

    @Test func integersInAMessageKeepTheirDigits() {
        #expect(encoded([1234567890123, 0.5, .integer(.max)]) == "[1234567890123,0.5,9223372036854775807]")
    }

    @Test func nonFiniteRealsEncodeAsNull() {
        #expect(encoded(.double(.nan)) == "null")
        #expect(encoded(.double(.infinity)) == "null")
        #expect(encoded([.double(-.infinity), 1.5, ["x": .double(.nan)]]) == #"[null,1.5,{"x":null}]"#)
    }

    @Test func decodedNumbersHaveTheirJSONType() throws {
        #expect(try JSONCodec.decode("1") == .integer(1))
        #expect(try JSONCodec.decode("1.0") == .double(1))
        #expect(try JSONCodec.decode("1e2") == .double(100))
        #expect(try JSONCodec.decode("-0") == .integer(0))
        #expect(failureReason(Array("1e400".utf8)) != nil)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct JSONCodecNestingTests {
    private func nestedArrays(_ depth: Int) -> JSON {
        var value: JSON = 1
        for _ in 0..<depth { value = [value] }
        return value
    }

    private func nestedObjects(_ depth: Int) -> JSON {
        var value: JSON = "leaf"
        for level in 0..<depth { value = ["k\(level % 3)": value] }
        return value
    }

    @Test func thousandLevelsRoundTrip() throws {
        let arrays = nestedArrays(1000)
        let bytes = JSONCodec.encode(arrays)
        #expect(bytes.count == 2001)
        #expect(try JSONCodec.decode(bytes) == arrays)

        let objects = nestedObjects(1000)
        #expect(try roundTrip(objects) == objects)
    }

    @Test func hundredThousandLevelsFailWithAnError() {
        // Given 100,000 nested arrays
        let depth = 100_000
        let text = [UInt8](repeating: UInt8(ascii: "["), count: depth) + [UInt8(ascii: "1")]
            + [UInt8](repeating: UInt8(ascii: "]"), count: depth)

        // Then decoding reports the depth rather than crashing
        #expect(failureReason(text) == .tooDeep)

        // And the same goes for objects
        let objects = Array(String(repeating: #"{"a":"#, count: depth).utf8) + [UInt8(ascii: "1")]
            + [UInt8](repeating: UInt8(ascii: "}"), count: depth)
        #expect(failureReason(objects) == .tooDeep)
    }

    @Test func unclosedDeepInputIsAnError() {
        let text = [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
        #expect(failureReason(text) != nil)
    }
}

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

/// Builds random JSON values for property tests.
struct RandomJSON {
    var generator: SplitMix64

    mutating func value(depth: Int = 0) -> JSON {
        let kinds = depth >= 4 ? 6 : 8
        switch Int.random(in: 0..<kinds, using: &generator) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &generator))
        case 2: return .integer(integer())
        case 3: return .double(double())
        case 4, 5: return .string(string())
        case 6:
            let count = Int.random(in: 0...5, using: &generator)
            return .array((0..<count).map { _ in value(depth: depth + 1) })
        default:
            let count = Int.random(in: 0...5, using: &generator)
            var members: [String: JSON] = [:]
            for _ in 0..<count { members[string(nul: false)] = value(depth: depth + 1) }
            return .object(members)
        }
    }

    mutating func integer() -> Int64 {
        switch Int.random(in: 0..<4, using: &generator) {
        case 0: return Int64.random(in: -100...100, using: &generator)
        case 1: return [Int64.min, .max, 0, -1, 9_007_199_254_740_993].randomElement(using: &generator)!
        default: return Int64(bitPattern: generator.next())
        }
    }

    mutating func double() -> Double {
        switch Int.random(in: 0..<4, using: &generator) {
        case 0: return Double(Int.random(in: -1000...1000, using: &generator)) / 10
        case 1: return Double.random(in: -1e6...1e6, using: &generator)
        case 2: return [0.1, 100.0, 1e-7, 1e300, -0.0, .leastNonzeroMagnitude, 0.30000000000000004].randomElement(using: &generator)!
        default:
            while true {
                let number = Double(bitPattern: generator.next())
                if number.isFinite { return number }
            }
        }
    }

    /// A random string; `nul: false` leaves out U+0000, which jansson
    /// refuses in object keys.
    mutating func string(nul: Bool = true) -> String {
        let count = Int.random(in: 0...8, using: &generator)
        var scalars = String.UnicodeScalarView()
        for _ in 0..<count {
            let scalar: Unicode.Scalar?
            switch Int.random(in: 0..<5, using: &generator) {
            case 0: scalar = Unicode.Scalar(UInt8.random(in: (nul ? 0x00 : 0x01)...0x1F, using: &generator))
            case 1: scalar = Unicode.Scalar(UInt32.random(in: 0x80...0xFFFF, using: &generator))
            case 2: scalar = Unicode.Scalar(UInt32.random(in: 0x10000...0x10FFFF, using: &generator))
            default: scalar = Unicode.Scalar(UInt8.random(in: 0x20...0x7E, using: &generator))
            }
            if let scalar { scalars.append(scalar) }
        }
        return String(scalars)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct JSONCodecPropertyTests {
    @Test(arguments: [UInt64(1), 0xC0FFEE, 20_240_601])
    func randomValuesRoundTrip(seed: UInt64) throws {
        // Given 500 random values from a fixed seed
        var random = RandomJSON(generator: SplitMix64(seed: seed))
        for index in 0..<500 {
            let value = random.value()

            // When each is encoded and decoded
            let bytes = JSONCodec.encode(value)
            let back = try JSONCodec.decode(bytes)

            // Then it comes back equal, and its text is stable
            #expect(back == value, "value \(index) of seed \(seed): \(String(decoding: bytes, as: UTF8.self))")
            #expect(JSONCodec.encode(back) == bytes)
        }
    }

    @Test func randomRealsRoundTripBitForBit() throws {
        var random = RandomJSON(generator: SplitMix64(seed: 7))
        for _ in 0..<500 {
            let number = random.double()
            let back = try roundTrip(.double(number))
            #expect(back.doubleValue?.bitPattern == number.bitPattern, "\(number) came back as \(back)")
        }
    }

    @Test func splitMixIsDeterministic() {
        var first = SplitMix64(seed: 42)
        var second = SplitMix64(seed: 42)
        let a = (0..<4).map { _ in first.next() }
        let b = (0..<4).map { _ in second.next() }
        #expect(a == b)
        #expect(Set(a).count == 4)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct JSONCodecKeyOrderTests {
    @Test func keysAreWrittenInByteOrderAtEveryDepth() {
        // Given objects whose keys differ in case, length and non-ASCII bytes
        let inner: JSON = ["é": 1, "e": 2, "E": 3, "ee": 4, "e\u{0}": 7, "": 8]
        let value: JSON = ["b": inner, "a": .array([["z": 1, "y": 2]]), "ab": true, "Z": nil, "\u{10000}": 5, "\u{FFFF}": 6]

        // When they are encoded, then every object's keys come in the order of their UTF-8 bytes
        #expect(
            encoded(value)
                == #"{"Z":null,"a":[{"y":2,"z":1}],"ab":true,"b":{"":8,"E":3,"e":2,"e\u0000":7,"ee":4,"é":1},"\#u{FFFF}":6,"\#u{10000}":5}"#)
    }
}

/// A decoded tree lives in an arena of its parse's own: trees many times
/// the size of their text, texts that fail half-way and threads decoding at
/// once each get what a tree of malloc'd blocks gave.
@Suite(.timeLimit(.minutes(1)))
struct JSONCodecArenaTests {
    @Test func treesFarLargerThanTheirTextDecode() throws {
        // Given 50,000 empty objects, each a few bytes of text and a few hundred of tree
        let count = 50_000
        let text = "[" + Array(repeating: "{}", count: count).joined(separator: ",") + "]"

        // When it is decoded, then every object is there
        #expect(try JSONCodec.decode(text) == .array(Array(repeating: [:], count: count)))
    }

    @Test func stringsThatOutgrowTheLexersBufferDecode() throws {
        // Given strings of a few bytes to 4 MiB, which the lexer's buffer doubles to hold
        for size in [1, 15, 16, 17, 4096, 4 << 20] {
            let value: JSON = ["key": .string(String(repeating: "x", count: size)), "after": [1, 2]]

            // Then each comes back whole
            #expect(try roundTrip(value) == value, "\(size)")
        }
    }

    @Test func aRepeatedKeyKeepsItsLastValue() throws {
        // jansson frees the value a repeated key replaces while it parses.
        let decoded = try JSONCodec.decode(#"{"a":{"deep":[1,2,3]},"b":1,"a":"last","a":["really",{"x":null}]}"#)
        #expect(decoded == ["a": ["really", ["x": nil]], "b": 1])
    }

    @Test func aTextThatFailsLateLeavesTheNextDecodeWhole() throws {
        // Given a text that fails after thousands of values
        let broken = "[" + Array(repeating: #"{"k":"value"}"#, count: 5_000).joined(separator: ",") + ",}"
        #expect(failureReason(Array(broken.utf8)) == .syntax)

        // Then the next text decodes, and encoding between them is unaffected
        let value: JSON = ["list": .array((0..<1000).map { .integer(Int64($0)) }), "text": "t"]
        #expect(encoded(value).hasPrefix(#"{"list":[0,1,2,"#))
        #expect(try roundTrip(value) == value)
    }

    @Test func treesMadeAndDumpedInScratchRoomAreWholeWhateverTheirSize() {
        // Given values far larger than the scratch room lent for them,
        // or fitting in it, made, dumped and dropped inside it, a scratch
        // inside another, and a decode between them
        let values: [JSON] = [
            .string("short"), 12, .double(0.1), nil,
            .object(Dictionary(uniqueKeysWithValues: (0..<300).map { ("key \($0)", JSON.string(String(repeating: "v", count: $0))) })),
            .array((0..<1000).map { .integer(Int64($0)) }),
        ]
        for byteCount in [48, 64, 1024, 16 << 10] {
            for value in values {
                let text: [UInt8] = JSONCodec.withScratch(byteCount: byteCount) {
                    var precision = 1
                    var text: [UInt8] = []
                    JSONCodec.dump(JSONCodec.makeJSONT(value, precision: &precision), precision: precision, into: &text, sizeHint: 16)
                    let inner: [UInt8] = JSONCodec.withScratch(byteCount: byteCount) { JSONCodec.encode(value) }
                    return text == inner ? text : []
                }

                // Then each is the text encoding it writes
                #expect(text == JSONCodec.encode(value), "\(byteCount)")
                #expect((try? JSONCodec.decode(text)) == value)
            }
        }
    }

    @Test func threadsDecodeAndEncodeAtOnce() async throws {
        // Given four tasks, each decoding and encoding its own values at once
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    var same = true
                    for round in 0..<300 {
                        let value: JSON = [
                            "worker": .integer(Int64(worker)), "round": .integer(Int64(round)),
                            "items": .array((0..<(round % 50)).map { .string("item \($0) of \(worker)") }),
                        ]
                        same = try same && JSONCodec.decode(JSONCodec.encode(value)) == value
                    }
                    return same
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }

        // Then every value came back as it was
        #expect(results == [true, true, true, true])
    }
}
