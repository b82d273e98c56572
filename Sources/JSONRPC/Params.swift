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

    /// True when the param is present and not null.
    public func has(_ name: String) -> Bool {
        guard let value = self[name] else { return false }
        return !value.isNull
    }

    public func string(_ name: String) throws(RPCError) -> String {
        guard let value = try optionalString(name) else { throw .invalidParams("missing param '\(name)'", param: name) }
        return value
    }

    public func optionalString(_ name: String) throws(RPCError) -> String? {
        try read(name, "a string") { $0.stringValue }
    }

    public func optionalBool(_ name: String) throws(RPCError) -> Bool? {
        try read(name, "a boolean") { $0.boolValue }
    }

    public func optionalInteger(_ name: String, range: ClosedRange<Int64> = Int64.min...Int64.max) throws(RPCError) -> Int64? {
        try read(name, "an integer in \(range.lowerBound)...\(range.upperBound)") { value in
            value.integerValue.flatMap { range.contains($0) ? $0 : nil }
        }
    }

    public func optionalNumber(_ name: String, range: ClosedRange<Double> = -Double.infinity...Double.infinity) throws(RPCError) -> Double? {
        try read(name, "a number in \(range.lowerBound)...\(range.upperBound)") { value in
            value.doubleValue.flatMap { range.contains($0) ? $0 : nil }
        }
    }

    public func optionalObject(_ name: String) throws(RPCError) -> [String: JSON]? {
        try read(name, "an object") { $0.objectValue }
    }

    public func optionalStringArray(_ name: String) throws(RPCError) -> [String]? {
        try read(name, "an array of strings") { value in
            guard let elements = value.arrayValue else { return nil }
            let strings = elements.compactMap(\.stringValue)
            return strings.count == elements.count ? strings : nil
        }
    }

    /// A string param whose value must be one of `choices`. Inlinable, so
    /// that each caller's specialization asks for no generic metadata.
    @inlinable
    public func optionalChoice<Choice: RawRepresentable<String>>(_ name: String, as type: Choice.Type) throws(RPCError) -> Choice? {
        guard let text = try optionalString(name) else { return nil }
        guard let choice = Choice(rawValue: text) else {
            throw .invalidParams("param '\(name)' has unknown value '\(text)'", param: name)
        }
        return choice
    }

    private func read<T>(_ name: String, _ expected: @autoclosure () -> String, _ convert: (JSON) -> T?) throws(RPCError) -> T? {
        guard let value = self[name], !value.isNull else { return nil }
        guard let converted = convert(value) else {
            throw .invalidParams("param '\(name)' must be \(expected()), not \(value.typeName == "integer" || value.typeName == "number" ? "\(value)" : value.typeName)", param: name)
        }
        return converted
    }
}
