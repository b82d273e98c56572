import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSON
import JSONRPC
import Locking

/// The OpenRPC document of `protocol/openrpc.json`, built into the binary,
/// and the check of every request's params against it: the document is the
/// one statement of what courier accepts.
///
/// The check covers what JSON Schema says about a value's shape: `type`
/// (an integer-valued real is an `integer`), `enum`, `minimum`, `maximum`,
/// `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `items`,
/// `properties`, `required`, `additionalProperties` and `$ref`. Rules
/// between params (give exactly one of `receipt` or `slot`) and rules on
/// content (a parsable URL, header names that are tokens) stay with the
/// methods. A refusal is -32602 with `data.param` naming the param, dotted
/// below it (`options.maxActive`); members of a map or an array are named by
/// the map or the array (`headers`, `accept`).
public enum OpenRPCDocument {
    /// The document as parsed, or why it could not be: parsed once, when
    /// `rpc.discover` first asks for it.
    private static let parsed: Result<JSON, RPCError> = {
        do {
            return .success(try JSONCodec.decode(PackageResources.openrpc_json))
        } catch {
            return .failure(RPCError(.internalError, "the built-in OpenRPC document is not valid JSON: \(error)"))
        }
    }()

    static func load() -> Result<JSON, RPCError> {
        awaitBackgroundParse()
        return parsed
    }

    /// Held by the background parse while it runs: a reader passes through
    /// it before touching what the parse makes, which orders the two in a
    /// way ThreadSanitizer sees (it does not see the once-only
    /// initialization of static properties on Linux). It keeps the schemas
    /// compiled so far, each on its first use, so that the first request
    /// waits for its own method's alone.
    private static let backgroundParse = Locked(Compiled())

    private struct Compiled {
        var methods: [String: ParamTable] = [:]
        var schemas: [String: Schema?] = [:]
        /// The method checked last and its table: requests come in runs of
        /// one method (a batch of downloads), and a name compared costs
        /// less than one hashed.
        var lastMethod: (name: String, table: ParamTable)?
    }

    /// Parses `document` and its methods' params, and makes each method's
    /// table for the check, on a thread of its own and returns once that
    /// thread holds `backgroundParse`, so that a server can have them
    /// ready by its first request (the first of a batch of downloads is
    /// checked without a table to make): whoever reads them before the
    /// parse ends waits for it.
    public static func parseInBackground() {
        let holding = DispatchSemaphore(value: 0)
        startThread(named: "courier.openrpc") {
            backgroundParse.withLock { tables in
                holding.signal()
                for (method, descriptors) in methodParams where tables.methods[method] == nil {
                    tables.methods[method] = ParamTable(descriptors: descriptors)
                }
            }
        }
        holding.wait()
    }

    private static func awaitBackgroundParse() {
        backgroundParse.withLock { _ in }
    }

    /// What the checks read of the document: each method's name and params
    /// and the components they refer to, without the prose
    /// (`Resources/openrpc-checks.json`, which `scripts/openrpc_checks.py`
    /// makes from `protocol/openrpc.json`): about a fifth of its bytes, so
    /// the first request waits that much less for the parse. Nil only when
    /// the build embedded a broken one.
    static let document: JSON? = try? JSONCodec.decode(PackageResources.openrpc_checks_json)

    /// The settings `ConfigOptions` names as fixed at start-up
    /// (`x-startupOnly`): only the command line sets them.
    static var startupOnlySettings: Set<String> {
        awaitBackgroundParse()
        return startupOnly
    }

    private static let startupOnly: Set<String> = Set(
        document?["components"]?["schemas"]?["ConfigOptions"]?["x-startupOnly"]?.arrayValue?.compactMap(\.stringValue) ?? [])

    /// Each method's params (content descriptors, `$ref`s resolved).
    static let methodParams: [String: [JSON]] = {
        var params: [String: [JSON]] = [:]
        for method in document?["methods"]?.arrayValue ?? [] {
            guard let method = resolve(method), let name = method["name"]?.stringValue else { continue }
            params[name] = (method["params"]?.arrayValue ?? []).compactMap(resolve)
        }
        return params
    }()

    /// Checks a request's params against its method's content descriptors:
    /// by name, no unknown name, every required one present, each value of
    /// its schema. A method the document does not describe takes no params.
    static func check(_ method: String, _ params: Params) throws(RPCError) {
        // Read under the background parse's lock, which orders the reader
        // after the parse (and after this table's own first build).
        let table = backgroundParse.withLock { tables in
            if let last = tables.lastMethod, last.name == method { return last.table }
            let table = tables.methods[method] ?? ParamTable(descriptors: methodParams[method] ?? [])
            tables.methods[method] = table
            tables.lastMethod = (method, table)
            return table
        }
        let members: [String: JSON]
        switch params.raw {
        case nil: members = [:]
        case .object(let object)?: members = object
        default: throw .invalidParams("params must be given by name, as an object")
        }
        if table.passes(members) { return }
        // The first unknown name in sorted order is named, whatever the
        // dictionary's order; sorting waits until there is one.
        if !members.keys.allSatisfy(table.names.contains),
            let unknown = members.keys.sorted().first(where: { !table.names.contains($0) })
        {
            throw .invalidParams("unknown param '\(unknown)'", param: unknown)
        }
        for param in table.params {
            guard let value = members[param.name] else {
                if param.required { throw .invalidParams("missing param '\(param.name)'", param: param.name) }
                continue
            }
            try check(value, against: param.schema, at: param.name)
        }
    }

    /// A method's content descriptors as the check reads them: a class, so
    /// that the check of each request takes it with one reference.
    private final class ParamTable: Sendable {
        let names: Set<String>
        let params: [(name: String, required: Bool, schema: Schema?)]
        /// Where each name stands in `params` (OpenRPC names each param
        /// once).
        let positions: [String: Int]
        let requiredCount: Int
        /// The positions of the names of each length in UTF-8 bytes (up to
        /// the longest): a request's names are compared with the few of
        /// their length, not hashed.
        let byLength: [[Int]]

        init(descriptors: [JSON]) {
            let params: [(name: String, required: Bool, schema: Schema?)] = descriptors.compactMap { descriptor in
                guard let name = descriptor["name"]?.stringValue else { return nil }
                return (name, descriptor["required"]?.boolValue == true, Schema(descriptor["schema"] ?? [:]))
            }
            let positions = Dictionary(params.indices.map { (params[$0].name, $0) }, uniquingKeysWith: { first, _ in first })
            self.params = params
            self.positions = positions
            names = Set(positions.keys)
            requiredCount = positions.values.filter { params[$0].required }.count
            var byLength = [[Int]](repeating: [], count: (params.map(\.name.utf8.count).max() ?? 0) + 1)
            for position in params.indices { byLength[params[position].name.utf8.count].append(position) }
            self.byLength = byLength
        }

        /// Where `name` stands in `params`, as `positions` says: found among
        /// the names of its length (equal strings of equal bytes compare
        /// at once), else (a name equal to one only as a Swift string, in
        /// other bytes) in `positions`.
        func position(of name: String) -> Int? {
            let length = name.utf8.count
            if length < byLength.count {
                for position in byLength[length] where params[position].name == name { return position }
            }
            return positions[name]
        }

        /// Whether `members` pass, checked one by one by their own names:
        /// a request gives a few of a method's many params. A false answer
        /// names no param; the check in the document's order finds which,
        /// so a refusal does not depend on the dictionary's order.
        func passes(_ members: [String: JSON]) -> Bool {
            var required = 0
            for (name, value) in members {
                guard let position = position(of: name) else { return false }
                let param = params[position]
                if param.required { required += 1 }
                do throws(RPCError) {
                    try OpenRPCDocument.check(value, against: param.schema, at: name)
                } catch {
                    return false
                }
            }
            return required == requiredCount
        }
    }

    /// A schema with its `$ref`s followed and the keywords the check reads
    /// taken out once, so that checking a value costs no look-up in the
    /// document. A reference that leads nowhere, or a schema nested deeper
    /// than `depthLimit` (the document has no recursive schema), is nil:
    /// any value passes it.
    final class Schema: Sendable {
        enum Others: Sendable {
            case allowed
            case refused
            case checked(Schema?)
        }

        /// The JSON types a schema's `type` names, as bits.
        struct Kinds: OptionSet, Sendable {
            let rawValue: UInt8

            static let null = Kinds(rawValue: 1 << 0)
            static let boolean = Kinds(rawValue: 1 << 1)
            static let string = Kinds(rawValue: 1 << 2)
            static let array = Kinds(rawValue: 1 << 3)
            static let object = Kinds(rawValue: 1 << 4)
            /// Integers, and reals with no fractional part.
            static let integer = Kinds(rawValue: 1 << 5)
            /// Integers and reals.
            static let number = Kinds(rawValue: 1 << 6)

            init(rawValue: UInt8) { self.rawValue = rawValue }

            /// The kinds named; a name JSON Schema does not define admits
            /// nothing.
            init(typeNames: [String]) {
                var kinds: Kinds = []
                for name in typeNames {
                    switch name {
                    case "null": kinds.insert(.null)
                    case "boolean": kinds.insert(.boolean)
                    case "string": kinds.insert(.string)
                    case "array": kinds.insert(.array)
                    case "object": kinds.insert(.object)
                    case "integer": kinds.insert(.integer)
                    case "number": kinds.insert(.number)
                    default: break
                    }
                }
                self = kinds
            }

            /// Whether `value` is of one of the kinds: an integer-valued
            /// real is an `integer`, and every integer a `number`.
            func admits(_ value: JSON) -> Bool {
                switch value {
                case .null: contains(.null)
                case .bool: contains(.boolean)
                case .string: contains(.string)
                case .array: contains(.array)
                case .object: contains(.object)
                case .integer: contains(.integer) || contains(.number)
                case .double(let real):
                    contains(.number) || (contains(.integer) && real.rounded() == real && abs(real) < 9.2e18)
                }
            }
        }

        /// A numeric bound, and the number as the document writes it, for
        /// a refusal.
        struct Bound: Sendable {
            let number: Double
            let written: JSON
        }

        let types: [String]?
        /// The kinds of value `types` admits, found once: a check compares
        /// no type name.
        let admitted: Kinds?
        let choices: [JSON]?
        let minimum: Bound?
        let maximum: Bound?
        let exclusiveMinimum: Bound?
        let exclusiveMaximum: Bound?
        let minLength: Int64?
        let items: Schema??
        let properties: [String: Schema?]
        let required: [String]
        let others: Others

        static let depthLimit = 32

        convenience init?(_ schema: JSON) { self.init(schema, depth: 0) }

        private init?(_ schema: JSON, depth: Int) {
            guard depth < Self.depthLimit, let schema = OpenRPCDocument.resolve(schema) else { return nil }
            types = schema["type"].map(OpenRPCDocument.typeNames)
            admitted = types.map { Kinds(typeNames: $0) }
            choices = schema["enum"]?.arrayValue
            func bound(_ keyword: String) -> Bound? {
                schema[keyword].flatMap { written in written.doubleValue.map { Bound(number: $0, written: written) } }
            }
            minimum = bound("minimum")
            maximum = bound("maximum")
            exclusiveMinimum = bound("exclusiveMinimum")
            exclusiveMaximum = bound("exclusiveMaximum")
            minLength = schema["minLength"]?.integerValue
            items = schema["items"].map { Schema($0, depth: depth + 1) }
            properties = (schema["properties"]?.objectValue ?? [:]).mapValues { Schema($0, depth: depth + 1) }
            required = schema["required"]?.arrayValue?.compactMap(\.stringValue) ?? []
            let additional = schema["additionalProperties"]
            if additional?.boolValue == false {
                others = .refused
            } else if let additional, additional.objectValue != nil {
                others = .checked(Schema(additional, depth: depth + 1))
            } else {
                others = .allowed
            }
        }
    }

    /// Checks `value` against the schema `components.schemas.<name>`;
    /// `path` names the value in a refusal (empty: its members are named
    /// alone).
    static func check(_ value: JSON, againstSchemaNamed name: String, at path: String = "") throws(RPCError) {
        let schema = compiled(name, in: \.schemas) { Schema(["$ref": .string("#/components/schemas/\(name)")]) }
        try check(value, against: schema, at: path)
    }

    /// What `table` holds for `name`, made by `make` and kept there the
    /// first time it is asked for.
    private static func compiled<Made: Sendable>(
        _ name: String, in table: WritableKeyPath<Compiled, [String: Made]>, _ make: () -> Made
    ) -> Made {
        backgroundParse.withLock { tables in
            if let made = tables[keyPath: table][name] { return made }
            let made = make()
            tables[keyPath: table][name] = made
            return made
        }
    }

    private static func check(_ value: JSON, against schema: Schema?, at path: String) throws(RPCError) {
        guard let schema else { return }
        // Named only in a refusal: most values pass, and the text would cost
        // an allocation each.
        var shown: String { path.isEmpty ? "params" : "param '\(path)'" }
        if let types = schema.types, let admitted = schema.admitted, !admitted.admits(value) {
            throw .invalidParams("\(shown) must be \(types.joined(separator: " or ")), not \(describe(value))", param: path)
        }
        if let choices = schema.choices, !choices.contains(where: { equal($0, value) }) {
            throw .invalidParams("\(shown) must be one of \(JSON.array(choices)), not \(value)", param: path)
        }
        if let number = value.doubleValue {
            try checkRange(number, schema, shown: shown, path: path)
        }
        if case .string(let text) = value, let least = schema.minLength, !hasScalars(text, atLeast: least) {
            throw .invalidParams("\(shown) must have at least \(least) character(s)", param: path)
        }
        if case .array(let elements) = value, let items = schema.items {
            for element in elements { try check(element, against: items, at: path) }
        }
        if case .object(let members) = value {
            try checkMembers(members, schema, path: path)
        }
    }

    private static func checkRange(_ number: Double, _ schema: Schema, shown: @autoclosure () -> String, path: String) throws(RPCError) {
        if let least = schema.minimum, number < least.number {
            throw .invalidParams("\(shown()) must be at least \(least.written), not \(number)", param: path)
        }
        if let most = schema.maximum, number > most.number {
            throw .invalidParams("\(shown()) must be at most \(most.written), not \(number)", param: path)
        }
        if let least = schema.exclusiveMinimum, number <= least.number {
            throw .invalidParams("\(shown()) must be greater than \(least.written), not \(number)", param: path)
        }
        if let most = schema.exclusiveMaximum, number >= most.number {
            throw .invalidParams("\(shown()) must be less than \(most.written), not \(number)", param: path)
        }
    }

    private static func checkMembers(_ members: [String: JSON], _ schema: Schema, path: String) throws(RPCError) {
        func named(_ name: String) -> String { path.isEmpty ? name : "\(path).\(name)" }
        for name in schema.required where members[name] == nil {
            throw .invalidParams("missing param '\(named(name))'", param: named(name))
        }
        for (name, member) in members.sorted(by: { $0.key < $1.key }) {
            if let property = schema.properties[name] {
                try check(member, against: property, at: named(name))
                continue
            }
            switch schema.others {
            case .refused: throw .invalidParams("unknown param '\(named(name))'", param: named(name))
            case .checked(let additional): try check(member, against: additional, at: path)
            case .allowed: break
            }
        }
    }

    /// `schema` with its `$ref` followed (within this document), or nil for
    /// a reference that leads nowhere.
    fileprivate static func resolve(_ schema: JSON) -> JSON? {
        var current = schema
        for _ in 0..<16 {
            guard let reference = current["$ref"]?.stringValue else { return current }
            guard let target = references[reference] else { return nil }
            current = target
        }
        return nil
    }

    /// What each `$ref` in the document points at, found once: a check
    /// then costs one look-up per reference.
    private static let references: [String: JSON] = {
        guard let document else { return [:] }
        var found: Set<String> = []
        func collect(_ value: JSON) {
            switch value {
            case .object(let members):
                if let reference = members["$ref"]?.stringValue { found.insert(reference) }
                for member in members.values { collect(member) }
            case .array(let elements):
                for element in elements { collect(element) }
            default:
                break
            }
        }
        collect(document)
        var table: [String: JSON] = [:]
        for reference in found where reference.utf8.starts(with: "#/".utf8) {
            var target = document
            var reached = true
            for token in reference.utf8.dropFirst(2).split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
                guard let next = target[unescaped(token)] else {
                    reached = false
                    break
                }
                target = next
            }
            if reached { table[reference] = target }
        }
        return table
    }()

    /// A JSON Pointer reference token's text (RFC 6901): `~1` is `/` and
    /// `~0` is `~`, read byte by byte.
    static func unescaped(_ token: some Collection<UInt8>) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(token.count)
        var escaping = false
        for byte in token {
            if escaping {
                escaping = false
                switch byte {
                case UInt8(ascii: "1"):
                    bytes.append(UInt8(ascii: "/"))
                    continue
                case UInt8(ascii: "0"):
                    bytes.append(UInt8(ascii: "~"))
                    continue
                default:
                    bytes.append(UInt8(ascii: "~"))
                }
            }
            if byte == UInt8(ascii: "~") {
                escaping = true
            } else {
                bytes.append(byte)
            }
        }
        if escaping { bytes.append(UInt8(ascii: "~")) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `text` holds at least `least` Unicode scalars. Each takes
    /// one to four UTF-8 bytes, so they are counted only when the byte
    /// count alone does not tell (a URL of a few dozen bytes holds at least
    /// the one character most schemas ask for).
    static func hasScalars(_ text: String, atLeast least: Int64) -> Bool {
        let bytes = Int64(text.utf8.count)
        if bytes / 4 >= least { return true }
        if bytes < least { return false }
        return Int64(text.unicodeScalars.count) >= least
    }

    fileprivate static func typeNames(_ type: JSON) -> [String] {
        type.arrayValue?.compactMap(\.stringValue) ?? type.stringValue.map { [$0] } ?? []
    }

    /// JSON equality, with `1` equal to `1.0`.
    private static func equal(_ a: JSON, _ b: JSON) -> Bool {
        if let x = a.doubleValue, let y = b.doubleValue { return x == y }
        return a == b
    }

    private static func describe(_ value: JSON) -> String {
        switch value {
        case .integer, .double, .bool, .null: "\(value)"
        default: value.typeName
        }
    }
}

extension Dispatcher {
    /// Registers `handler` behind the check of its params against the
    /// document.
    func register(checked method: String, _ handler: @escaping RequestHandler) {
        register(method) { params, reply in
            try OpenRPCDocument.check(method, params)
            try handler(params, reply)
        }
    }
}
