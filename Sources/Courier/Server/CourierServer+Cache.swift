import FoundationEssentials
import JSON
import JSONRPC

/// `cache/stats`, `cache/lookup`, `cache/remove`, `cache/clear`.
extension CourierServer {
    func registerCache() {
        dispatcher.register(checked: "cache/stats") { [cache] _, reply in
            reply.success(cache.stats.json)
        }
        dispatcher.register(checked: "cache/lookup") { [cache] params, reply in
            reply.success(ResponseCache.Entry.json(cache.describe(key: try Self.cacheKey(params))))
        }
        dispatcher.register(checked: "cache/remove") { [cache] params, reply in
            reply.success(["removed": .bool(cache.remove(key: try Self.cacheKey(params)))])
        }
        dispatcher.register(checked: "cache/clear") { [cache] params, reply in
            let named = try params.byName()
            let memory = try named.optionalBool("memory") ?? true
            let disk = try named.optionalBool("disk") ?? true
            reply.success(cache.clear(memory: memory, disk: disk).json)
        }
    }

    /// The key `cache/lookup` and `cache/remove` name: `cacheKey`, else `url`.
    private static func cacheKey(_ params: Params) throws -> String {
        let named = try params.byName()
        if let cacheKey = try named.optionalString("cacheKey") { return ResponseCache.key(cacheKey: cacheKey) }
        guard let url = try named.optionalString("url") else {
            throw RPCError.invalidParams("missing param 'url'", param: "url")
        }
        return ResponseCache.key(url: url)
    }
}

extension ResponseCache.Stats {
    /// The result of `cache/stats`.
    var json: JSON {
        [
            "memory": [
                "usage": JSON(memory.usage), "capacity": JSON(memory.capacity), "afterPurge": JSON(memory.afterPurge),
                "entries": JSON(memory.entries),
            ],
            "disk": [
                "usage": .integer(disk.usage), "capacity": .integer(disk.capacity), "entries": JSON(disk.entries),
                "path": JSON(disk.path),
            ],
            "hits": JSON(hits), "misses": JSON(misses), "revalidations": JSON(revalidations),
        ]
    }
}

extension ResponseCache.Entry {
    /// The result of `cache/lookup` for `entry`, or for nothing stored.
    static func json(_ entry: Self?) -> JSON {
        guard let entry else {
            return ["cached": false, "fresh": false, "size": nil, "tier": nil, "expires": nil, "etag": nil, "lastModified": nil]
        }
        return [
            "cached": true,
            "fresh": .bool(entry.fresh),
            "size": .integer(entry.size),
            "tier": .string(entry.tier.rawValue),
            "expires": .string(entry.expires.formatted(.iso8601)),
            "etag": JSON(entry.etag),
            "lastModified": JSON(entry.lastModified),
        ]
    }
}

extension ResponseCache.Cleared {
    /// The result of `cache/clear`.
    var json: JSON { ["memory": JSON(memory), "disk": JSON(disk)] }
}
