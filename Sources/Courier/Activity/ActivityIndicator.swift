import Locking

/// The global network activity indicator: counts activity, drives an
/// `IndicatorStateMachine` with real (or injected) timers, and emits a
/// `VisibilityChange` each time visibility changes, and only then. Safe to
/// call from any thread.
///
/// The activity count is the number of running transfers (each counted at
/// most once, by id) plus the client's own `increment()`s not yet undone.
///
/// `emit` is called while the indicator's lock is held, which keeps
/// changes in the order they happened. It must therefore only enqueue what
/// it is given and return; it must not call back into the indicator.
public final class ActivityIndicator: Sendable {
    /// The indicator appeared or went, with the activity count at that
    /// moment.
    public enum VisibilityChange: Hashable, Sendable {
        case shown(activityCount: Int)
        case hidden(activityCount: Int)
    }

    /// The indicator's settings, machine state and count at one moment.
    public struct Snapshot: Hashable, Sendable {
        public var enabled: Bool
        public var state: IndicatorStateMachine.State
        public var visible: Bool
        public var activityCount: Int
        public var activationDelay: Double
        public var completionDelay: Double
    }

    private struct State {
        var machine: IndicatorStateMachine
        /// Ids of the transfers running now: numbers, so counting one
        /// makes no string and hashes one word.
        var transfers: Set<Int> = []
        /// The client's increments not yet undone by a decrement; never negative.
        var clientCount = 0
        /// The timer the machine's `runningTimer` names, if one runs.
        var timer: (any IndicatorTimer)?

        var activityCount: Int { transfers.count + clientCount }
    }

    private let locked: Locked<State>
    private let scheduler: any IndicatorScheduler
    private let emit: @Sendable (VisibilityChange) -> Void

    public init(
        enabled: Bool = true,
        activationDelay: Double = 1.0,
        completionDelay: Double = 0.17,
        scheduler: any IndicatorScheduler = DispatchIndicatorScheduler(),
        emit: @escaping @Sendable (VisibilityChange) -> Void
    ) {
        let machine = IndicatorStateMachine(
            enabled: enabled, activationDelay: activationDelay, completionDelay: completionDelay)
        locked = Locked(State(machine: machine))
        self.scheduler = scheduler
        self.emit = emit
    }

    /// A transfer started or resumed. A transfer already counted is not
    /// counted again.
    public func transferStarted(_ id: Int) {
        update { $0.transfers.insert(id).inserted }
    }

    /// A transfer was suspended, completed, failed or was cancelled. A
    /// transfer that is not counted (never started, or already stopped)
    /// changes nothing.
    public func transferStopped(_ id: Int) {
        update { $0.transfers.remove(id) != nil }
    }

    /// The client's own activity began.
    public func increment() {
        update { state in
            state.clientCount += 1
            return true
        }
    }

    /// The client's own activity ended. Only undoes `increment()`s: with
    /// none outstanding it does nothing, so it never lowers the count of
    /// running transfers nor takes the count below zero.
    public func decrement() {
        update { state in
            guard state.clientCount > 0 else { return false }
            state.clientCount -= 1
            return true
        }
    }

    public var activityCount: Int { locked.withLock { $0.activityCount } }

    public var visible: Bool { locked.withLock { $0.machine.visible } }

    public var machineState: IndicatorStateMachine.State { locked.withLock { $0.machine.state } }

    /// Changes the settings given; nil leaves one as it is. New delays apply
    /// first, so enabling together with a new `activationDelay` waits the
    /// new delay. Delays below zero are taken as zero.
    public func configure(enabled: Bool? = nil, activationDelay: Double? = nil, completionDelay: Double? = nil) {
        locked.withLock { state in
            let now = scheduler.now
            if activationDelay != nil || completionDelay != nil {
                let actions = state.machine.delaysChanged(
                    activationDelay: activationDelay, completionDelay: completionDelay, now: now)
                perform(actions, in: &state)
            }
            if let enabled {
                perform(state.machine.enabledChanged(to: enabled, now: now), in: &state)
            }
        }
    }

    /// Everything about the indicator, read at once (`indicator/state`).
    public var snapshot: Snapshot {
        locked.withLock { state in
            Snapshot(
                enabled: state.machine.enabled, state: state.machine.state, visible: state.machine.visible,
                activityCount: state.activityCount, activationDelay: state.machine.activationDelay,
                completionDelay: state.machine.completionDelay)
        }
    }

    /// Applies `change`; when it reports that the count changed, tells the
    /// machine.
    private func update(_ change: (inout State) -> Bool) {
        locked.withLock { state in
            guard change(&state) else { return }
            let actions = state.machine.activityCountChanged(to: state.activityCount, now: scheduler.now)
            perform(actions, in: &state)
        }
    }

    private func timerFired(_ token: IndicatorStateMachine.TimerToken) {
        locked.withLock { state in
            guard state.machine.runningTimer == token else { return }
            state.timer = nil
            perform(state.machine.timerFired(token), in: &state)
        }
    }

    private func perform(_ actions: [IndicatorStateMachine.Action], in state: inout State) {
        for action in actions {
            switch action {
            case .show:
                emit(.shown(activityCount: state.activityCount))
            case .hide:
                emit(.hidden(activityCount: state.activityCount))
            case .startTimer(let seconds, let token):
                state.timer?.cancel()
                state.timer = scheduler.schedule(after: seconds) { [weak self] in self?.timerFired(token) }
            case .cancelTimer:
                state.timer?.cancel()
                state.timer = nil
            }
        }
    }
}
