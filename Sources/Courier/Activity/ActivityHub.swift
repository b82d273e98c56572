/// Feeds what tasks do to the activity indicator and to the views bound to
/// them. Its methods are called under the downloader's lock.
final class ActivityHub: TaskActivityObserver, @unchecked Sendable {
    let indicator: ActivityIndicator
    let bindings: ViewBindings

    init(indicator: ActivityIndicator, bindings: ViewBindings) {
        self.indicator = indicator
        self.bindings = bindings
    }

    func transferStarted(task: String) {
        indicator.transferStarted(task)
        bindings.taskStateChanged(task: task, running: true)
    }

    func transferStopped(task: String) {
        indicator.transferStopped(task)
        bindings.taskStateChanged(task: task, running: false)
    }

    func taskProgress(task: String, received: Int64, expected: Int64?) {
        bindings.taskProgress(task: task, received: received, expected: expected)
    }

    func taskFinished(task: String, finalSize: Int64?) {
        indicator.transferStopped(task)
        bindings.taskFinished(task: task, received: finalSize, expected: finalSize)
    }
}
