import JSON

/// A JSON-RPC error code. A struct rather than an enum so that servers add
/// their own application codes without breaking a `switch`.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int

    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let parseError = ErrorCode(rawValue: -32700)
    public static let invalidRequest = ErrorCode(rawValue: -32600)
    public static let methodNotFound = ErrorCode(rawValue: -32601)
    public static let invalidParams = ErrorCode(rawValue: -32602)
    public static let internalError = ErrorCode(rawValue: -32603)
    /// A batch's answers passed the room for answers waiting for their batch.
    public static let batchTooLarge = ErrorCode(rawValue: -32002)

    public var description: String { String(rawValue) }
}

/// The error object of a JSON-RPC response.
public struct RPCError: Error, Sendable, Hashable {
    public var code: ErrorCode
    public var message: String
    public var data: JSON?

    public init(_ code: ErrorCode, _ message: String, data: JSON? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public static func invalidParams(_ message: String, param: String? = nil) -> RPCError {
        RPCError(.invalidParams, message, data: param.map { ["param": .string($0)] })
    }

    public static func invalidRequest(_ message: String, data: JSON? = nil) -> RPCError {
        RPCError(.invalidRequest, message, data: data)
    }

    public var json: JSON {
        var object: [String: JSON] = ["code": .integer(Int64(code.rawValue)), "message": .string(message)]
        if let data { object["data"] = data }
        return .object(object)
    }
}
