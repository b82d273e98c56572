/// What a bound view shows of its task.
public enum BindingKind: String, Sendable, CaseIterable {
    /// UIActivityIndicatorView, UIRefreshControl: `view/animating`.
    case animating
    /// UIProgressView: `view/progress`.
    case progress
}
