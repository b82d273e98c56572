/// Follows what tasks do, for the activity indicator and view bindings.
/// Called with the downloader's lock held, in the order things happen.
protocol TaskActivityObserver: AnyObject, Sendable {
    /// A transfer began moving bytes, or resumed.
    func transferStarted(task: String)
    /// A transfer stopped moving bytes: suspended, finished, failed or
    /// cancelled. Called at most once after each `transferStarted`.
    func transferStopped(task: String)
    func taskProgress(task: String, received: Int64, expected: Int64?)
    /// The task ended; no more events name it. `finalSize` is the body's
    /// size when the transfer completed, nil when it failed or was cancelled.
    func taskFinished(task: String, finalSize: Int64?)
}
