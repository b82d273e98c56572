/// What a notification sent with a coalescing key stands for: a newer
/// message with an equal key replaces an older one still waiting (see
/// `Connection.send(notification:params:coalescingKey:)`). A name and the
/// numbers it is about, compared whole, so that a key made for every
/// notice needs no text built for it.
public struct CoalescingKey: Hashable, Sendable, ExpressibleByStringLiteral {
    private let name: String
    private let numbers: [Int]

    public init(_ name: String, numbers: [Int] = []) {
        self.name = name
        self.numbers = numbers
    }

    public init(stringLiteral name: String) {
        self.init(name)
    }
}
