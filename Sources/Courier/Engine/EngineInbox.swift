import Curl
import Locking

/// The engine's one inbox: commands from any thread, taken by the engine's
/// thread once per turn. The command that finds it empty wakes that thread
/// from its poll; those that follow it before the next turn need not.
final class EngineInbox<Command: Sendable>: Sendable {
    private let commands = Locked<[Command]>([])
    /// Wakes the engine's thread; it wakes nothing until the engine has made
    /// its multi handle, whose first turn takes what came before.
    let waker = MultiHandle.Waker()

    /// `command` moves into the inbox, rather than being copied there and
    /// destroyed here.
    func send(_ command: consuming Command) {
        var sent = Optional(command)
        let wasEmpty = commands.withLock { commands in
            commands.append(sent.take()!)
            return commands.count == 1
        }
        if wasEmpty { waker.wakeup() }
    }

    /// The commands sent since the last call, oldest first.
    func take() -> [Command] {
        commands.withLock { commands in
            defer { commands = [] }
            return commands
        }
    }
}
