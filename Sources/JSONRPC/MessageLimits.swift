#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
            var index = 0
            while index < buffer.count {
                let byte = buffer[index]
                index += 1
                if byte == UInt8(ascii: "\"") {
                    // A string's bytes count for nothing: skipped at once.
                    guard let end = Self.stringEnd(in: buffer, from: index) else { return false }
                    index = end + 1
                } else if byte == UInt8(ascii: ",") || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") {
                    count += 1
                    if count > maxValues { return true }
                }
            }
            return false
        }
    }

    /// Where the string whose text starts at `start` ends: the first quote
    /// after it that an even run of backslashes (each escaping the next)
    /// leads to. Nil when the string runs to the end.
    static func stringEnd(in buffer: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        guard let base = buffer.baseAddress else { return nil }
        var from = start
        while from < buffer.count {
            // memchr: a string's bytes are most of a request's.
            guard let found = memchr(base + from, Int32(UInt8(ascii: "\"")), buffer.count - from) else { return nil }
            let quote = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            var backslashes = 0
            while quote - backslashes > start, buffer[quote - backslashes - 1] == UInt8(ascii: "\\") { backslashes += 1 }
            if backslashes % 2 == 0 { return quote }
            from = quote + 1
        }
        return nil
    }
}
