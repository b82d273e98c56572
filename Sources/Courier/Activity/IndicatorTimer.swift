/// A timer started by an `IndicatorScheduler`.
public protocol IndicatorTimer: Sendable {
    /// Keeps the timer's action from running if it has not started yet.
    /// Cancelling twice, or after the action ran, does nothing. An action
    /// that is already due may have started on another thread and still
    /// run, so actions must check that they are still wanted (the indicator
    /// compares timer tokens).
    func cancel()
}
