import Logging

/// A log handler in front of another that passes every message and metadata
/// value through `Redaction.logText`: no URL password or credential header
/// reaches the log, and no text from a client or an origin can start a line
/// of its own.
public struct RedactingLogHandler: LogHandler {
    private var base: any LogHandler

    public init(_ base: any LogHandler) { self.base = base }

    public func log(event: LogEvent) {
        var event = event
        event.message = Logger.Message(stringLiteral: Redaction.logText(event.message.description))
        event.metadata = event.metadata?.mapValues(Self.redacted)
        base.log(event: event)
    }

    private static func redacted(_ value: Logger.MetadataValue) -> Logger.MetadataValue {
        switch value {
        case .string(let text): .string(Redaction.logText(text))
        case .stringConvertible(let convertible): .string(Redaction.logText(convertible.description))
        case .array(let values): .array(values.map(redacted))
        case .dictionary(let values): .dictionary(values.mapValues(redacted))
        @unknown default: .string(Redaction.logText(value.description))
        }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { base.metadataProvider }
        set { base.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue.map(Self.redacted) }
    }

    public var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue.mapValues(Self.redacted) }
    }

    public var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }
}
