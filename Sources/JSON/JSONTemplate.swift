import CJanssonShim
import CLibjansson
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The members a `JSONObjectWriter` wrote for one message, in order: the
/// message's shape (its keys and nesting) apart from its values.
///
/// A message's shape comes from the code that writes it (keys are
/// `StaticString`s), so a process writes few of them, each many times:
/// jansson writes each shape once, with a placeholder for every value
/// (`JSONTemplate`), and each message copies that text around the text
/// jansson writes for each of its values. Keys and structure cost nothing
/// after the first message of a shape, and a value equal to the one the
/// same place held in the shape's last message copies that text too.
final class JSONRecording {
    /// A slot's value: scalars kept as they are, so that an equal one can
    /// copy the text made for it; others as the jansson tree the message
    /// dumps, or as a shared text.
    enum Value {
        case string(String)
        case integer(Int64)
        case real(Double)
        case bool(Bool)
        case null
        /// An object of string members (a response's headers), kept as
        /// they are, so that an object of the same members can copy the
        /// text made for it.
        case strings([String: String])
        /// An array of strings (a notice's receipts), kept as they are, so
        /// that the same strings again can copy the text made for them.
        case stringArray([String])
        /// A tree the recording holds a reference to.
        case tree(UnsafeMutablePointer<json_t>)
        /// The text at `index` of `shared`'s texts.
        case text(SharedJSON, index: Int)
    }

    /// Each member's event (`Event`), each with its key; a value's event
    /// has a slot in `values`.
    ///
    /// Properties of one thread's, read and written many times a
    /// message: not checked for exclusive access at run time.
    @exclusivity(unchecked) private(set) var events: [Int] = []
    @exclusivity(unchecked) private(set) var keys: [StaticString] = []
    @exclusivity(unchecked) private(set) var values: [Value] = []
    /// Of `events`, to find the shape's template.
    @exclusivity(unchecked) private(set) var hash = 0
    /// The significant digits the message's reals need.
    @exclusivity(unchecked) var precision = 1
    /// The `SharedJSON` the message may copy text of.
    @exclusivity(unchecked) var owner: ObjectIdentifier?
    /// The last real and its digits: a message's reals repeat.
    @exclusivity(unchecked) private var lastReal: (bits: UInt64, digits: Int) = (0, 1)

    enum Event {
        static let value = 0
        static let begin = 1
        static let end = 2
    }

    init() {
        events.reserveCapacity(64)
        keys.reserveCapacity(64)
        values.reserveCapacity(64)
    }

    func value(_ key: StaticString, _ value: Value) {
        event(key, Event.value)
        values.append(value)
    }

    func real(_ key: StaticString, _ number: Double) {
        guard number.isFinite else { return value(key, .null) }
        let digits: Int
        if number.bitPattern == lastReal.bits {
            digits = lastReal.digits
        } else {
            digits = JSONCodec.significantDigits(number)
            lastReal = (number.bitPattern, digits)
        }
        precision = max(precision, digits)
        value(key, .real(number))
    }

    func begin(_ key: StaticString) {
        event(key, Event.begin)
    }

    func end() {
        event("", Event.end)
    }

    private func event(_ key: StaticString, _ kind: Int) {
        // A key is known by where its text lies (or, for one held as a
        // scalar, by the scalar): the same key of the same code.
        let identity =
            kind == Event.end
            ? 0
            : key.hasPointerRepresentation
                ? Int(bitPattern: UInt(bitPattern: key.utf8Start)) : (1 << 59) | Int(key.unicodeScalar.value)
        let event = identity << 2 | kind
        events.append(event)
        keys.append(key)
        hash = (hash ^ event) &* 0x100_0000_01b3
    }

    /// Empties the recording for the next message, releasing the trees
    /// it holds.
    func reset() {
        for case .tree(let tree) in values { courier_json_decref(tree) }
        events.removeAll(keepingCapacity: true)
        keys.removeAll(keepingCapacity: true)
        values.removeAll(keepingCapacity: true)
        hash = 0
        precision = 1
        owner = nil
    }
}

/// jansson's text of a message shape (`JSONRecording`), with a placeholder
/// where each value goes: the text between them, and for each value the
/// text jansson wrote for it in the last message.
final class JSONTemplate {
    let events: [Int]
    /// The text, and the pieces of it around the values: one more than the
    /// values. Nil when jansson does not write every value where the
    /// shape puts it (a key set twice in an object): such a message is
    /// written as a tree.
    private let text: [UInt8]
    private let pieces: [Range<Int>]?
    /// The text of the last message of this shape, when it was short
    /// enough to keep (`keptMessage`); empty when it was not.
    @exclusivity(unchecked) private var lastMessage: [UInt8] = []
    /// Where each slot's value lies in `lastMessage`.
    @exclusivity(unchecked) private var lastRanges: [Range<Int>]
    /// The last value of each slot and the digits of its message's reals;
    /// nil for a value that is written anew each time (a tree, a long
    /// string). A run of values equal to the last message's, with the
    /// pieces of the shape between them, is copied from `lastMessage` in
    /// one piece.
    @exclusivity(unchecked) private var lastValues: [JSONRecording.Value?]
    @exclusivity(unchecked) private var lastPrecisions: [Int]
    /// Scratch room for a value written anew (`scratchCount` bytes), then
    /// room for its text (`room` bytes): the template's own, as it is its
    /// thread's alone, so that writing a value allocates nothing.
    private let scratch: UnsafeMutableRawPointer

    var isWritable: Bool { pieces != nil }

    init(_ recording: JSONRecording) {
        events = recording.events
        let (text, pieces) = Self.make(recording)
        self.text = text
        self.pieces = pieces
        lastValues = Array(repeating: nil, count: recording.values.count)
        lastPrecisions = Array(repeating: 0, count: recording.values.count)
        lastRanges = Array(repeating: 0..<0, count: recording.values.count)
        scratch = UnsafeMutableRawPointer.allocate(byteCount: Self.scratchCount + Self.room, alignment: 16)
    }

    deinit {
        scratch.deallocate()
    }

    /// The string jansson writes where the value in slot `index` goes.
    private static func placeholder(_ index: Int) -> [UInt8] {
        SharedJSON.placeholder + Array("t\(index)".utf8)
    }

    private static func make(_ recording: JSONRecording) -> (text: [UInt8], pieces: [Range<Int>]?) {
        let root = json_object()!
        var objects = [root]
        var slot = 0
        for (event, key) in zip(recording.events, recording.keys) {
            switch event & 3 {
            case JSONRecording.Event.value:
                let placeholder = placeholder(slot).withUnsafeBufferPointer { placeholder in
                    placeholder.withMemoryRebound(to: CChar.self) { json_stringn_nocheck($0.baseAddress, $0.count) }
                }
                put(objects[objects.count - 1], key, placeholder)
                slot += 1
            case JSONRecording.Event.begin:
                let child = json_object()!
                // The parent holds the child's one reference, and outlives it.
                put(objects[objects.count - 1], key, child)
                objects.append(child)
            default:
                objects.removeLast()
            }
        }
        var text: [UInt8] = []
        JSONCodec.dump(root, precision: 1, into: &text, sizeHint: 64 + 24 * recording.events.count)
        // Each placeholder once, in order, quoted as a value; none elsewhere.
        var pieces: [Range<Int>] = []
        var start = 0
        for index in 0..<slot {
            let quoted = [UInt8(ascii: "\"")] + placeholder(index) + [UInt8(ascii: "\"")]
            guard let found = find(quoted, in: text, within: start..<text.count) else { return (text, nil) }
            pieces.append(start..<found)
            start = found + quoted.count
        }
        pieces.append(start..<text.count)
        for piece in pieces where find(SharedJSON.placeholder, in: text, within: piece) != nil {
            return (text, nil)
        }
        return (text, pieces)
    }

    /// Where `needle` first lies in `text` within `range`, found by libc's
    /// memmem: the standard library's `firstRange(of:)` steps through the
    /// bytes generically, at a cost of millions of instructions for a
    /// process's first messages.
    private static func find(_ needle: [UInt8], in text: [UInt8], within range: Range<Int>) -> Int? {
        text.withUnsafeBytes { text in
            needle.withUnsafeBytes { needle in
                guard let base = text.baseAddress, let wanted = needle.baseAddress, range.count >= needle.count,
                    let found = courier_memmem(base + range.lowerBound, range.count, wanted, needle.count)
                else { return nil }
                return base.distance(to: found)
            }
        }
    }

    private static func put(_ object: UnsafeMutablePointer<json_t>, _ key: StaticString, _ value: UnsafeMutablePointer<json_t>?) {
        key.withUTF8Buffer { key in
            key.baseAddress!.withMemoryRebound(to: CChar.self, capacity: key.count) { chars in
                _ = json_object_setn_new_nocheck(object, chars, key.count, value)
            }
        }
    }

    /// Appends the message `recording` holds, whose shape this is, to
    /// `text`; the message is about `sizeHint` bytes long. Each value
    /// equal to the one its slot held in the last message is copied from
    /// that message's text together with its neighbours that are equal
    /// too, and the pieces of the shape between them: in the messages of
    /// one kind (a hit's answer, its `download/finished`), most values are
    /// the same each time, and they go in a few copies.
    func write(_ recording: JSONRecording, into text: inout [UInt8], sizeHint: Int) {
        guard let pieces else { return }
        let precision = recording.precision
        let start = text.count
        let hasLast = !lastMessage.isEmpty
        // Where, in the last message, the run being copied starts, and how
        // far the run moves in this one.
        var run: Int?
        var shift = 0
        // Where the last message's value before the current slot ends.
        var lastEnd = 0
        // Values and pieces read where they lie, through their buffers:
        // iterating the list would copy each value, retaining what it holds.
        self.text.withUnsafeBufferPointer { shape in
            pieces.withUnsafeBufferPointer { pieces in
                recording.values.withUnsafeBufferPointer { values in
                    for slot in values.indices {
                        let pieceStart = lastEnd
                        let last = lastRanges[slot]
                        lastEnd = last.upperBound
                        if hasLast, isUnchanged(values[slot], slot: slot, precision: precision) {
                            if run == nil {
                                run = pieceStart
                                shift = text.count - start - pieceStart
                            }
                            lastRanges[slot] = (last.lowerBound + shift)..<(last.upperBound + shift)
                            continue
                        }
                        if let from = run {
                            copyLast(from..<pieceStart, into: &text)
                            run = nil
                        }
                        text.append(contentsOf: UnsafeBufferPointer(rebasing: shape[pieces[slot]]))
                        let valueStart = text.count - start
                        write(values[slot], slot: slot, precision: precision, into: &text, sizeHint: sizeHint)
                        lastRanges[slot] = valueStart..<(text.count - start)
                    }
                }
                if let from = run {
                    copyLast(from..<lastMessage.count, into: &text)
                } else {
                    text.append(contentsOf: UnsafeBufferPointer(rebasing: shape[pieces[pieces.count - 1]]))
                }
            }
        }
        lastMessage.removeAll(keepingCapacity: text.count - start <= Self.keptMessage)
        if text.count - start <= Self.keptMessage { lastMessage.append(contentsOf: text[start...]) }
    }

    /// Appends the bytes `range` of the last message.
    private func copyLast(_ range: Range<Int>, into text: inout [UInt8]) {
        lastMessage.withUnsafeBufferPointer { last in text.append(contentsOf: UnsafeBufferPointer(rebasing: last[range])) }
    }

    /// Whether `value` is the value slot `slot` held in the last message,
    /// whose text is then its text (a real's digits as well).
    private func isUnchanged(_ value: JSONRecording.Value, slot: Int, precision: Int) -> Bool {
        switch value {
        case .text(let shared, let index):
            if case .text(let other, let otherIndex)? = lastValues[slot] { return other === shared && otherIndex == index }
        case .tree:
            return false
        case .string(let string):
            if case .string(let other)? = lastValues[slot] { return Self.sameBytes(string, other) }
        case .integer(let number):
            if case .integer(let other)? = lastValues[slot] { return number == other }
        case .real(let number):
            if case .real(let other)? = lastValues[slot] {
                return number.bitPattern == other.bitPattern && lastPrecisions[slot] == precision
            }
        case .bool(let flag):
            if case .bool(let other)? = lastValues[slot] { return flag == other }
        case .null:
            if case .null? = lastValues[slot] { return true }
        case .stringArray(let elements):
            if case .stringArray(let other)? = lastValues[slot] { return Self.sameElements(elements, other) }
        case .strings(let members):
            if case .strings(let other)? = lastValues[slot] { return Self.sameMembers(members, other) }
        }
        return false
    }

    /// Appends the text of `value`, in slot `slot` of a message about
    /// `messageSize` bytes long whose reals take `precision` digits, and
    /// keeps the value as the slot's last, unless it is one not to
    /// compare (a tree) or not to hold (a long value).
    private func write(
        _ value: JSONRecording.Value, slot: Int, precision: Int, into text: inout [UInt8], sizeHint messageSize: Int
    ) {
        switch value {
        case .text(let shared, let index):
            text.append(contentsOf: shared.texts[index])
            return keep(value, precision: precision, slot: slot)
        case .tree(let made):
            // The recording keeps its reference, the dump takes this one.
            // As long as the message at most, as its text is part of it.
            forget(slot)
            return JSONCodec.dump(courier_json_incref(made)!, precision: precision, into: &text, sizeHint: messageSize)
        case .string(let string):
            if string.utf8.count > Self.room - 2 {
                // A string longer than the room goes straight onto the
                // text, with room for the message's estimate, which counts
                // it. Not kept: a long value (a body's text) is not held
                // past its message.
                forget(slot)
                guard let tree = JSONCodec.withChars(string, { chars, count in json_stringn_nocheck(chars, count) }) else { return }
                return JSONCodec.dump(tree, precision: precision, into: &text, sizeHint: max(string.utf8.count + 2, messageSize))
            }
        case .strings(let members):
            // Longer than a scalar's room, and written whole: dumped
            // straight onto the text, and kept when it is short.
            let start = text.count
            JSONCodec.dump(
                JSONObjectWriter.stringObject(members), precision: precision, into: &text,
                sizeHint: Self.encodedCount(members))
            if text.count - start <= Self.keptObject {
                keep(value, precision: precision, slot: slot)
            } else {
                forget(slot)
            }
            return
        case .integer, .real, .bool, .null, .stringArray:
            break
        }
        // A short value: its tree, and what jansson takes to dump it, are
        // made and dropped here, in the template's scratch room; jansson
        // writes its text into the template's room for it, whence it is
        // appended.
        let began = courier_json_scratch_begin(scratch, Self.scratchCount)
        defer { courier_json_scratch_end(began, scratch) }
        guard let tree = Self.tree(of: value) else { return forget(slot) }
        let room = (scratch + Self.scratchCount).assumingMemoryBound(to: CChar.self)
        let size = json_dumpb(tree, room, Self.room, JSONCodec.flags(precision: precision))
        guard size <= Self.room else {
            forget(slot)
            return JSONCodec.dump(tree, precision: precision, into: &text, sizeHint: Self.room)
        }
        courier_json_decref(tree)
        text.append(contentsOf: UnsafeRawBufferPointer(start: room, count: size))
        keep(value, precision: precision, slot: slot)
    }

    /// A new tree of the scalar `value`; nil for any other, or when
    /// jansson finds no memory for it (the value is then left out, as
    /// jansson leaves it out of a tree).
    private static func tree(of value: JSONRecording.Value) -> UnsafeMutablePointer<json_t>? {
        switch value {
        case .string(let string): JSONCodec.withChars(string) { chars, count in json_stringn_nocheck(chars, count) }
        case .integer(let number): json_integer(number)
        case .real(let number): json_real(number) ?? json_null()
        case .bool(let flag): flag ? json_true() : json_false()
        case .null: json_null()
        case .stringArray(let elements):
            json_array().map { array in
                for element in elements {
                    json_array_append_new(array, JSONCodec.withChars(element) { chars, count in json_stringn_nocheck(chars, count) })
                }
                return array
            }
        case .strings, .tree, .text: nil
        }
    }

    /// Keeps `value` as the last of slot `slot`.
    private func keep(_ value: JSONRecording.Value, precision: Int, slot: Int) {
        lastValues[slot] = value
        lastPrecisions[slot] = precision
    }

    /// Keeps no value for slot `slot`: its next one is written anew.
    private func forget(_ slot: Int) {
        lastValues[slot] = nil
    }

    /// Room for a short value's text: any integer or real, and strings
    /// that need few escapes.
    private static let room = 256

    /// Scratch room for a short value's tree and its dump: the value, a
    /// copy of a string of up to `room` bytes, and the table of the
    /// values the dump is inside.
    private static let scratchCount = 1024

    /// The longest text of an object of string members kept for the next
    /// message: a response's headers, not a value that would hold memory.
    private static let keptObject = 4096

    /// The longest message whose text is kept for the next: one with
    /// headers, not one with a body's text or base64.
    private static let keptMessage = 8192

    /// About how many bytes the text of the object of `members` takes:
    /// exact but for escapes.
    private static func encodedCount(_ members: [String: String]) -> Int {
        var count = 2 + max(members.count - 1, 0)
        for (name, value) in members { count += name.utf8.count + value.utf8.count + 5 }
        return count
    }

    /// Whether two arrays hold the same strings, byte for byte.
    private static func sameElements(_ a: [String], _ b: [String]) -> Bool {
        guard a.count == b.count else { return false }
        for (element, other) in zip(a, b) where !sameBytes(element, other) { return false }
        return true
    }

    /// Whether two objects of string members hold the same names with the
    /// same values, byte for byte (a dictionary finds a name by its
    /// characters, which other bytes may spell).
    private static func sameMembers(_ a: [String: String], _ b: [String: String]) -> Bool {
        guard a.count == b.count else { return false }
        for (name, value) in a {
            guard let index = b.index(forKey: name) else { return false }
            let (otherName, otherValue) = b[index]
            guard sameBytes(value, otherValue), sameBytes(name, otherName) else { return false }
        }
        return true
    }

    /// Whether two strings hold the same UTF-8 bytes (`==` compares
    /// characters: `é` and `e` with an accent are equal, their texts not).
    private static func sameBytes(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        // Where the bytes lie, as a native string holds them: no copy of
        // either string is made (`withUTF8` needs one, to change).
        let compared = a.utf8.withContiguousStorageIfAvailable { left in
            b.utf8.withContiguousStorageIfAvailable { right in
                guard let left = left.baseAddress, let right = right.baseAddress else { return true }
                return memcmp(left, right, a.utf8.count) == 0
            }
        }
        return (compared ?? nil) ?? a.utf8.elementsEqual(b.utf8)
    }
}

/// Each thread's recording and templates: a thread writing messages keeps
/// them to itself, with no lock.
final class JSONTemplates {
    let recording = JSONRecording()
    /// Whether the recording is in use: a message written while another is
    /// being written (by its closure) is written as a tree.
    @exclusivity(unchecked) var busy = false
    @exclusivity(unchecked) private var templates: [Int: JSONTemplate] = [:]
    /// The two shapes last written, the latest first, each with its hash: a
    /// thread writes runs of one shape, or two in turn (an answer and its
    /// notice), found here without hashing for the collection.
    @exclusivity(unchecked) private var latest: (hash: Int, template: JSONTemplate)?
    @exclusivity(unchecked) private var previous: (hash: Int, template: JSONTemplate)?
    /// Shapes beyond this many start the collection anew.
    private static let limit = 256

    /// The template of the shape `recording` holds.
    func template(for recording: JSONRecording) -> JSONTemplate {
        let hash = recording.hash
        if let latest, latest.hash == hash, latest.template.events == recording.events { return latest.template }
        if let previous, previous.hash == hash, previous.template.events == recording.events {
            swap(&self.latest, &self.previous)
            return previous.template
        }
        let template: JSONTemplate
        if let known = templates[hash], known.events == recording.events {
            template = known
        } else {
            if templates.count >= Self.limit { templates.removeAll() }
            template = JSONTemplate(recording)
            templates[hash] = template
        }
        previous = latest
        latest = (hash, template)
        return template
    }

    /// The calling thread's.
    static var current: JSONTemplates {
        if let stored = pthread_getspecific(key) { return Unmanaged<JSONTemplates>.fromOpaque(stored).takeUnretainedValue() }
        let made = JSONTemplates()
        pthread_setspecific(key, Unmanaged.passRetained(made).toOpaque())
        return made
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { stored in
            #if canImport(Glibc)
            guard let stored else { return }
            #endif
            Unmanaged<JSONTemplates>.fromOpaque(stored).release()
        }
        return key
    }()
}
