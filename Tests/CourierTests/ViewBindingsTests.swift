import JSON
import Testing

@testable import Courier

private struct Sent: Hashable, CustomStringConvertible {
    var method: String
    var params: JSON
    var description: String { "\(method) \(params)" }
}

private func animating(_ view: String, _ value: Bool) -> Sent {
    Sent(method: "view/animating", params: ["view": .string(view), "animating": .bool(value)])
}

private func progress(_ view: String, _ received: Int64, _ expected: Int64?, fraction: Double?) -> Sent {
    Sent(
        method: "view/progress",
        params: [
            "view": .string(view), "received": .integer(received),
            "expected": expected.map(JSON.integer) ?? .null, "fraction": fraction.map(JSON.double) ?? .null,
        ])
}

/// Bindings and what their views were told, as the wire carries it.
private final class Harness {
    var bindings = ViewBindings()

    /// The notifications since the last call.
    func take() -> [Sent] {
        bindings.takeNotices().map { notice in
            let (method, params) = notice.notification
            return Sent(method: method, params: params)
        }
    }
}

private let running = TaskSnapshot(running: true, received: 0, expected: nil)

@Suite(.timeLimit(.minutes(1)))
struct ViewBindingsTests {
    @Test func bindingSendsTheCurrentStateAtOnce() {
        let harness = Harness()

        harness.bindings.bind(view: "spinner", task: TaskID(1), kind: .animating, snapshot: running)
        harness.bindings.bind(
            view: "paused", task: TaskID(2), kind: .animating,
            snapshot: TaskSnapshot(running: false, received: 0, expected: nil))
        harness.bindings.bind(
            view: "bar", task: TaskID(1), kind: .progress,
            snapshot: TaskSnapshot(running: true, received: 250, expected: 1000))
        harness.bindings.bind(
            view: "unknown", task: TaskID(1), kind: .progress,
            snapshot: TaskSnapshot(running: true, received: 10, expected: nil))

        #expect(
            harness.take() == [
                animating("spinner", true), animating("paused", false), progress("bar", 250, 1000, fraction: 0.25),
                progress("unknown", 10, nil, fraction: nil),
            ])
    }

    @Test func bindingToAFinishedTaskSendsNothingAndLeavesTheViewUnbound() {
        let harness = Harness()
        harness.bindings.bind(view: "spinner", task: TaskID(1), kind: .animating, snapshot: running)
        _ = harness.take()

        let bound = harness.bindings.bind(view: "spinner", task: TaskID(3), kind: .animating, snapshot: nil)

        #expect(!bound)
        #expect(harness.take() == [])
        #expect(harness.bindings.binding(of: "spinner") == nil)
        harness.bindings.taskStateChanged(task: TaskID(1), running: false)
        harness.bindings.taskFinished(task: TaskID(3))
        #expect(harness.take() == [])
    }

    @Test func animatingFollowsTheTaskAndSendsOnlyChanges() {
        let harness = Harness()
        harness.bindings.bind(
            view: "spinner", task: TaskID(1), kind: .animating,
            snapshot: TaskSnapshot(running: false, received: 0, expected: nil))

        harness.bindings.taskStateChanged(task: TaskID(1), running: true)
        harness.bindings.taskStateChanged(task: TaskID(1), running: true)
        harness.bindings.taskProgress(task: TaskID(1), received: 10, expected: nil)
        harness.bindings.taskStateChanged(task: TaskID(1), running: false)
        harness.bindings.taskStateChanged(task: TaskID(1), running: true)
        harness.bindings.taskFinished(task: TaskID(1), received: 10, expected: 10)
        harness.bindings.taskStateChanged(task: TaskID(1), running: true)

        #expect(
            harness.take() == [
                animating("spinner", false), animating("spinner", true), animating("spinner", false),
                animating("spinner", true), animating("spinner", false),
            ])
        #expect(harness.bindings.binding(of: "spinner") == nil)
    }

    @Test func suspendedThenCancelledTaskDoesNotRepeatFalse() {
        let harness = Harness()
        harness.bindings.bind(view: "spinner", task: TaskID(1), kind: .animating, snapshot: running)
        harness.bindings.taskStateChanged(task: TaskID(1), running: false)

        harness.bindings.taskFinished(task: TaskID(1))

        #expect(harness.take() == [animating("spinner", true), animating("spinner", false)])
        #expect(harness.bindings.views(boundTo: TaskID(1)) == [])
    }

    @Test func progressIsMonotonicAndSkipsRepeats() {
        let harness = Harness()
        harness.bindings.bind(view: "bar", task: TaskID(1), kind: .progress, snapshot: running)

        harness.bindings.taskProgress(task: TaskID(1), received: 100, expected: nil)
        harness.bindings.taskProgress(task: TaskID(1), received: 100, expected: nil)
        harness.bindings.taskProgress(task: TaskID(1), received: 100, expected: 400)
        harness.bindings.taskProgress(task: TaskID(1), received: 50, expected: 400)
        harness.bindings.taskProgress(task: TaskID(1), received: 200, expected: 400)
        harness.bindings.taskStateChanged(task: TaskID(1), running: false)

        #expect(
            harness.take() == [
                progress("bar", 0, nil, fraction: nil), progress("bar", 100, nil, fraction: nil),
                progress("bar", 100, 400, fraction: 0.25), progress("bar", 200, 400, fraction: 0.5),
            ])
    }

    @Test func zeroExpectedGivesNullFraction() {
        let harness = Harness()
        harness.bindings.bind(
            view: "bar", task: TaskID(1), kind: .progress, snapshot: TaskSnapshot(running: true, received: 0, expected: 0))

        #expect(harness.take() == [progress("bar", 0, 0, fraction: nil)])
    }

    @Test func progressEndsWithTheTask() {
        let harness = Harness()
        harness.bindings.bind(view: "bar", task: TaskID(1), kind: .progress, snapshot: running)
        harness.bindings.taskProgress(task: TaskID(1), received: 300, expected: nil)

        // The final counts differ: one last notification, then the binding ends.
        harness.bindings.taskFinished(task: TaskID(1), received: 400, expected: 400)
        harness.bindings.taskProgress(task: TaskID(1), received: 500, expected: 500)

        #expect(
            harness.take() == [
                progress("bar", 0, nil, fraction: nil), progress("bar", 300, nil, fraction: nil),
                progress("bar", 400, 400, fraction: 1),
            ])
        #expect(harness.bindings.binding(of: "bar") == nil)
    }

    @Test func finishWithUnchangedOrNoCountsSendsNoProgress() {
        let harness = Harness()
        harness.bindings.bind(view: "a", task: TaskID(1), kind: .progress, snapshot: running)
        harness.bindings.bind(view: "b", task: TaskID(2), kind: .progress, snapshot: running)
        harness.bindings.taskProgress(task: TaskID(1), received: 400, expected: 400)
        _ = harness.take()

        harness.bindings.taskFinished(task: TaskID(1), received: 400, expected: 400)
        harness.bindings.taskFinished(task: TaskID(2))

        #expect(harness.take() == [])
        #expect(harness.bindings.binding(of: "a") == nil)
        #expect(harness.bindings.binding(of: "b") == nil)
    }

    @Test func rebindingReplacesAndTheOldTaskNeverReachesTheView() {
        let harness = Harness()
        harness.bindings.bind(view: "v", task: TaskID(1), kind: .progress, snapshot: running)
        harness.bindings.taskProgress(task: TaskID(1), received: 100, expected: 1000)

        // When the view is rebound mid-transfer, even with the other kind
        harness.bindings.bind(view: "v", task: TaskID(2), kind: .animating, snapshot: running)
        harness.bindings.taskProgress(task: TaskID(1), received: 900, expected: 1000)
        harness.bindings.taskStateChanged(task: TaskID(1), running: false)
        harness.bindings.taskFinished(task: TaskID(1), received: 1000, expected: 1000)
        harness.bindings.taskStateChanged(task: TaskID(2), running: false)

        #expect(
            harness.take() == [
                progress("v", 0, nil, fraction: nil), progress("v", 100, 1000, fraction: 0.1),
                animating("v", true), animating("v", false),
            ])
        #expect(harness.bindings.binding(of: "v")?.task == TaskID(2))
        #expect(harness.bindings.views(boundTo: TaskID(1)) == [])
    }

    @Test func rebindingToTheSameTaskSendsTheStateAgain() {
        let harness = Harness()
        harness.bindings.bind(view: "v", task: TaskID(1), kind: .animating, snapshot: running)
        harness.bindings.bind(view: "v", task: TaskID(1), kind: .animating, snapshot: running)
        harness.bindings.taskStateChanged(task: TaskID(1), running: false)

        #expect(harness.take() == [animating("v", true), animating("v", true), animating("v", false)])
        #expect(harness.bindings.views(boundTo: TaskID(1)) == ["v"])
    }

    @Test func unbindStopsNotifications() {
        let harness = Harness()
        harness.bindings.bind(view: "v", task: TaskID(1), kind: .animating, snapshot: running)
        _ = harness.take()

        harness.bindings.unbind(view: "v")
        harness.bindings.unbind(view: "never-bound")
        harness.bindings.taskStateChanged(task: TaskID(1), running: false)
        harness.bindings.taskFinished(task: TaskID(1))

        #expect(harness.take() == [])
    }

    @Test func manyViewsFollowOneTaskInTheOrderTheyWereBound() {
        let harness = Harness()
        harness.bindings.bind(view: "s1", task: TaskID(1), kind: .animating, snapshot: running)
        harness.bindings.bind(view: "p1", task: TaskID(1), kind: .progress, snapshot: running)
        harness.bindings.bind(view: "s2", task: TaskID(1), kind: .animating, snapshot: running)
        harness.bindings.bind(view: "other", task: TaskID(2), kind: .animating, snapshot: running)
        _ = harness.take()

        harness.bindings.taskProgress(task: TaskID(1), received: 5, expected: 10)
        harness.bindings.taskStateChanged(task: TaskID(1), running: false)
        harness.bindings.taskFinished(task: TaskID(1), received: 10, expected: 10)

        #expect(
            harness.take() == [
                progress("p1", 5, 10, fraction: 0.5), animating("s1", false), animating("s2", false),
                progress("p1", 10, 10, fraction: 1),
            ])
        #expect(harness.bindings.views(boundTo: TaskID(1)) == [])
        #expect(harness.bindings.views(boundTo: TaskID(2)) == ["other"])
    }
}
