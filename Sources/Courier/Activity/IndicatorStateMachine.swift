/// The network activity indicator's state machine
/// (AFNetworkActivityIndicatorManager) as a value: each event is a
/// `mutating func` that returns the actions its caller must perform, in
/// order. There is no I/O and no clock inside; the caller owns the timer and
/// passes the current time (seconds on any monotonic clock) to events that
/// may start one.
///
/// - `notActive` → `delayingStart` when activity begins: a timer of
///   `activationDelay` starts.
/// - `delayingStart` → `active` (show) when that timer fires; → `notActive`
///   (timer cancelled, nothing shown) when activity ends first.
/// - `active` → `delayingEnd` when activity ends: a timer of
///   `completionDelay` starts.
/// - `delayingEnd` → `notActive` (hide) when that timer fires; → `active`
///   (timer cancelled, no extra show: it never stopped being visible) when
///   activity comes back first.
///
/// While disabled the machine stays in `notActive` and shows nothing, but
/// the activity count is still tracked. Disabling cancels a running timer and
/// hides a visible indicator at once; enabling while activity runs enters
/// `delayingStart`, so the indicator appears `activationDelay` later.
///
/// Changing a delay while its timer runs keeps the delay measured from the
/// moment the timer started, as if the new value had been set then: the
/// timer is restarted for `newDelay - elapsed` seconds, and when that is no
/// more than zero the transition happens at once. Changing the other delay
/// only affects later timers. A delay of zero needs no timer: the transition
/// happens with the event itself.
///
/// Each timer carries a token; a timer that fires with a token other than
/// the running one's (it was cancelled or replaced) is ignored.
public struct IndicatorStateMachine: Sendable, Equatable {
    public enum State: String, Sendable, CaseIterable {
        case notActive
        case delayingStart
        case active
        case delayingEnd
    }

    /// Names one started timer.
    public struct TimerToken: Hashable, Sendable {
        public let generation: UInt64
    }

    public enum Action: Hashable, Sendable {
        case show
        case hide
        /// Start a timer; when it fires, call `timerFired(token)`. There is
        /// at most one running timer: a start always follows a cancel of the
        /// previous one or comes when none runs.
        case startTimer(seconds: Double, token: TimerToken)
        case cancelTimer
    }

    public private(set) var state = State.notActive
    public private(set) var enabled: Bool
    public private(set) var activationDelay: Double
    public private(set) var completionDelay: Double
    public private(set) var activityCount = 0

    private struct RunningTimer: Hashable, Sendable {
        var token: TimerToken
        var startedAt: Double
    }

    private var timer: RunningTimer?
    private var generation: UInt64 = 0

    public init(enabled: Bool = true, activationDelay: Double = 1.0, completionDelay: Double = 0.17) {
        self.enabled = enabled
        self.activationDelay = Self.sanitized(activationDelay)
        self.completionDelay = Self.sanitized(completionDelay)
    }

    /// True while the indicator is shown: in `active` and `delayingEnd`.
    public var visible: Bool { state == .active || state == .delayingEnd }

    /// The token of the running timer, if one runs.
    public var runningTimer: TimerToken? { timer?.token }

    /// The activity count is now `count` (negative counts are taken as zero).
    public mutating func activityCountChanged(to count: Int, now: Double) -> [Action] {
        activityCount = max(0, count)
        guard enabled else { return [] }
        switch (state, activityCount > 0) {
        case (.notActive, true):
            return enter(.delayingStart, delay: activationDelay, now: now)
        case (.delayingStart, false):
            return cancelTimer() + enter(.notActive)
        case (.active, false):
            return enter(.delayingEnd, delay: completionDelay, now: now)
        case (.delayingEnd, true):
            return cancelTimer() + enter(.active)
        default:
            return []
        }
    }

    /// The timer named `token` fired. Stale tokens are ignored.
    public mutating func timerFired(_ token: TimerToken) -> [Action] {
        guard let running = timer, running.token == token else { return [] }
        timer = nil
        return expire()
    }

    public mutating func enabledChanged(to enabled: Bool, now: Double) -> [Action] {
        guard enabled != self.enabled else { return [] }
        self.enabled = enabled
        if enabled {
            return activityCount > 0 ? enter(.delayingStart, delay: activationDelay, now: now) : []
        }
        return cancelTimer() + enter(.notActive)
    }

    /// New delays (nil leaves one unchanged; negative values are taken as
    /// zero). See the type's documentation for a timer that is running.
    public mutating func delaysChanged(activationDelay: Double? = nil, completionDelay: Double? = nil, now: Double)
        -> [Action]
    {
        let oldActivation = self.activationDelay
        let oldCompletion = self.completionDelay
        if let activationDelay { self.activationDelay = Self.sanitized(activationDelay) }
        if let completionDelay { self.completionDelay = Self.sanitized(completionDelay) }
        guard let running = timer else { return [] }
        let (old, new): (Double, Double)
        switch state {
        case .delayingStart: (old, new) = (oldActivation, self.activationDelay)
        case .delayingEnd: (old, new) = (oldCompletion, self.completionDelay)
        case .notActive, .active: return []
        }
        guard new != old else { return [] }
        let remaining = new - max(0, now - running.startedAt)
        if remaining <= 0 {
            return cancelTimer() + expire()
        }
        generation += 1
        let token = TimerToken(generation: generation)
        timer = RunningTimer(token: token, startedAt: running.startedAt)
        return [.cancelTimer, .startTimer(seconds: remaining, token: token)]
    }

    /// The transition a timer's end brings in the current state.
    private mutating func expire() -> [Action] {
        switch state {
        case .delayingStart: return activityCount > 0 ? enter(.active) : enter(.notActive)
        case .delayingEnd: return activityCount > 0 ? enter(.active) : enter(.notActive)
        case .notActive, .active: return []
        }
    }

    /// Moves to `next`, with a timer of `delay` when one is given and
    /// positive, and returns the show or hide the move calls for.
    private mutating func enter(_ next: State, delay: Double? = nil, now: Double = 0) -> [Action] {
        let wasVisible = visible
        if let delay, delay <= 0 {
            state = next
            return expire()
        }
        state = next
        var actions: [Action] = []
        if visible != wasVisible { actions.append(visible ? .show : .hide) }
        if let delay {
            generation += 1
            let token = TimerToken(generation: generation)
            timer = RunningTimer(token: token, startedAt: now)
            actions.append(.startTimer(seconds: delay, token: token))
        }
        return actions
    }

    private mutating func cancelTimer() -> [Action] {
        guard timer != nil else { return [] }
        timer = nil
        return [.cancelTimer]
    }

    private static func sanitized(_ delay: Double) -> Double {
        delay > 0 ? delay : 0
    }
}
