import JSON
import JSONRPC

/// The `indicator/*` methods.
extension CourierServer {
    func registerActivity() {
        dispatcher.register(checked: "indicator/state") { [indicator] _, reply in
            reply.success(indicator.snapshot.json)
        }
        dispatcher.register(checked: "indicator/configure") { [self] params, reply in
            let named = try params.byName()
            let enabled = try named.optionalBool("enabled")
            let activationDelay = try named.optionalNumber("activationDelay")
            let completionDelay = try named.optionalNumber("completionDelay")
            configuration.withLock { config in
                config.indicatorEnabled = enabled ?? config.indicatorEnabled
                config.activationDelay = activationDelay ?? config.activationDelay
                config.completionDelay = completionDelay ?? config.completionDelay
            }
            indicator.configure(enabled: enabled, activationDelay: activationDelay, completionDelay: completionDelay)
            reply.success(indicator.snapshot.json)
        }
        dispatcher.register(checked: "indicator/increment") { [indicator] _, reply in
            indicator.increment()
            reply.success(indicator.snapshot.json)
        }
        dispatcher.register(checked: "indicator/decrement") { [indicator] _, reply in
            indicator.decrement()
            reply.success(indicator.snapshot.json)
        }
    }
}

extension ActivityIndicator.VisibilityChange {
    /// `indicator/visibility {visible, activityCount}`.
    var notification: (method: String, params: JSON) {
        switch self {
        case .shown(let activityCount):
            ("indicator/visibility", ["visible": true, "activityCount": JSON(activityCount)])
        case .hidden(let activityCount):
            ("indicator/visibility", ["visible": false, "activityCount": JSON(activityCount)])
        }
    }
}

extension ActivityIndicator.Snapshot {
    /// The result of `indicator/state`:
    /// `{enabled, state, visible, activityCount, activationDelay, completionDelay}`.
    var json: JSON {
        [
            "enabled": .bool(enabled),
            "state": .string(state.rawValue),
            "visible": .bool(visible),
            "activityCount": JSON(activityCount),
            "activationDelay": .double(activationDelay),
            "completionDelay": .double(completionDelay),
        ]
    }
}
