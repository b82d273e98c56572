/// The view categories (UIActivityIndicatorView, UIRefreshControl,
/// UIProgressView) as notifications: client-named views bound to tasks, told
/// `view/animating {view, animating}` or
/// `view/progress {view, fraction, received, expected}` as their task moves.
///
/// A view has at most one binding; binding again replaces it, and from then
/// on the old task never reaches the view. Many views may follow one task.
/// Each view hears only changes: an animating view is told when its value
/// differs from the last one it was told, a progress view when `received`
/// or `expected` differs, and `received` never goes backwards for a view.
/// Views following one task are told in the order they were bound.
///
/// A value: it lives inside the scheduler's state, and what views are told
/// is taken with `takeNotices()` in the order it happened.
struct ViewBindings: Sendable {

    /// One view's binding, and what that view was last told.
    struct Binding: Hashable, Sendable {
        var task: TaskID
        var kind: BindingKind
        fileprivate var animating = false
        fileprivate var received: Int64 = 0
        fileprivate var expected: Int64?
    }

    /// By view name, compared as bytes.
    private var bindings: [ExactString: Binding] = [:]
    /// The views bound to each task, in the order they were bound.
    private var viewsByTask: [TaskID: [ExactString]] = [:]
    private var notices: [ViewNotice] = []

    /// What views were told since the last call, oldest first.
    mutating func takeNotices() -> [ViewNotice] {
        defer { notices = [] }
        return notices
    }

    /// The binding of `view`, if it has one.
    func binding(of view: String) -> Binding? { bindings[ExactString(view)] }

    /// The views following `task`, in the order they were bound.
    func views(boundTo task: TaskID) -> [String] { (viewsByTask[task] ?? []).map(\.value) }

    /// Binds `view` to `task`, replacing any binding it had. `snapshot` is
    /// the task's state now, nil when it has finished: then nothing is sent,
    /// the view is left unbound and the result is false. Otherwise the view
    /// is told the current state at once.
    @discardableResult
    mutating func bind(view: String, task: TaskID, kind: BindingKind, snapshot: TaskSnapshot?) -> Bool {
        unbind(view: view)
        guard let snapshot else { return false }
        var binding = Binding(task: task, kind: kind)
        switch kind {
        case .animating:
            binding.animating = snapshot.running
            sendAnimating(view: view, binding)
        case .progress:
            binding.received = max(0, snapshot.received)
            binding.expected = snapshot.expected
            sendProgress(view: view, binding)
        }
        bindings[ExactString(view)] = binding
        viewsByTask[task, default: []].append(ExactString(view))
        return true
    }

    /// Ends the binding of `view`, if it has one. Nothing is sent.
    mutating func unbind(view: String) {
        let view = ExactString(view)
        guard let old = bindings.removeValue(forKey: view) else { return }
        viewsByTask[old.task]?.removeAll { $0 == view }
        if viewsByTask[old.task]?.isEmpty == true { viewsByTask[old.task] = nil }
    }

    /// The task started or resumed (`running`), or was suspended.
    mutating func taskStateChanged(task: TaskID, running: Bool) {
        for view in views(boundTo: task) {
            updateAnimating(view: view, to: running)
        }
    }

    /// The task's download progress.
    mutating func taskProgress(task: TaskID, received: Int64, expected: Int64?) {
        for view in views(boundTo: task) {
            updateProgress(view: view, received: received, expected: expected)
        }
    }

    /// The task has finished (succeeded, failed or was cancelled): animating
    /// views are told `false` unless that is what they last heard, progress
    /// views get the final counts when given and different from what they
    /// last heard (pass `expected` equal to `received` after a success so
    /// the view reaches a fraction of 1), and every binding to the task ends.
    mutating func taskFinished(task: TaskID, received: Int64? = nil, expected: Int64? = nil) {
        let views = viewsByTask.removeValue(forKey: task) ?? []
        for view in views {
            guard let binding = bindings[view] else { continue }
            switch binding.kind {
            case .animating:
                updateAnimating(view: view.value, to: false)
            case .progress:
                if let received {
                    updateProgress(view: view.value, received: received, expected: expected)
                }
            }
            bindings[view] = nil
        }
    }

    private mutating func updateAnimating(view: String, to running: Bool) {
        guard var binding = bindings[ExactString(view)], binding.kind == .animating, binding.animating != running else {
            return
        }
        binding.animating = running
        bindings[ExactString(view)] = binding
        sendAnimating(view: view, binding)
    }

    private mutating func updateProgress(view: String, received: Int64, expected: Int64?) {
        guard var binding = bindings[ExactString(view)], binding.kind == .progress else { return }
        let received = max(binding.received, received)
        guard received != binding.received || expected != binding.expected else { return }
        binding.received = received
        binding.expected = expected
        bindings[ExactString(view)] = binding
        sendProgress(view: view, binding)
    }

    private mutating func sendAnimating(view: String, _ binding: Binding) {
        notices.append(.animating(view: view, animating: binding.animating))
    }

    private mutating func sendProgress(view: String, _ binding: Binding) {
        notices.append(.progress(view: view, received: binding.received, expected: binding.expected))
    }
}

/// What a bound view is told: `view/animating` or `view/progress`.
enum ViewNotice: Hashable, Sendable {
    case animating(view: String, animating: Bool)
    case progress(view: String, received: Int64, expected: Int64?)

    var fraction: Double? {
        guard case .progress(_, let received, let expected?) = self, expected > 0 else { return nil }
        return min(1, Double(received) / Double(expected))
    }
}
