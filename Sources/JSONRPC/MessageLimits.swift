/// How much one message may make a server hold, checked before the message
/// is parsed or its batch is run. Parsing makes a tree of every value (a
/// message of a million one-byte values takes hundreds of MiB as one), and
/// every entry of a batch gets an answer that waits for the others.
public struct MessageLimits: Sendable, Equatable {
    /// The most values one message may hold, nested ones included.
    public var maxValues: Int
    /// The most entries one batch may hold.
    public var maxBatchLength: Int

    public init(maxValues: Int = 100_000, maxBatchLength: Int = 10_000) {
        self.maxValues = maxValues
        self.maxBatchLength = maxBatchLength
    }

    /// Whether `bytes` hold more than `maxValues` values, counted without
    /// parsing them as one more than the `,`, `[` and `{` outside strings:
    /// at least the values there are, at most twice as many (an empty array
    /// or object counts two). Bytes that are not JSON count as they come.
    func holdsTooManyValues(_ bytes: [UInt8]) -> Bool {
        // Every value counted but the first is one byte.
        guard bytes.count >= maxValues else { return false }
        return bytes.withUnsafeBufferPointer { buffer in
            var count = 1
            var inString = false
            var escaped = false
            for byte in buffer {
                if inString {
                    if escaped {
                        escaped = false
                    } else if byte == UInt8(ascii: "\\") {
                        escaped = true
                    } else if byte == UInt8(ascii: "\"") {
                        inString = false
                    }
                } else if byte == UInt8(ascii: ",") || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") {
                    count += 1
                    if count > maxValues { return true }
                } else if byte == UInt8(ascii: "\"") {
                    inString = true
                }
            }
            return false
        }
    }
}
