@testable import JSON
import Testing

@Suite(.timeLimit(.minutes(1)))
struct SharedJSONTests {
    private let headers = ["b": "2", "B": "1", "a": "3\"", "é": "4"]

    /// The text of the message `members` writes, which may copy `shared`'s.
    private func written(sharing shared: SharedJSON, _ members: @escaping @Sendable (JSONObjectWriter) -> Void) -> String {
        String(decoding: JSONMessage(estimate: 64, sharing: shared, object: members).encoded, as: UTF8.self)
    }

    /// The text of the same message written through one jansson tree, as a
    /// message is when its shape has no template.
    private func writtenAsTree(sharing shared: SharedJSON, _ members: @escaping @Sendable (JSONObjectWriter) -> Void) -> String {
        var text: [UInt8] = []
        JSONCodec.encodeObjectAsTree(into: &text, sizeHint: 64, sharing: shared, members)
        return String(decoding: text, as: UTF8.self)
    }

    @Test func aSharedObjectIsWrittenAsItsMembersAre() {
        // Given a shared object, and a message that copies its text
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

    @Test func aMessageNotMadeWithItWritesTheMembersGiven() {
        // Given a message made with no shared object, or with another one
        let shared = SharedJSON(strings: ["k": "shared"])
        let other = SharedJSON(strings: ["k": "other"])
        var alone: [UInt8] = []
        JSONCodec.encodeObject(into: &alone) { $0.set("h", shared: shared, or: ["k": "given"]) }
        let underOther = written(sharing: other) { $0.set("h", shared: shared, or: ["k": "given"]) }

        // Then the members given are written, never text it was not made with
        #expect(String(decoding: alone, as: UTF8.self) == #"{"h":{"k":"given"}}"#)
        #expect(underOther == #"{"h":{"k":"given"}}"#)
    }

    /// Header names and values a hostile origin may send, and the empty ones.
    static let hostile: [[String: String]] = [
        [:],
        ["": ""],
        ["q\"uote": "a\"b\"", "back\\slash": "\\", "/": "/\\/"],
        ["ctl\u{1}": "\u{0}\u{1}\u{1F}\u{7F}\t\r\n", "nul": "a\u{0}b"],
        ["é": "日本語", "emoji": "😀\u{10FFFF}", "x": "\u{2028}\u{2029}"],
        ["a": "1", "A": "2", "aa": "", "b": "{\"x\":[1]}", "z": "}"],
    ]

    /// Writes members around a shared object at each depth and place one
    /// may stand, and after empty ones.
    static func message(_ headers: SharedJSON, or members: [String: String], _ index: Int) -> @Sendable (JSONObjectWriter) -> Void {
        { object in
            object.set("a", "x\"\u{1}y")
            object.set("b", object: { params in
                params.set("c", object: { outcome in
                    outcome.set("d", 0.25)
                    outcome.set("headers", shared: headers, or: members)
                    outcome.set("i", object: { _ in })
                    outcome.set("j", nil as String?)
                })
                params.set("e", object: { $0.set("only", shared: headers, or: members) })
                params.set("f", index)
            })
            object.set("first", object: { $0.set("h", shared: headers, or: members); $0.set("k", true) })
            object.set("g", shared: headers, or: members)
        }
    }

    @Test(arguments: hostile.indices)
    func aMessageCopyingTheTextIsTheOneEncodingWrites(_ index: Int) throws {
        // Given hostile headers as a shared object, and a message copying
        // its text in many places
        let members = Self.hostile[index]
        let shared = SharedJSON(strings: members)
        // (given no members of its own, so only the copied text can write them)
        let copied = JSONMessage(estimate: 64, sharing: shared, object: Self.message(shared, or: [:], index)).encoded

        // When the same members are encoded with no text copied
        var plain: [UInt8] = []
        JSONCodec.encodeObject(into: &plain, Self.message(shared, or: members, index))

        // Then the texts are the same bytes, and parse back to the same value
        #expect(copied == plain)
        let value = try JSONCodec.decode(copied)
        #expect(value == (try JSONCodec.decode(plain)))
        let headers = JSON.object(members.mapValues(JSON.string))
        guard case .object(let top) = value, case .object(let params)? = top["b"], case .object(let outcome)? = params["c"] else {
            Issue.record("not the message's shape: \(value)")
            return
        }
        #expect(outcome["headers"] == headers)
        #expect(top["g"] == headers)
        #expect(outcome["i"] == .object([:]))
    }

    @Test func aValueEqualToThePlaceholderIsWrittenAsItself() {
        // Given messages holding a string equal to the placeholder the
        // shared text goes in place of, or ending with it, beside the
        // shared object (which only the copied text can write)
        let shared = SharedJSON(strings: ["k": "v"])
        let forged = String(decoding: SharedJSON.placeholder, as: UTF8.self)
        let equal: @Sendable (JSONObjectWriter) -> Void = { object in
            object.set("a", forged)
            object.set("h", shared: shared, or: ["given": "members"])
        }
        let ending: @Sendable (JSONObjectWriter) -> Void = { object in
            object.set("h", shared: shared, or: ["given": "members"])
            object.set("z", "\"" + forged)
        }

        // Then the strings are kept: through a template the text is copied
        // where the shape puts it; through a tree, a message holding the
        // placeholder as a value is written again with its members, one
        // holding it after an escaped quote copies the text
        #expect(written(sharing: shared, equal) == #"{"a":"\#(forged)","h":{"k":"v"}}"#)
        #expect(writtenAsTree(sharing: shared, equal) == #"{"a":"\#(forged)","h":{"given":"members"}}"#)
        for text in [written(sharing: shared, ending), writtenAsTree(sharing: shared, ending)] {
            #expect(text == #"{"h":{"k":"v"},"z":"\"\#(forged)"}"#)
        }
    }

    /// The members of a message's object from `m` on: strings, hostile ones
    /// too, a nested object and one of shared headers, an integer, a null.
    static func run(_ headers: SharedJSON?, _ members: [String: String], _ index: Int) -> (JSONObjectWriter) -> Void {
        { object in
            object.set("m", members.keys.sorted().first ?? "")
            object.set("n", shared: headers, or: members)
            object.set("o", object: { $0.set("p", members.values.sorted().last ?? "") })
            object.set("q", index)
            object.set("r", nil as String?)
        }
    }

    @Test(arguments: hostile.indices)
    func aMessageCopyingARunOfMembersIsTheOneEncodingWrites(_ index: Int) throws {
        // Given a run of members made from hostile strings, and messages
        // copying it after members of their own (a real among them)
        let members = Self.hostile[index]
        let run = try #require(SharedJSON(membersFrom: "m", sizeHint: 64, Self.run(nil, members, index)))
        let message: @Sendable (SharedJSON?) -> @Sendable (JSONObjectWriter) -> Void = { shared in
            { object in
                object.set("a", "x\"\u{1}y")
                object.set("b", object: { outcome in
                    outcome.set("d", 0.1)
                    outcome.set("m", sharedMembers: shared, or: Self.run(nil, members, index))
                })
                object.set("c", 2.5)
            }
        }
        let copied = JSONMessage(estimate: 64, sharing: run, object: message(run)).encoded

        // When the same members are encoded with no text copied
        var plain: [UInt8] = []
        JSONCodec.encodeObject(into: &plain, message(nil))

        // Then the texts are the same bytes
        #expect(copied == plain)
        #expect(try JSONCodec.decode(copied) == (try JSONCodec.decode(plain)))
    }

    @Test func aRunMadeWithSharedHeadersHoldsTheirText() throws {
        // Given a run made with a shared headers object among its members
        let headers = SharedJSON(strings: ["k": "v"])
        let run = try #require(SharedJSON(membersFrom: "m", sizeHint: 64, Self.run(headers, ["k": "v"], 7)))

        // When a message copies it
        let text = written(sharing: run) { $0.set("m", sharedMembers: run, or: Self.run(headers, [:], 0)) }

        // Then the headers are written whole, as the run was made apart
        // from any message
        #expect(text == #"{"m":"k","n":{"k":"v"},"o":{"p":"v"},"q":7,"r":null}"#)
    }

    @Test func aRunWithARealOrNotStartingWithItsKeyIsNotMade() {
        // Given members with a real among them, or starting with another key
        let real = SharedJSON(membersFrom: "m", sizeHint: 64) { object in
            object.set("m", "x")
            object.set("n", 0.1)
        }
        let other = SharedJSON(membersFrom: "m", sizeHint: 64) { $0.set("l", "x") }
        let none = SharedJSON(membersFrom: "m", sizeHint: 64) { _ in }

        // Then none is made: a real's digits depend on the whole message's
        #expect(real == nil)
        #expect(other == nil)
        #expect(none == nil)
    }

    @Test func aRunEqualToThePlaceholderIsWrittenAsItsMembers() throws {
        // Given a message holding a string equal to the placeholder beside a run
        let run = try #require(SharedJSON(membersFrom: "m", sizeHint: 64) { $0.set("m", "shared") })
        let forged = String(decoding: SharedJSON.placeholder, as: UTF8.self)
        let message: @Sendable (JSONObjectWriter) -> Void = { object in
            object.set("a", forged)
            object.set("m", sharedMembers: run, or: { $0.set("m", "given") })
        }

        // Then the string is kept: through a template the run is copied,
        // through a tree the message is written with its members
        #expect(written(sharing: run, message) == #"{"a":"\#(forged)","m":"shared"}"#)
        #expect(writtenAsTree(sharing: run, message) == #"{"a":"\#(forged)","m":"given"}"#)
    }

    @Test func aMessageCopiesTwoRunsWithItsOwnMembersBetween() throws {
        // Given two runs in one text, and a message writing a member of its
        // own between them and after them
        let made = SharedJSON(
            runs: [
                ("b", { $0.set("b", "x\"y"); $0.set("c", nil as String?) }),
                ("e", { $0.set("e", 5); $0.set("f", object: { $0.set("g", "é") }) }),
            ], sizeHint: 64)
        let runs = try #require(made)
        let message: @Sendable (SharedJSON?) -> @Sendable (JSONObjectWriter) -> Void = { shared in
            { object in
                object.set("a", 0.25)
                object.set("b", sharedMembers: shared, or: { $0.set("b", "x\"y"); $0.set("c", nil as String?) })
                object.set("d", "own")
                object.set("e", sharedMembers: shared, or: { $0.set("e", 5); $0.set("f", object: { $0.set("g", "é") }) })
                object.set("h", true)
            }
        }

        // When it copies them, and when it writes the members plainly
        let copied = written(sharing: runs, message(runs))
        var plain: [UInt8] = []
        JSONCodec.encodeObject(into: &plain, message(nil))

        // Then the texts are the same, and count both runs and their keys
        #expect(copied == #"{"a":0.25,"b":"x\"y","c":null,"d":"own","e":5,"f":{"g":"é"},"h":true}"#)
        #expect(copied == String(decoding: plain, as: UTF8.self))
        #expect(runs.byteCount == #"b"x\"y","c":null"#.utf8.count + #"e5,"f":{"g":"é"}"#.utf8.count)
    }

    @Test(arguments: ["-1", "-2", "-x", "x"])
    func aStringStartingWithThePlaceholderMakesTheMessageWriteItsMembers(_ suffix: String) throws {
        // Given a message of two runs holding a string that starts with the
        // placeholder: another run's, one of no run, or none
        let made = SharedJSON(runs: [("m", { $0.set("m", "a") }), ("p", { $0.set("p", "b") })], sizeHint: 16)
        let runs = try #require(made)
        let forged = String(decoding: SharedJSON.placeholder, as: UTF8.self) + suffix
        let message: @Sendable (JSONObjectWriter) -> Void = { object in
            object.set("m", sharedMembers: runs, or: { $0.set("m", "given") })
            object.set("n", forged)
            object.set("p", sharedMembers: runs, or: { $0.set("p", "given") })
        }

        // Then the string is kept: through a template the runs are copied,
        // through a tree the message is written with its own members
        #expect(written(sharing: runs, message) == #"{"m":"a","n":"\#(forged)","p":"b"}"#)
        #expect(writtenAsTree(sharing: runs, message) == #"{"m":"given","n":"\#(forged)","p":"given"}"#)
    }

    @Test func aRunIsNotCopiedForAnObjectNorAnObjectForARun() throws {
        // Given an object's text and a run's
        let object = SharedJSON(strings: ["k": "shared"])
        let run = try #require(SharedJSON(membersFrom: "h", sizeHint: 16) { $0.set("h", "shared") })

        // When messages ask for the other kind
        let runAsObject = written(sharing: run) { $0.set("h", shared: run, or: ["k": "given"]) }
        let objectAsRun = written(sharing: object) { $0.set("h", sharedMembers: object, or: { $0.set("h", "given") }) }

        // Then they write the members given
        #expect(runAsObject == #"{"h":{"k":"given"}}"#)
        #expect(objectAsRun == #"{"h":"given"}"#)
    }
}
