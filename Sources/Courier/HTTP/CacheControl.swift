import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The directives of `Cache-Control` header lines (RFC 9111 §5.2), names in
/// lower case. A directive given twice counts from its first occurrence.
struct CacheControl: Sendable, Equatable {
    /// Directive name → argument, unquoted; "" for a directive without one.
    var directives: [String: String] = [:]

    /// The directives of every `Cache-Control` line among `headers` (names
    /// compared without case).
    init(_ headers: [(name: String, value: String)]) {
        for (name, value) in headers where name.utf8.count == 13 && HTTPCachePolicy.isNamed(name, "cache-control") {
            add(value)
        }
    }

    /// No directive.
    init() {}

    init(parsing value: String) {
        add(value)
    }

    var noStore: Bool { directives["no-store"] != nil }
    /// `no-cache`, with or without a field list (both taken as "always revalidate").
    var noCache: Bool { directives["no-cache"] != nil }
    var mustRevalidate: Bool { directives["must-revalidate"] != nil }
    var isPublic: Bool { directives["public"] != nil }
    var isPrivate: Bool { directives["private"] != nil }
    var maxAge: TimeInterval? { seconds("max-age") }
    var sMaxAge: TimeInterval? { seconds("s-maxage") }
    var minFresh: TimeInterval? { seconds("min-fresh") }
    /// `max-stale` without an argument accepts any staleness: infinity.
    var maxStale: TimeInterval? {
        guard let argument = directives["max-stale"] else { return nil }
        return argument.isEmpty ? .infinity : seconds("max-stale")
    }

    /// The largest delta-seconds courier represents: 2^31 (RFC 9111 §1.2.2).
    static let maximumDeltaSeconds: TimeInterval = 2_147_483_648

    /// A delta-seconds value (RFC 9111 §1.2.2): ASCII digits only, no sign,
    /// no fraction, no exponent; one too large counts as 2^31. Nil when
    /// `text` is not one.
    static func deltaSeconds(_ text: some StringProtocol) -> TimeInterval? {
        guard !text.utf8.isEmpty else { return nil }
        var value = 0
        for byte in text.utf8 {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            // Past 2^31 the value stays there: no overflow, however long.
            value = min(value * 10 + Int(byte - UInt8(ascii: "0")), Int(maximumDeltaSeconds))
        }
        return TimeInterval(value)
    }

    /// A delta-seconds argument; one that is not a number counts as 0
    /// (stale), one too large as 2^31 (RFC 9111 §1.2.2).
    private func seconds(_ name: String) -> TimeInterval? {
        guard let argument = directives[name] else { return nil }
        return Self.deltaSeconds(argument) ?? 0
    }

    /// Adds the directives of one `Cache-Control` line.
    mutating func add(_ value: String) {
        var name = ""
        var argument = ""
        var inArgument = false
        var quoted = false
        var escaped = false
        func flush() {
            let key = name.trimmingBlanks.lowercased()
            if !key.isEmpty, directives[key] == nil {
                directives[key] = argument.trimmingBlanks
            }
            name = ""
            argument = ""
            inArgument = false
        }
        for character in value {
            if quoted {
                if escaped {
                    argument.append(character)
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    quoted = false
                } else {
                    argument.append(character)
                }
            } else if character == "," {
                flush()
            } else if inArgument {
                if character == "\"" { quoted = true } else { argument.append(character) }
            } else if character == "=" {
                inArgument = true
            } else {
                name.append(character)
            }
        }
        flush()
    }
}
