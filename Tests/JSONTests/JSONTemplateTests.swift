@testable import JSON
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The text of the object `members` writes.
private func written(_ members: (JSONObjectWriter) -> Void) -> String {
    var text: [UInt8] = []
    JSONCodec.encodeObject(into: &text, members)
    return String(decoding: text, as: UTF8.self)
}

/// The text jansson writes for the same members put in one tree.
private func asTree(_ members: (JSONObjectWriter) -> Void) -> String {
    String(decoding: JSONCodec.encode(JSON(object: members)), as: UTF8.self)
}

@Suite(.timeLimit(.minutes(1)))
struct JSONTemplateTests {
    /// Members of every kind, nested, with values from `values`.
    private static func message(_ values: [String], _ number: Int64, _ real: Double) -> (JSONObjectWriter) -> Void {
        { object in
            object.set("a", values[0])
            object.set("b", object: { inner in
                inner.set("c", number)
                inner.set("d", real)
                inner.set("e", object: { _ in })
                inner.set("f", strings: values)
                inner.set("g", nil as String?)
            })
            object.set("h", number % 2 == 0)
            object.set("i", strings: ["k": values[1], "j": values[0]])
            object.set("j", ["x": .string(values[1]), "y": .double(real)] as JSON)
            object.set("k", values[1])
            object.set("l", Double.nan)
            object.set("m", nil as Int64?)
        }
    }

    private static let strings: [[String]] = [
        ["plain", "other"],
        ["x\u{0}y\"\\", "\u{1}\u{1F}\t\n/"],
        ["é日本語😀", "\u{2028}"],
        ["", ""],
        ["plain", "other"],
    ]

    @Test func everyMessageOfAShapeIsTheTextItsTreeWrites() {
        // Given messages of one shape, whose values change or repeat from
        // one message to the next
        for (index, values) in Self.strings.enumerated() {
            for real in [0.1, 1.0 / 3, 100.0, 0.1] {
                let members = Self.message(values, Int64(index) - 2, real)

                // Then each is written as its members put in one tree
                #expect(written(members) == asTree(members))
            }
        }
    }

    @Test func longValuesAreWholeWrittenAndRepeated() {
        // Given values of many escapes, longer than a value's room, written
        // in one place by messages of one shape, the same one twice
        let values = [String(repeating: "\u{1}é\"", count: 100), String(repeating: "x", count: 1000)]
        for value in values + values {
            let members: (JSONObjectWriter) -> Void = { $0.set("a", value); $0.set("b", value.utf8.count) }

            // Then each is written whole
            #expect(written(members) == asTree(members))
        }
    }

    @Test func randomMessagesAreTheTextTheirTreesWrite() {
        // Given messages of a few random shapes (keys in byte order, some
        // left out, some objects), with random values that often repeat
        var generator = SplitMix64(seed: 26)
        let strings = ["", "r1", "r2", "é", "e\u{301}", "\u{0}\"\\", "日本", String(repeating: "\u{1}", count: 60)]
        let reals = [0.1, 0.5, 1.0 / 3, 100.0, -0.0, 1e300, 2.5e-8]
        for _ in 0..<400 {
            let picks = (0..<6).map { _ in generator.next() }
            let members: (JSONObjectWriter) -> Void = { object in
                func value(_ key: StaticString, _ pick: UInt64) {
                    switch pick % 7 {
                    case 0: object.set(key, strings[Int(pick / 7 % UInt64(strings.count))])
                    case 1: object.set(key, reals[Int(pick / 7 % UInt64(reals.count))])
                    case 2: object.set(key, Int64(pick / 7 % 5) - 2)
                    case 3: object.set(key, pick & 8 == 0)
                    case 4: object.set(key, nil as String?)
                    case 5: object.set(key, .array([.double(reals[Int(pick / 7 % UInt64(reals.count))])]) as JSON)
                    default: object.set(key, object: { $0.set("in", strings[Int(pick / 7 % UInt64(strings.count))]) })
                    }
                }
                if picks[0] % 3 != 0 { value("a", picks[1]) }
                value("b", picks[2])
                if picks[0] % 2 == 0 { value("c", picks[3]) }
                value("d", picks[4])
                if picks[0] % 5 != 0 { value("e", picks[5]) }
            }

            // Then each is what its members put in one tree write
            #expect(written(members) == asTree(members))
        }
    }

    @Test func shapesWrittenInTurnAreEachTheTextTheirTreesWrite() {
        // Given three shapes, two of them written in turn, as an answer and
        // its notice are, and then a third between them, values changing
        let shapes: [(Int64) -> (JSONObjectWriter) -> Void] = [
            { number in { $0.set("id", number); $0.set("result", object: { $0.set("receipt", "r\(number)") }) } },
            { number in { $0.set("method", "done"); $0.set("params", object: { $0.set("task", "t\(number)") }) } },
            { number in { $0.set("id", number); $0.set("result", number % 2 == 0) } },
        ]
        for (step, shape) in [0, 1, 0, 1, 2, 0, 2, 1, 1, 0].enumerated() {
            let members = shapes[shape](Int64(step))

            // Then each message is written as its members put in one tree
            #expect(written(members) == asTree(members))
        }
    }

    @Test func runsOfRepeatedValuesAndSharedTextsAreCopiedOnlyWhereTheyRepeat() {
        // Given messages of one shape that copy the text of one of two
        // shared objects, around values that repeat, change, grow and
        // shrink, in every pattern of five places
        let shared = [SharedJSON(strings: ["k": "one"]), SharedJSON(strings: ["k": "two", "l": "more"])]
        func message(_ pattern: Int, _ step: Int) -> (text: String, tree: String) {
            let values = (0..<5).map { place in pattern & (1 << place) == 0 ? "same" : String(repeating: "v", count: step % 3) + "\(step)" }
            let sharing = shared[(pattern >> 2) & 1]
            let members: @Sendable (JSONObjectWriter) -> Void = { object in
                object.set("a", values[0])
                object.set("b", shared: sharing, or: ["k": "unused"])
                object.set("c", values[1])
                object.set("d", object: { inner in
                    inner.set("e", values[2])
                    inner.set("f", Int64(values[3].utf8.count))
                })
                object.set("g", values[4])
            }
            let text = String(decoding: JSONMessage(estimate: 64, sharing: sharing, object: members).encoded, as: UTF8.self)
            var tree: [UInt8] = []
            JSONCodec.encodeObjectAsTree(into: &tree, sizeHint: 64, sharing: sharing, members)
            return (text, String(decoding: tree, as: UTF8.self))
        }
        for step in 0..<96 {
            // Then each is the text its tree writes
            let (text, tree) = message(step % 32, step)
            #expect(text == tree, "step \(step)")
        }
    }

    @Test func aPlaceWhoseValueGrowsAndShrinksIsWrittenWhole() {
        // Given values in one place of messages of one shape that go from
        // short to longer than a value's room and back, each twice, and
        // from one kind to another
        let long = String(repeating: "\u{1}é", count: 200)
        let values: [JSON] = [
            .string("ab"), .string("ab"), .string(long), .string(long), .string("a"), .string("a"), .integer(12345),
            .integer(12345), .string(long), .integer(1), .double(0.1), .double(0.1), .string("abc"),
        ]
        for value in values {
            let members: (JSONObjectWriter) -> Void = { object in
                object.set("a", value)
                object.set("b", 1)
            }

            // Then each is what its members put in one tree write, byte
            // for byte
            #expect(Array(written(members).utf8) == Array(asTree(members).utf8))
        }
    }

    @Test func objectsOfStringMembersRepeatedOrChangedAreTheTextTheirTreesWrite() {
        // Given objects of string members (a response's headers) written in
        // one place by messages of one shape: the same members again, a
        // value changed, a name or a value of the same characters in other
        // bytes, a member more, one too long to be kept, none
        let long = String(repeating: "\u{1}x\"", count: 2000)
        let objects: [[String: String]] = [
            ["Date": "1", "ETag": "\"a\"", "\u{E9}": "v"],
            ["Date": "1", "ETag": "\"a\"", "\u{E9}": "v"],
            ["Date": "2", "ETag": "\"a\"", "\u{E9}": "v"],
            ["Date": "2", "ETag": "\"a\"", "e\u{301}": "v"],
            ["Date": "2", "ETag": "\"a\"", "e\u{301}": "v", "X": "\u{E9}"],
            ["Date": "2", "ETag": "\"a\"", "e\u{301}": "v", "X": "e\u{301}"],
            ["Date": "2", "ETag": "\"a\"", "e\u{301}": "v", "X": "e\u{301}"],
            ["Long": long], ["Long": long], [:], [:], ["Date": "2"],
        ]
        for headers in objects {
            let members: (JSONObjectWriter) -> Void = { object in
                object.set("headers", strings: headers)
                object.set("id", 1)
            }

            // Then each is what its members put in one tree write, byte
            // for byte
            #expect(Array(written(members).utf8) == Array(asTree(members).utf8))
        }
    }

    @Test func arraysOfStringsRepeatedOrChangedAreTheTextTheirTreesWrite() {
        // Given arrays of strings (a notice's receipts) in one place of
        // messages of one shape: the same again, one changed, one of the
        // same characters in other bytes, one longer, one far longer than
        // a value's room, none
        let long = (0..<100).map { "r\($0)\u{1}" }
        let arrays: [[String]] = [
            ["r1"], ["r1"], ["r2"], ["\u{E9}"], ["e\u{301}"], ["e\u{301}", "r1"], ["e\u{301}", "r1"], long, long, [], [], ["r1"],
        ]
        for receipts in arrays {
            let members: (JSONObjectWriter) -> Void = { object in
                object.set("receipts", strings: receipts.lazy.map { $0 })
                object.set("task", "t1")
            }

            // Then each is what its members put in one tree write, byte
            // for byte
            #expect(Array(written(members).utf8) == Array(asTree(members).utf8))
        }
    }

    @Test func scalarsGivenAsJSONAreTheTextTheirTreesWrite() {
        // Given values given as JSON (a request's id) in one place of
        // messages of one shape, beside a real: scalars that repeat or
        // change, strings of the same characters in other bytes, reals
        // needing few digits and many, an array and an object
        let values: [JSON] = [
            .null, .null, .bool(true), .bool(false), .integer(-3), .integer(-3), .integer(7), .double(0.1), .double(0.1),
            .double(1.0 / 3), .double(0.5), .string("\u{E9}"), .string("e\u{301}"), .string(""), .string("\u{0}\""),
            .array([.integer(1), .double(0.2)]), .object(["a": .null]), .integer(7),
        ]
        for (index, value) in values.enumerated() {
            let members: (JSONObjectWriter) -> Void = { object in
                object.set("a", index % 2 == 0 ? 0.2 : 0.5)
                object.set("id", value)
            }

            // Then each is what its members put in one tree write, byte
            // for byte
            #expect(Array(written(members).utf8) == Array(asTree(members).utf8))
        }
    }

    @Test func aValueWithTheSameCharactersButOtherBytesIsWrittenAsItsBytes() {
        // Given a value, then one Swift calls equal to it with other bytes
        let composed = written { $0.set("a", "\u{E9}") }
        let decomposed = written { $0.set("a", "e\u{301}") }

        // Then each is written as its own bytes
        #expect(Array(composed.utf8) == Array(#"{"a":""#.utf8) + [0xC3, 0xA9] + Array(#""}"#.utf8))
        #expect(Array(decomposed.utf8) == Array(#"{"a":"e"#.utf8) + [0xCC, 0x81] + Array(#""}"#.utf8))
    }

    @Test func aRealRepeatedIsWrittenWithTheDigitsOfItsMessage() {
        // Given a real written beside one needing few digits, then beside
        // one needing 17 (a power of two), then few again
        let few = written { $0.set("a", 0.1); $0.set("b", 0.2) }
        let many = written { $0.set("a", 0.1); $0.set("b", 0.5) }
        let fewAgain = written { $0.set("a", 0.1); $0.set("b", 0.2) }

        // Then each message writes it with the digits its reals need
        #expect(few == #"{"a":0.1,"b":0.2}"#)
        #expect(many == #"{"a":0.10000000000000001,"b":0.5}"#)
        #expect(fewAgain == few)
    }

    @Test func aKeySetTwiceIsWrittenAsTheTreeHasIt() {
        // Given a message setting a key twice, written twice
        let members: (JSONObjectWriter) -> Void = { object in
            object.set("a", 1)
            object.set("b", "x")
            object.set("a", 2)
        }

        // Then it is what one tree writes each time: the later value in
        // the earlier place
        #expect(written(members) == #"{"a":2,"b":"x"}"#)
        #expect(written(members) == asTree(members))
    }

    @Test func aValueEqualToThePlaceholderIsWrittenAsItself() {
        // Given strings equal to what the shape's text holds in a value's place
        let forged = String(decoding: SharedJSON.placeholder + Array("t0".utf8), as: UTF8.self)
        let members: (JSONObjectWriter) -> Void = { object in
            object.set("a", forged)
            object.set("b", forged + "\"")
        }

        // Then they are written as they are
        #expect(written(members) == #"{"a":"\#(forged)","b":"\#(forged)\""}"#)
    }

    @Test func aMessageWrittenWhileAnotherIsIsWhole() {
        // Given a message whose closure writes another message
        var inner = ""
        let outer = written { object in
            object.set("a", "outer")
            inner = written { $0.set("b", "inner") }
            object.set("c", 1)
        }

        // Then both are whole
        #expect(outer == #"{"a":"outer","c":1}"#)
        #expect(inner == #"{"b":"inner"}"#)
    }

    @Test func threadsWritingAtOnceWriteTheirOwnValues() async {
        // Given many tasks writing messages of one shape with their own values
        let results = await withTaskGroup(of: (Int, [String]).self) { group in
            for task in 0..<8 {
                group.addTask {
                    (task, (0..<200).map { index in written { $0.set("task", task); $0.set("value", "v\(index)") } })
                }
            }
            return await group.reduce(into: [Int: [String]]()) { $0[$1.0] = $1.1 }
        }

        // Then each message has its own
        for (task, texts) in results {
            for (index, text) in texts.enumerated() {
                #expect(text == #"{"task":\#(task),"value":"v\#(index)"}"#)
            }
        }
    }
}
