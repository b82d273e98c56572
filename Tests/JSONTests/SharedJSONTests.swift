import JSON
import Testing

@Suite(.timeLimit(.minutes(1)))
struct SharedJSONTests {
    private let headers = ["b": "2", "B": "1", "a": "3\"", "é": "4"]

    /// The text of the message `members` writes, made under `shared`'s lock.
    private func written(sharing shared: SharedJSON, _ members: @escaping @Sendable (JSONObjectWriter) -> Void) -> String {
        String(decoding: JSONMessage(estimate: 64, sharing: shared, object: members).encoded, as: UTF8.self)
    }

    @Test func aSharedObjectIsWrittenAsItsMembersAre() {
        // Given a shared object, and a message that writes it by reference
        let shared = SharedJSON(strings: headers)
        let headers = headers
        let text = written(sharing: shared) { object in
            object.set("h", shared: shared, or: [:])
            object.set("n", 1)
        }

        // Then the text is the one its members make, in byte order
        #expect(text == #"{"h":{"B":"1","a":"3\"","b":"2","é":"4"},"n":1}"#)
        #expect(text == String(decoding: JSONCodec.encode(["h": .object(headers.mapValues(JSON.string)), "n": 1]), as: UTF8.self))
    }

    @Test func everyMessageSharingTheObjectWritesIt() {
        // Given one shared object written by many messages, nested too
        let shared = SharedJSON(strings: ["k": "v"])
        let texts = (0..<100).map { index in
            written(sharing: shared) { object in
                object.set("i", index)
                object.set("o", object: { $0.set("h", shared: shared, or: [:]) })
            }
        }

        // Then each message has it whole: the messages freed before did
        // not free it
        for (index, text) in texts.enumerated() {
            #expect(text == #"{"i":\#(index),"o":{"h":{"k":"v"}}}"#)
        }
    }

    @Test func withoutItsLockTheMembersGivenAreWritten() {
        // Given a message made under no lock, or under another object's
        let shared = SharedJSON(strings: ["k": "shared"])
        let other = SharedJSON(strings: ["k": "other"])
        var alone: [UInt8] = []
        JSONCodec.encodeObject(into: &alone) { $0.set("h", shared: shared, or: ["k": "given"]) }
        let underOther = written(sharing: other) { $0.set("h", shared: shared, or: ["k": "given"]) }

        // Then the members given are written, never a tree it does not hold
        #expect(String(decoding: alone, as: UTF8.self) == #"{"h":{"k":"given"}}"#)
        #expect(underOther == #"{"h":{"k":"given"}}"#)
    }
}
