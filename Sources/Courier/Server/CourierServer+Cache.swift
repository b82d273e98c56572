import JSON
import JSONRPC

/// `cache/stats`, `cache/lookup`, `cache/remove`, `cache/clear`.
extension CourierServer {
    func registerCache() {
        dispatcher.register(checked: "cache/stats") { [cache] params, reply in
            _ = try params.byName(allowed: [])
            reply.success(cache.stats)
        }
        dispatcher.register(checked: "cache/lookup") { [cache] params, reply in
            reply.success(cache.describe(key: try Self.cacheKey(params)))
        }
        dispatcher.register(checked: "cache/remove") { [cache] params, reply in
            reply.success(["removed": .bool(cache.remove(key: try Self.cacheKey(params)))])
        }
        dispatcher.register(checked: "cache/clear") { [cache] params, reply in
            let named = try params.byName(allowed: ["memory", "disk"])
            let memory = try named.optionalBool("memory") ?? true
            let disk = try named.optionalBool("disk") ?? true
            reply.success(cache.clear(memory: memory, disk: disk))
        }
    }

    /// The key `cache/lookup` and `cache/remove` name: `cacheKey`, else `url`.
    private static func cacheKey(_ params: Params) throws -> String {
        let named = try params.byName(allowed: ["url", "cacheKey"])
        if let cacheKey = try named.optionalString("cacheKey") { return ResponseCache.key(cacheKey: cacheKey) }
        guard let url = try named.optionalString("url") else {
            throw RPCError.invalidParams("missing param 'url'", param: "url")
        }
        return ResponseCache.key(url: url)
    }
}
