import JSON
import JSONRPC
import Logging

/// The settings as the document's `Config` names them: how `initialize`
/// reports each in its `config` and reads it from its `options`. The
/// document checks each option's name, type and range before it is read
/// here, and names the settings fixed at start-up (`x-startupOnly` of
/// `ConfigOptions`).
extension Configuration {
    /// The settings as `initialize` reports them: a proxy's password is
    /// replaced by `***`.
    var json: JSON {
        var object = reportedAsSet
        object["proxy"] = JSON(proxy.map(Redaction.url))
        return .object(object)
    }

    /// Every setting's value as it is, the proxy's password included.
    private var reportedAsSet: [String: JSON] { Self.settings.mapValues { $0.report(self) } }

    /// Applies `initialize`'s `options`, which the document has checked,
    /// all or none. A setting fixed at start-up may be given only the value
    /// it has, as it is or as `initialize` reports it.
    mutating func apply(options: [String: JSON]) throws(RPCError) {
        let current = reportedAsSet
        let reported = json
        let fixed = OpenRPCDocument.startupOnlySettings
        // The first refused in the order of names, whatever the object's.
        let changes = options.sorted { $0.key < $1.key }.compactMap { name, value -> Change? in
            // The document refuses any other name; a test keeps the two in step.
            guard let setting = Self.settings[name] else { return nil }
            return Change(
                setting: name, fixedAtStartup: fixed.contains(name),
                keepsValue: value == current[name] || value == reported[name]
            ) { setting.assign(&$0, value) }
        }
        do throws(ConfigurationError) {
            try apply(changes)
        } catch {
            throw Self.rpcError(error)
        }
    }

    static func rpcError(_ error: ConfigurationError) -> RPCError {
        switch error {
        case .fixedAtStartup(let setting):
            .invalidParams("option '\(setting)' can only be set on the command line", param: "options.\(setting)")
        }
    }

    /// One setting: its value as JSON, and how a value the document has
    /// checked sets it.
    struct Setting: Sendable {
        let report: @Sendable (Configuration) -> JSON
        let assign: @Sendable (inout Configuration, JSON) -> Void
    }

    /// Every setting, by its name in the document.
    static let settings: [String: Setting] = [
        "cacheDir": .text(\.cacheDir),
        "memoryCapacity": .count(\.memoryCapacity),
        "memoryAfterPurge": .count(\.memoryAfterPurge),
        "diskCapacity": .count(\.diskCapacity),
        "maxActive": .count(\.maxActive),
        "prioritization": .choice(\.prioritization),
        "activationDelay": .number(\.activationDelay),
        "completionDelay": .number(\.completionDelay),
        "progressInterval": .number(\.progressInterval),
        "allowScheme": .texts(\.allowScheme),
        "allowInsecureRedirects": .flag(\.allowInsecureRedirects),
        "downloadRoot": .optionalText(\.downloadRoot),
        "maxBytes": .optionalBytes(\.maxBytes),
        "timeout": .number(\.timeout),
        "connectTimeout": .number(\.connectTimeout),
        "lowSpeedLimit": .bytes(\.lowSpeedLimit),
        "lowSpeedTime": .count(\.lowSpeedTime),
        "maxMemoryBody": .bytes(\.maxMemoryBody),
        "partialCapacity": .bytes(\.partialCapacity),
        "caFile": .optionalText(\.caFile),
        "proxy": .optionalText(\.proxy),
        "framing": .choice(\.framing),
        "logLevel": .choice(\.logLevel),
        "maxMessageBytes": .count(\.maxMessageBytes),
        "indicatorEnabled": .flag(\.indicatorEnabled),
        "retries": .count(\.retries),
        "retryDelay": .number(\.retryDelay),
        "retryMaxDelay": .number(\.retryMaxDelay),
        "retryMaxTime": .number(\.retryMaxTime),
        "maxDownloadRate": .bytes(\.maxDownloadRate),
    ]
}

extension Configuration.Setting {
    typealias Path<Value> = any WritableKeyPath<Configuration, Value> & Sendable

    /// A setting of `Value`, read from JSON by `read`; a value it cannot
    /// read (which the document refuses) leaves the setting as it is.
    private static func of<Value>(
        _ path: Path<Value>, report: @escaping @Sendable (Value) -> JSON, read: @escaping @Sendable (JSON) -> Value?
    ) -> Self {
        Self(report: { report($0[keyPath: path]) }, assign: { config, json in read(json).map { config[keyPath: path] = $0 } })
    }

    static func text(_ path: Path<String>) -> Self { of(path, report: JSON.string, read: \.stringValue) }

    static func optionalText(_ path: Path<String?>) -> Self {
        of(path, report: JSON.init, read: { $0.isNull ? .some(nil) : $0.stringValue.map(Optional.some) })
    }

    static func texts(_ path: Path<[String]>) -> Self {
        of(path, report: { .array($0.map(JSON.string)) }, read: { json in
            guard let elements = json.arrayValue else { return nil }
            let texts = elements.compactMap(\.stringValue)
            return texts.count == elements.count ? texts : nil
        })
    }

    static func flag(_ path: Path<Bool>) -> Self { of(path, report: JSON.bool, read: \.boolValue) }

    static func number(_ path: Path<Double>) -> Self { of(path, report: JSON.double, read: \.doubleValue) }

    static func count(_ path: Path<Int>) -> Self {
        of(path, report: JSON.init, read: { $0.integerValue.flatMap { Int(exactly: $0) } })
    }

    static func bytes(_ path: Path<Int64>) -> Self { of(path, report: JSON.integer, read: \.integerValue) }

    static func optionalBytes(_ path: Path<Int64?>) -> Self {
        of(path, report: { $0.map(JSON.integer) ?? .null }, read: { $0.isNull ? .some(nil) : $0.integerValue.map(Optional.some) })
    }

    static func choice<Choice: RawRepresentable<String> & Sendable>(_ path: Path<Choice>) -> Self {
        of(path, report: { .string($0.rawValue) }, read: { $0.stringValue.flatMap(Choice.init(rawValue:)) })
    }
}
