import Testing

@testable import Courier

/// Actions with the timer token left out, for comparing against a table.
private enum Step: Hashable, CustomStringConvertible {
    case show, hide, cancel
    case start(Double)

    init(_ action: IndicatorStateMachine.Action) {
        switch action {
        case .show: self = .show
        case .hide: self = .hide
        case .cancelTimer: self = .cancel
        case .startTimer(let seconds, _): self = .start(seconds)
        }
    }

    var description: String {
        switch self {
        case .show: "show"
        case .hide: "hide"
        case .cancel: "cancel"
        case .start(let seconds): "start(\(seconds))"
        }
    }
}

/// A machine brought into a state, with the time its events now happen at
/// and a token of a timer that no longer runs.
private struct Setup: CustomStringConvertible {
    var machine: IndicatorStateMachine
    var now: Double
    var staleToken: IndicatorStateMachine.TimerToken
    var description: String

    /// Activation delay 1, completion delay 0.5; each event comes 0.25 s
    /// after the state was entered.
    static func make(_ name: String) -> Setup {
        var machine = IndicatorStateMachine(activationDelay: 1, completionDelay: 0.5)
        _ = machine.activityCountChanged(to: 1, now: 0)
        let stale = machine.runningTimer!
        _ = machine.activityCountChanged(to: 0, now: 0)
        switch name {
        case "notActive":
            return Setup(machine: machine, now: 0.25, staleToken: stale, description: name)
        case "disabled":
            _ = machine.enabledChanged(to: false, now: 0)
            _ = machine.activityCountChanged(to: 1, now: 0)
            return Setup(machine: machine, now: 0.25, staleToken: stale, description: name)
        case "delayingStart":
            _ = machine.activityCountChanged(to: 1, now: 0)
            return Setup(machine: machine, now: 0.25, staleToken: stale, description: name)
        case "active":
            _ = machine.activityCountChanged(to: 1, now: 0)
            _ = machine.timerFired(machine.runningTimer!)
            return Setup(machine: machine, now: 1.25, staleToken: stale, description: name)
        case "delayingEnd":
            _ = machine.activityCountChanged(to: 1, now: 0)
            _ = machine.timerFired(machine.runningTimer!)
            _ = machine.activityCountChanged(to: 0, now: 10)
            return Setup(machine: machine, now: 10.25, staleToken: stale, description: name)
        default:
            fatalError("no setup named \(name)")
        }
    }
}

private enum Event: String, CaseIterable, CustomStringConvertible {
    case countUp, countDown, timerFired, staleTimerFired, enable, disable
    case activationLonger, activationShorter, completionLonger, completionShorter

    var description: String { rawValue }

    func apply(to setup: inout Setup) -> [IndicatorStateMachine.Action] {
        let now = setup.now
        switch self {
        case .countUp:
            return setup.machine.activityCountChanged(to: setup.machine.activityCount + 1, now: now)
        case .countDown:
            return setup.machine.activityCountChanged(to: 0, now: now)
        case .timerFired:
            return setup.machine.timerFired(setup.machine.runningTimer ?? setup.staleToken)
        case .staleTimerFired:
            return setup.machine.timerFired(setup.staleToken)
        case .enable:
            return setup.machine.enabledChanged(to: true, now: now)
        case .disable:
            return setup.machine.enabledChanged(to: false, now: now)
        case .activationLonger:
            return setup.machine.delaysChanged(activationDelay: 2, now: now)
        case .activationShorter:
            return setup.machine.delaysChanged(activationDelay: 0.125, now: now)
        case .completionLonger:
            return setup.machine.delaysChanged(completionDelay: 1, now: now)
        case .completionShorter:
            return setup.machine.delaysChanged(completionDelay: 0.125, now: now)
        }
    }
}

private struct Row: CustomStringConvertible, Sendable {
    var state: String
    var event: String
    var next: IndicatorStateMachine.State
    var steps: [String]

    var description: String { "\(state) + \(event)" }
}

/// Every state (and the disabled machine, with activity) against every event.
private let table: [Row] = [
    Row(state: "notActive", event: "countUp", next: .delayingStart, steps: ["start(1.0)"]),
    Row(state: "notActive", event: "countDown", next: .notActive, steps: []),
    Row(state: "notActive", event: "timerFired", next: .notActive, steps: []),
    Row(state: "notActive", event: "staleTimerFired", next: .notActive, steps: []),
    Row(state: "notActive", event: "enable", next: .notActive, steps: []),
    Row(state: "notActive", event: "disable", next: .notActive, steps: []),
    Row(state: "notActive", event: "activationLonger", next: .notActive, steps: []),
    Row(state: "notActive", event: "activationShorter", next: .notActive, steps: []),
    Row(state: "notActive", event: "completionLonger", next: .notActive, steps: []),
    Row(state: "notActive", event: "completionShorter", next: .notActive, steps: []),

    Row(state: "delayingStart", event: "countUp", next: .delayingStart, steps: []),
    Row(state: "delayingStart", event: "countDown", next: .notActive, steps: ["cancel"]),
    Row(state: "delayingStart", event: "timerFired", next: .active, steps: ["show"]),
    Row(state: "delayingStart", event: "staleTimerFired", next: .delayingStart, steps: []),
    Row(state: "delayingStart", event: "enable", next: .delayingStart, steps: []),
    Row(state: "delayingStart", event: "disable", next: .notActive, steps: ["cancel"]),
    Row(state: "delayingStart", event: "activationLonger", next: .delayingStart, steps: ["cancel", "start(1.75)"]),
    Row(state: "delayingStart", event: "activationShorter", next: .active, steps: ["cancel", "show"]),
    Row(state: "delayingStart", event: "completionLonger", next: .delayingStart, steps: []),
    Row(state: "delayingStart", event: "completionShorter", next: .delayingStart, steps: []),

    Row(state: "active", event: "countUp", next: .active, steps: []),
    Row(state: "active", event: "countDown", next: .delayingEnd, steps: ["start(0.5)"]),
    Row(state: "active", event: "timerFired", next: .active, steps: []),
    Row(state: "active", event: "staleTimerFired", next: .active, steps: []),
    Row(state: "active", event: "enable", next: .active, steps: []),
    Row(state: "active", event: "disable", next: .notActive, steps: ["hide"]),
    Row(state: "active", event: "activationLonger", next: .active, steps: []),
    Row(state: "active", event: "activationShorter", next: .active, steps: []),
    Row(state: "active", event: "completionLonger", next: .active, steps: []),
    Row(state: "active", event: "completionShorter", next: .active, steps: []),

    Row(state: "delayingEnd", event: "countUp", next: .active, steps: ["cancel"]),
    Row(state: "delayingEnd", event: "countDown", next: .delayingEnd, steps: []),
    Row(state: "delayingEnd", event: "timerFired", next: .notActive, steps: ["hide"]),
    Row(state: "delayingEnd", event: "staleTimerFired", next: .delayingEnd, steps: []),
    Row(state: "delayingEnd", event: "enable", next: .delayingEnd, steps: []),
    Row(state: "delayingEnd", event: "disable", next: .notActive, steps: ["cancel", "hide"]),
    Row(state: "delayingEnd", event: "activationLonger", next: .delayingEnd, steps: []),
    Row(state: "delayingEnd", event: "activationShorter", next: .delayingEnd, steps: []),
    Row(state: "delayingEnd", event: "completionLonger", next: .delayingEnd, steps: ["cancel", "start(0.75)"]),
    Row(state: "delayingEnd", event: "completionShorter", next: .notActive, steps: ["cancel", "hide"]),

    Row(state: "disabled", event: "countUp", next: .notActive, steps: []),
    Row(state: "disabled", event: "countDown", next: .notActive, steps: []),
    Row(state: "disabled", event: "timerFired", next: .notActive, steps: []),
    Row(state: "disabled", event: "staleTimerFired", next: .notActive, steps: []),
    Row(state: "disabled", event: "enable", next: .delayingStart, steps: ["start(1.0)"]),
    Row(state: "disabled", event: "disable", next: .notActive, steps: []),
    Row(state: "disabled", event: "activationLonger", next: .notActive, steps: []),
    Row(state: "disabled", event: "activationShorter", next: .notActive, steps: []),
    Row(state: "disabled", event: "completionLonger", next: .notActive, steps: []),
    Row(state: "disabled", event: "completionShorter", next: .notActive, steps: []),
]

@Suite(.timeLimit(.minutes(1)))
struct IndicatorStateMachineTests {
    @Test func tableCoversEveryStateAndEvent() {
        let states = ["disabled"] + IndicatorStateMachine.State.allCases.map(\.rawValue)
        for state in states {
            for event in Event.allCases {
                #expect(table.filter { $0.state == state && $0.event == event.rawValue }.count == 1, "\(state) + \(event)")
            }
        }
    }

    @Test(arguments: table)
    fileprivate func transition(_ row: Row) throws {
        // Given a machine in the row's state
        var setup = Setup.make(row.state)
        let event = try #require(Event(rawValue: row.event))

        // When the event happens
        let actions = event.apply(to: &setup)

        // Then it moves and acts as the table says
        #expect(setup.machine.state == row.next)
        #expect(actions.map { Step($0).description } == row.steps)
        #expect(setup.machine.visible == (row.next == .active || row.next == .delayingEnd))
        // and a timer it starts is the one running afterwards
        for case .startTimer(_, let token) in actions {
            #expect(setup.machine.runningTimer == token)
        }
        if [.notActive, .active].contains(row.next) {
            #expect(setup.machine.runningTimer == nil)
        }
    }

    @Test func activityThatEndsDuringDelayingStartNeverShows() {
        var machine = IndicatorStateMachine()
        var steps: [Step] = []

        steps += machine.activityCountChanged(to: 1, now: 0).map(Step.init)
        let token = machine.runningTimer!
        steps += machine.activityCountChanged(to: 0, now: 0.5).map(Step.init)
        // The cancelled timer fires anyway: it is ignored.
        steps += machine.timerFired(token).map(Step.init)

        #expect(steps == [.start(1.0), .cancel])
        #expect(machine.state == .notActive)
        #expect(!machine.visible)
    }

    @Test func activityThatReturnsDuringDelayingEndStaysVisibleWithoutExtraActions() {
        var machine = IndicatorStateMachine(completionDelay: 0.25)
        _ = machine.activityCountChanged(to: 1, now: 0)
        #expect(machine.timerFired(machine.runningTimer!) == [.show])
        _ = machine.activityCountChanged(to: 0, now: 2)
        let completion = machine.runningTimer!

        let actions = machine.activityCountChanged(to: 3, now: 2.125)

        #expect(actions == [.cancelTimer])
        #expect(machine.state == .active)
        #expect(machine.visible)
        #expect(machine.timerFired(completion) == [])
    }

    @Test func staleTimerAfterRestartIsIgnored() {
        var machine = IndicatorStateMachine()
        _ = machine.activityCountChanged(to: 1, now: 0)
        let first = machine.runningTimer!
        _ = machine.activityCountChanged(to: 0, now: 0.5)
        _ = machine.activityCountChanged(to: 1, now: 0.75)
        let second = machine.runningTimer!

        #expect(first != second)
        #expect(machine.timerFired(first) == [])
        #expect(machine.state == .delayingStart)
        #expect(machine.timerFired(second) == [.show])
        #expect(machine.timerFired(second) == [])
    }

    @Test func disablingWhileVisibleHidesAtOnceAndCountIsStillTracked() {
        var machine = IndicatorStateMachine()
        _ = machine.activityCountChanged(to: 1, now: 0)
        _ = machine.timerFired(machine.runningTimer!)

        #expect(machine.enabledChanged(to: false, now: 1) == [.hide])
        #expect(machine.activityCountChanged(to: 2, now: 1) == [])
        #expect(machine.activityCount == 2)
        #expect(machine.state == .notActive)
        #expect(!machine.enabled)
    }

    @Test func enablingWhileActivityRunsShowsAfterActivationDelay() {
        var machine = IndicatorStateMachine(enabled: false, activationDelay: 0.5)
        #expect(machine.activityCountChanged(to: 1, now: 0) == [])

        let actions = machine.enabledChanged(to: true, now: 3)

        #expect(actions.map(Step.init) == [.start(0.5)])
        #expect(machine.state == .delayingStart)
        #expect(machine.timerFired(machine.runningTimer!) == [.show])
    }

    @Test func enablingWithoutActivityDoesNothing() {
        var machine = IndicatorStateMachine(enabled: false)
        _ = machine.activityCountChanged(to: 1, now: 0)
        _ = machine.activityCountChanged(to: 0, now: 1)

        #expect(machine.enabledChanged(to: true, now: 2) == [])
        #expect(machine.state == .notActive)
    }

    @Test func longerActivationDelayCountsFromWhenTheTimerStarted() {
        var machine = IndicatorStateMachine(activationDelay: 1)
        _ = machine.activityCountChanged(to: 1, now: 10)

        // 0.5 s in, the delay becomes 3 s: 2.5 s remain.
        let actions = machine.delaysChanged(activationDelay: 3, now: 10.5)
        #expect(actions.map(Step.init) == [.cancel, .start(2.5)])

        // Changing it again measures from the same start.
        let again = machine.delaysChanged(activationDelay: 2, now: 11)
        #expect(again.map(Step.init) == [.cancel, .start(1)])
        #expect(machine.timerFired(machine.runningTimer!) == [.show])
    }

    @Test func delayShorterThanTheTimeAlreadyWaitedActsAtOnce() {
        var machine = IndicatorStateMachine(activationDelay: 1, completionDelay: 1)
        _ = machine.activityCountChanged(to: 1, now: 0)
        #expect(machine.delaysChanged(activationDelay: 0.5, now: 0.5) == [.cancelTimer, .show])
        #expect(machine.state == .active)

        _ = machine.activityCountChanged(to: 0, now: 2)
        #expect(machine.delaysChanged(completionDelay: 0.25, now: 2.5) == [.cancelTimer, .hide])
        #expect(machine.state == .notActive)
    }

    @Test func delayChangedWithoutARunningTimerAppliesToTheNextOne() {
        var machine = IndicatorStateMachine(activationDelay: 1, completionDelay: 0.25)
        _ = machine.activityCountChanged(to: 1, now: 0)
        _ = machine.timerFired(machine.runningTimer!)

        #expect(machine.delaysChanged(activationDelay: 4, completionDelay: 2, now: 5) == [])
        #expect(machine.activityCountChanged(to: 0, now: 6).map(Step.init) == [.start(2)])
        #expect(machine.activationDelay == 4)
    }

    @Test func unchangedDelayLeavesTheTimerAlone() {
        var machine = IndicatorStateMachine(activationDelay: 1)
        _ = machine.activityCountChanged(to: 1, now: 0)
        let token = machine.runningTimer

        #expect(machine.delaysChanged(activationDelay: 1, now: 0.5) == [])
        #expect(machine.runningTimer == token)
    }

    @Test func zeroDelaysActWithTheEvent() {
        var machine = IndicatorStateMachine(activationDelay: 0, completionDelay: 0)

        #expect(machine.activityCountChanged(to: 1, now: 0) == [.show])
        #expect(machine.state == .active)
        #expect(machine.activityCountChanged(to: 0, now: 1) == [.hide])
        #expect(machine.state == .notActive)
        #expect(machine.runningTimer == nil)
    }

    @Test func negativeValuesAreTakenAsZero() {
        var machine = IndicatorStateMachine(activationDelay: -1, completionDelay: -2)
        #expect(machine.activationDelay == 0)
        #expect(machine.completionDelay == 0)
        _ = machine.activityCountChanged(to: -3, now: 0)
        #expect(machine.activityCount == 0)
    }

    @Test func stateNamesAreTheContractsNames() {
        #expect(IndicatorStateMachine.State.allCases.map(\.rawValue) == ["notActive", "delayingStart", "active", "delayingEnd"])
    }
}
