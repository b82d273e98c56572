import JSON

/// The `params` of a request or notification, with typed readers that answer
/// -32602 for anything of the wrong shape.
public struct Params: Sendable {
    /// An object or an array; nil when the message had no params or `null`.
    public let raw: JSON?

    public init(_ raw: JSON?) { self.raw = raw }

    /// The params of a method that takes them by name. No params reads as an
    /// empty object; positional params are refused.
    public func byName(allowed: Set<String>? = nil) throws(RPCError) -> NamedParams {
        switch raw {
        case nil:
            return NamedParams([:])
        case .object(let members)?:
            // The first unknown name in sorted order is named, so a refusal
            // does not depend on the dictionary's order; sorting waits for one.
            if let allowed, !members.keys.allSatisfy(allowed.contains),
                let unknown = members.keys.sorted().first(where: { !allowed.contains($0) })
            {
                throw .invalidParams("unknown param '\(unknown)'", param: unknown)
            }
            return NamedParams(members)
        default:
            throw .invalidParams("params must be given by name, as an object")
        }
    }
}

/// Params given by name.
public struct NamedParams: Sendable {
    public let members: [String: JSON]

    public init(_ members: [String: JSON]) { self.members = members }

    /// The param named `name`. A request gives few params, and a method
    /// reads each it takes: comparing `name` with each given one costs less
    /// than hashing it. More than `scanLimit` are hashed.
    public subscript(name: String) -> JSON? {
        guard members.count <= Self.scanLimit else { return members[name] }
        for (given, value) in members where given == name { return value }
        return nil
    }

    /// Up to how many params a look-up compares names rather than hashes.
    static let scanLimit = 8

    /// The param named `name`, for its readers.
    public func param(_ name: String) -> NamedParam { NamedParam(name, self[name]) }

    /// True when the param is present and not null.
    public func has(_ name: String) -> Bool { param(name).isGiven }

    public func string(_ name: String) throws(RPCError) -> String { try param(name).string() }

    public func optionalString(_ name: String) throws(RPCError) -> String? { try param(name).optionalString() }

    public func optionalBool(_ name: String) throws(RPCError) -> Bool? { try param(name).optionalBool() }

    public func optionalInteger(_ name: String, range: ClosedRange<Int64> = Int64.min...Int64.max) throws(RPCError) -> Int64? {
        try param(name).optionalInteger(range: range)
    }

    public func optionalNumber(_ name: String, range: ClosedRange<Double> = -Double.infinity...Double.infinity) throws(RPCError) -> Double? {
        try param(name).optionalNumber(range: range)
    }

    public func optionalObject(_ name: String) throws(RPCError) -> [String: JSON]? { try param(name).optionalObject() }

    public func optionalStringArray(_ name: String) throws(RPCError) -> [String]? { try param(name).optionalStringArray() }

    /// A string param whose value must be one of `choices`. Inlinable, so
    /// that each caller's specialization asks for no generic metadata.
    @inlinable
    public func optionalChoice<Choice: RawRepresentable<String>>(_ name: String, as type: Choice.Type) throws(RPCError) -> Choice? {
        try param(name).optionalChoice(as: type)
    }
}

/// One param given by name, or its absence, with typed readers that answer
/// -32602 naming it for a value of the wrong shape: for a method that finds
/// its params in one pass over those given rather than by name one by one.
public struct NamedParam: Sendable {
    public let name: String
    /// The value given; nil when the param is absent.
    public let value: JSON?

    public init(_ name: String, _ value: JSON?) {
        self.name = name
        self.value = value
    }

    /// True when the param is present and not null.
    public var isGiven: Bool {
        guard let value else { return false }
        return !value.isNull
    }

    public func string() throws(RPCError) -> String {
        guard let value = try optionalString() else { throw .invalidParams("missing param '\(name)'", param: name) }
        return value
    }

    public func optionalString() throws(RPCError) -> String? {
        try read("a string") { $0.stringValue }
    }

    public func optionalBool() throws(RPCError) -> Bool? {
        try read("a boolean") { $0.boolValue }
    }

    public func optionalInteger(range: ClosedRange<Int64> = Int64.min...Int64.max) throws(RPCError) -> Int64? {
        try read("an integer in \(range.lowerBound)...\(range.upperBound)") { value in
            value.integerValue.flatMap { range.contains($0) ? $0 : nil }
        }
    }

    public func optionalNumber(range: ClosedRange<Double> = -Double.infinity...Double.infinity) throws(RPCError) -> Double? {
        try read("a number in \(range.lowerBound)...\(range.upperBound)") { value in
            value.doubleValue.flatMap { range.contains($0) ? $0 : nil }
        }
    }

    public func optionalObject() throws(RPCError) -> [String: JSON]? {
        try read("an object") { $0.objectValue }
    }

    public func optionalStringArray() throws(RPCError) -> [String]? {
        try read("an array of strings") { value in
            guard let elements = value.arrayValue else { return nil }
            let strings = elements.compactMap(\.stringValue)
            return strings.count == elements.count ? strings : nil
        }
    }

    /// A string param whose value must be one of `choices`. Inlinable, so
    /// that each caller's specialization asks for no generic metadata.
    @inlinable
    public func optionalChoice<Choice: RawRepresentable<String>>(as type: Choice.Type) throws(RPCError) -> Choice? {
        guard let text = try optionalString() else { return nil }
        guard let choice = Choice(rawValue: text) else {
            throw .invalidParams("param '\(name)' has unknown value '\(text)'", param: name)
        }
        return choice
    }

    private func read<T>(_ expected: @autoclosure () -> String, _ convert: (JSON) -> T?) throws(RPCError) -> T? {
        guard let value, !value.isNull else { return nil }
        guard let converted = convert(value) else {
            throw .invalidParams("param '\(name)' must be \(expected()), not \(value.typeName == "integer" || value.typeName == "number" ? "\(value)" : value.typeName)", param: name)
        }
        return converted
    }
}
