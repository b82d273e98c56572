import CJanssonShim
import CLibjansson
import Synchronization

/// An object made into jansson's tree once, for members that many
/// messages repeat word for word (a stored response's headers in the
/// outcome of each of its hits): a message made with it
/// (`JSONMessage(estimate:sharing:object:)`) takes the tree by reference
/// (`JSONObjectWriter.set(_:shared:or:)`) instead of building it anew.
///
/// The tree is reached only under the lock, and a message that shares it
/// is built, written and freed under the lock too, so nothing outside
/// ever holds it.
public final class SharedJSON: Sendable {
    private let tree: Mutex<UnsafeMutablePointer<json_t>>

    /// An object of string members, whatever order `members` has.
    public init(strings members: [String: String]) {
        tree = Mutex(JSONObjectWriter.stringObject(members))
    }

    /// Runs `body` with the tree, under the lock.
    func withTree(_ body: (UnsafeMutablePointer<json_t>) -> Void) {
        tree.withLock { body($0) }
    }

    deinit {
        tree.withLock { courier_json_decref($0) }
    }
}
