import Dispatch
import JSON
import Testing

@testable import Courier
import CourierTestSupport
import Locking

/// Collects what an indicator emits.
private final class Recorder: Sendable {
    private let changes = Locked<[ActivityIndicator.VisibilityChange]>([])

    var emit: @Sendable (ActivityIndicator.VisibilityChange) -> Void {
        { change in self.changes.withLock { $0.append(change) } }
    }

    /// The changes since the last call.
    func take() -> [ActivityIndicator.VisibilityChange] {
        changes.withLock { changes in
            defer { changes = [] }
            return changes
        }
    }
}

private func visibility(_ visible: Bool, _ count: Int) -> ActivityIndicator.VisibilityChange {
    visible ? .shown(activityCount: count) : .hidden(activityCount: count)
}

/// An indicator with activation delay 1 s and completion delay 0.25 s on a
/// clock that moves only by hand.
private func makeIndicator(enabled: Bool = true) -> (ActivityIndicator, ManualIndicatorScheduler, Recorder) {
    let scheduler = ManualIndicatorScheduler()
    let recorder = Recorder()
    let indicator = ActivityIndicator(
        enabled: enabled, activationDelay: 1, completionDelay: 0.25, scheduler: scheduler, emit: recorder.emit)
    return (indicator, scheduler, recorder)
}

@Suite(.timeLimit(.minutes(1)))
struct ActivityIndicatorTests {
    @Test func shortActivityNeverShows() {
        let (indicator, scheduler, recorder) = makeIndicator()

        // Given a transfer that ends before the activation delay
        indicator.transferStarted(1)
        scheduler.advance(by: 0.5)
        indicator.transferStopped(1)
        scheduler.advance(by: 10)

        // Then nothing was sent and no timer is left
        #expect(recorder.take() == [])
        #expect(indicator.machineState == .notActive)
        #expect(scheduler.pendingCount == 0)
    }

    @Test func showsAfterActivationDelayAndHidesAfterCompletionDelay() {
        let (indicator, scheduler, recorder) = makeIndicator()

        indicator.transferStarted(1)
        scheduler.advance(by: 0.5)
        #expect(recorder.take() == [])
        scheduler.advance(by: 0.5)
        #expect(recorder.take() == [visibility(true, 1)])
        #expect(indicator.visible)

        indicator.transferStopped(1)
        #expect(recorder.take() == [])
        #expect(indicator.visible)
        scheduler.advance(by: 0.125)
        #expect(recorder.take() == [])
        scheduler.advance(by: 0.125)
        #expect(recorder.take() == [visibility(false, 0)])
        #expect(!indicator.visible)
    }

    @Test func overlappingActivityKeepsItVisibleWithoutExtraEvents() {
        let (indicator, scheduler, recorder) = makeIndicator()

        // Given a visible indicator whose transfer ends
        indicator.transferStarted(1)
        scheduler.advance(by: 1)
        indicator.transferStopped(1)
        scheduler.advance(by: 0.125)

        // When another starts during the completion delay, and more overlap
        indicator.transferStarted(2)
        scheduler.advance(by: 5)
        indicator.increment()
        indicator.transferStopped(2)
        scheduler.advance(by: 5)
        indicator.decrement()
        scheduler.advance(by: 0.25)

        // Then it was shown once and hidden once
        #expect(recorder.take() == [visibility(true, 1), visibility(false, 0)])
        #expect(indicator.machineState == .notActive)
    }

    @Test func disablingHidesAtOnceAndKeepsCounting() {
        let (indicator, scheduler, recorder) = makeIndicator()
        indicator.transferStarted(1)
        scheduler.advance(by: 1)
        #expect(recorder.take() == [visibility(true, 1)])

        indicator.configure(enabled: false)

        #expect(recorder.take() == [visibility(false, 1)])
        indicator.transferStarted(2)
        scheduler.advance(by: 10)
        #expect(recorder.take() == [])
        #expect(indicator.activityCount == 2)
        #expect(scheduler.pendingCount == 0)
    }

    @Test func disablingDuringCompletionDelayHidesAtOnceAndOnlyOnce() {
        let (indicator, scheduler, recorder) = makeIndicator()
        indicator.transferStarted(1)
        scheduler.advance(by: 1)
        indicator.transferStopped(1)

        indicator.configure(enabled: false)
        scheduler.advance(by: 1)

        #expect(recorder.take() == [visibility(true, 1), visibility(false, 0)])
    }

    @Test func enablingWhileTransfersRunShowsAfterActivationDelay() {
        let (indicator, scheduler, recorder) = makeIndicator(enabled: false)
        indicator.transferStarted(1)
        scheduler.advance(by: 5)
        #expect(recorder.take() == [])

        indicator.configure(enabled: true)
        scheduler.advance(by: 0.5)
        #expect(recorder.take() == [])
        scheduler.advance(by: 0.5)

        #expect(recorder.take() == [visibility(true, 1)])
    }

    @Test func enablingWithANewDelayWaitsTheNewDelay() {
        let (indicator, scheduler, recorder) = makeIndicator(enabled: false)
        indicator.transferStarted(1)

        indicator.configure(enabled: true, activationDelay: 2)
        scheduler.advance(by: 1.5)
        #expect(recorder.take() == [])
        scheduler.advance(by: 0.5)

        #expect(recorder.take() == [visibility(true, 1)])
    }

    @Test func longerDelayWhileWaitingCountsFromWhenActivityBegan() {
        let (indicator, scheduler, recorder) = makeIndicator()
        indicator.transferStarted(1)
        scheduler.advance(by: 0.5)

        indicator.configure(activationDelay: 2)
        scheduler.advance(by: 1)
        #expect(recorder.take() == [])
        scheduler.advance(by: 0.5)

        #expect(recorder.take() == [visibility(true, 1)])
        #expect(scheduler.now == 2)
    }

    @Test func shorterDelayThanAlreadyWaitedShowsAtOnce() {
        let (indicator, scheduler, recorder) = makeIndicator()
        indicator.transferStarted(1)
        scheduler.advance(by: 0.5)

        indicator.configure(activationDelay: 0.25)

        #expect(recorder.take() == [visibility(true, 1)])
        #expect(scheduler.pendingCount == 0)
    }

    @Test func eachTransferCountsOnce() {
        let (indicator, _, _) = makeIndicator()

        indicator.transferStarted(1)
        indicator.transferStarted(1)
        #expect(indicator.activityCount == 1)
        indicator.transferStarted(2)
        #expect(indicator.activityCount == 2)

        // A suspended transfer that is then cancelled stops once.
        indicator.transferStopped(1)
        indicator.transferStopped(1)
        #expect(indicator.activityCount == 1)
        // A transfer that never started changes nothing.
        indicator.transferStopped(4)
        #expect(indicator.activityCount == 1)
        indicator.transferStopped(2)
        #expect(indicator.activityCount == 0)
    }

    @Test func decrementFloorsAtZeroAndNeverUndoesTransfers() {
        let (indicator, scheduler, recorder) = makeIndicator()

        indicator.decrement()
        #expect(indicator.activityCount == 0)

        indicator.transferStarted(1)
        indicator.decrement()
        #expect(indicator.activityCount == 1)

        indicator.increment()
        indicator.increment()
        #expect(indicator.activityCount == 3)
        indicator.decrement()
        indicator.decrement()
        indicator.decrement()
        #expect(indicator.activityCount == 1)

        indicator.transferStopped(1)
        indicator.decrement()
        #expect(indicator.activityCount == 0)
        scheduler.advance(by: 10)
        #expect(recorder.take() == [])
    }

    @Test func clientActivityAloneShowsTheIndicator() {
        let (indicator, scheduler, recorder) = makeIndicator()

        indicator.increment()
        scheduler.advance(by: 1)
        indicator.decrement()
        scheduler.advance(by: 0.25)

        #expect(recorder.take() == [visibility(true, 1), visibility(false, 0)])
    }

    @Test func snapshotReportsSettingsAndCount() {
        let (indicator, scheduler, _) = makeIndicator()
        #expect(
            indicator.snapshot
                == .init(
                    enabled: true, state: .notActive, visible: false, activityCount: 0, activationDelay: 1,
                    completionDelay: 0.25))

        indicator.transferStarted(1)
        indicator.increment()
        scheduler.advance(by: 1)
        indicator.configure(completionDelay: 0.5)

        #expect(
            indicator.snapshot
                == .init(
                    enabled: true, state: .active, visible: true, activityCount: 2, activationDelay: 1,
                    completionDelay: 0.5))
        indicator.transferStopped(1)
        indicator.decrement()
        #expect(indicator.snapshot.state == .delayingEnd)
        #expect(indicator.snapshot.visible)
    }

    @Test func snapshotAndChangesAreWrittenAsTheDocumentSays() {
        let snapshot = ActivityIndicator.Snapshot(
            enabled: true, state: .delayingEnd, visible: true, activityCount: 2, activationDelay: 1, completionDelay: 0.5)
        #expect(
            snapshot.json
                == [
                    "enabled": true, "state": "delayingEnd", "visible": true, "activityCount": 2,
                    "activationDelay": 1.0, "completionDelay": 0.5,
                ])
        #expect(visibility(true, 1).notification.method == "indicator/visibility")
        #expect(visibility(true, 1).notification.params == ["visible": true, "activityCount": 1])
        #expect(visibility(false, 0).notification.params == ["visible": false, "activityCount": 0])
    }

    @Test func concurrentTransfersLeaveTheCountAtZero() {
        let (indicator, scheduler, recorder) = makeIndicator()
        let long = 1_000_000
        indicator.transferStarted(long)
        scheduler.advance(by: 1)

        // When many threads start, resume and stop transfers at once
        DispatchQueue.concurrentPerform(iterations: 1000) { index in
            indicator.transferStarted(index)
            indicator.transferStarted(index)
            indicator.increment()
            indicator.transferStopped(index)
            indicator.decrement()
            indicator.transferStopped(index)
        }
        indicator.transferStopped(long)
        scheduler.advance(by: 0.25)

        // Then the count is back at zero, shown once and hidden once
        #expect(indicator.activityCount == 0)
        #expect(recorder.take() == [visibility(true, 1), visibility(false, 0)])
    }
}
