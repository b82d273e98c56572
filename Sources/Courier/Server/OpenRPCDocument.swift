import JSON
import JSONRPC

/// The OpenRPC document of `protocol/openrpc.json`, built into the binary.
enum OpenRPCDocument {
    static func load() -> Result<JSON, RPCError> {
        do {
            return .success(try JSONCodec.decode(PackageResources.openrpc_json))
        } catch {
            return .failure(RPCError(.internalError, "the built-in OpenRPC document is not valid JSON: \(error)"))
        }
    }
}
