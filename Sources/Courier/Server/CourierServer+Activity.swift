import JSON
import JSONRPC

/// The `indicator/*` methods.
extension CourierServer {
    func registerActivity() {
        dispatcher.register(checked: "indicator/state") { [indicator] params, reply in
            _ = try params.byName(allowed: [])
            reply.success(indicator.state)
        }
        dispatcher.register(checked: "indicator/configure") { [self] params, reply in
            let named = try params.byName(allowed: ["enabled", "activationDelay", "completionDelay"])
            let enabled = try named.optionalBool("enabled")
            let activationDelay = try named.optionalNumber("activationDelay", range: 0...3600)
            let completionDelay = try named.optionalNumber("completionDelay", range: 0...3600)
            configuration.withLock { config in
                config.indicatorEnabled = enabled ?? config.indicatorEnabled
                config.activationDelay = activationDelay ?? config.activationDelay
                config.completionDelay = completionDelay ?? config.completionDelay
            }
            indicator.configure(enabled: enabled, activationDelay: activationDelay, completionDelay: completionDelay)
            reply.success(indicator.state)
        }
        dispatcher.register(checked: "indicator/increment") { [indicator] params, reply in
            _ = try params.byName(allowed: [])
            indicator.increment()
            reply.success(indicator.state)
        }
        dispatcher.register(checked: "indicator/decrement") { [indicator] params, reply in
            _ = try params.byName(allowed: [])
            indicator.decrement()
            reply.success(indicator.state)
        }
    }
}
