/// A task's id: a number the scheduler issues in order, written `t42` in
/// answers and notifications. Ids compare by number, so `t9` comes before
/// `t10`.
struct TaskID: Hashable, Comparable, Sendable, CustomStringConvertible {
    let number: Int

    init(_ number: Int) { self.number = number }

    var description: String { "t\(number)" }

    static func < (lhs: TaskID, rhs: TaskID) -> Bool { lhs.number < rhs.number }
}
