import JSON
import Testing

/// The text of the object `members` writes.
private func written(_ members: (JSONObjectWriter) -> Void) -> String {
    var text: [UInt8] = []
    JSONCodec.encodeObject(into: &text, members)
    return String(decoding: text, as: UTF8.self)
}

@Suite(.timeLimit(.minutes(1)))
struct JSONObjectWriterTests {
    @Test func writesWhatEncodeWritesForTheSameValue() {
        // Given members of every kind, written in byte order
        let text = written { object in
            object.set("a", "x\u{0}y\"")
            object.set("b", Int64(-7))
            object.set("c", 0.1)
            object.set("d", true)
            object.set("e", nil as String?)
            object.set("f", nil as Double?)
            object.set("g", object: { inner in
                inner.set("h", strings: ["b": "2", "B": "1", "a": "3", "é": "4"])
                inner.set("i", strings: ["r1", "r2"])
            })
            object.set("j", ["k": [1, nil]] as JSON)
            object.set("l", Double.infinity)
        }

        // Then the text is the one the same value encodes to
        let value: JSON = [
            "a": "x\u{0}y\"", "b": -7, "c": 0.1, "d": true, "e": nil, "f": nil,
            "g": ["h": ["b": "2", "B": "1", "a": "3", "é": "4"], "i": ["r1", "r2"]],
            "j": ["k": [1, nil]], "l": nil,
        ]
        #expect(text == String(decoding: JSONCodec.encode(value), as: UTF8.self))
        #expect(text.contains(#""h":{"B":"1","a":"3","b":"2","é":"4"}"#))
    }

    @Test func realsGetTheDigitsTheLongestNeeds() {
        #expect(written { $0.set("a", 0.5); $0.set("b", 1.0 / 3) } == #"{"a":0.5,"b":0.33333333333333331}"#)
        #expect(written { $0.set("a", 100.0) } == #"{"a":100.0}"#)
    }

    @Test func aValueMadeByTheWriterIsTheValueItWrites() {
        let value = JSON(object: { object in
            object.set("n", 3)
            object.set("s", strings: ["x": "y"])
        })
        #expect(value == ["n": 3, "s": ["x": "y"]])
    }

    @Test func textIsAppendedAfterWhatTheBufferHolds() {
        var text = Array("head ".utf8)
        JSONCodec.encodeObject(into: &text) { $0.set("a", 1) }
        JSONCodec.encode([true], into: &text)
        #expect(String(decoding: text, as: UTF8.self) == #"head {"a":1}[true]"#)
    }

    @Test(arguments: [0, 10, 100, 100_000])
    func theTextIsWholeWhateverTheHint(sizeHint: Int) {
        // Given text longer than some hints and shorter than others
        let long = String(repeating: "é\"x", count: 300)
        var text = Array("[".utf8)

        // When it is written with the hint
        JSONCodec.encodeObject(into: &text, sizeHint: sizeHint) { $0.set("a", long) }

        // Then the text is whole, after what was there, with nothing left over
        #expect(text == Array("[".utf8) + JSONCodec.encode(["a": .string(long)]))
    }

    @Test func aMessageEncodesAsItsValueAndEstimatesItsSize() {
        let value: JSON = ["id": 1, "result": ["a": "b"]]
        let message = JSONMessage(value)
        #expect(message.encoded == JSONCodec.encode(value))
        #expect(message.estimate == value.estimatedEncodedCount)
    }
}
