import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How `courier get` writes sizes, rates and durations.
enum Units {
    /// `512 B`, `1.5 KiB`, `20.0 MiB`.
    static func bytes(_ count: Int64) -> String {
        var value = Double(count)
        for unit in ["B", "KiB", "MiB", "GiB", "TiB"] {
            if value < 1024 || unit == "TiB" {
                return unit == "B" ? "\(count) B" : Units.format("%.1f", value) + " " + unit
            }
            value /= 1024
        }
        return "\(count) B"
    }

    /// `1.2 / 3.4 MiB`, or `512.0 KiB / 3.4 MiB` when the units differ.
    static func bytes(_ count: Int64, of total: Int64) -> String {
        let (done, whole) = (bytes(count), bytes(total))
        guard let space = done.lastIndex(of: " "), let wholeSpace = whole.lastIndex(of: " "),
            done[space...] == whole[wholeSpace...]
        else { return "\(done) / \(whole)" }
        return "\(done[..<space]) / \(whole)"
    }

    /// `120.5 KiB/s`; `-- B/s` while unknown.
    static func rate(_ bytesPerSecond: Double?) -> String {
        guard let bytesPerSecond else { return "-- B/s" }
        return bytes(Int64(bytesPerSecond.rounded())) + "/s"
    }

    /// `0:42`, `1:02:03`; `--:--` while the rate is unknown or zero.
    static func eta(remaining: Int64, rate: Double?) -> String {
        guard let rate, rate > 0 else { return "--:--" }
        let seconds = Int((Double(max(0, remaining)) / rate).rounded(.up))
        guard seconds < 100 * 3600 else { return "--:--" }
        let (hours, minutes, rest) = (seconds / 3600, seconds / 60 % 60, seconds % 60)
        return hours > 0 ? format("%d:%02d:%02d", hours, minutes, rest) : format("%d:%02d", minutes, rest)
    }

    /// `arguments` written by C's `printf` rules.
    static func format(_ format: String, _ arguments: any CVarArg...) -> String {
        withVaList(arguments) { list in
            var buffer = [CChar](repeating: 0, count: 64)
            let needed = Int(vsnprintf(&buffer, buffer.count, format, list))
            guard needed >= buffer.count else { return text(of: buffer) }
            buffer = [CChar](repeating: 0, count: needed + 1)
            return withVaList(arguments) { again in
                vsnprintf(&buffer, buffer.count, format, again)
                return text(of: buffer)
            }
        }
    }

    /// The text of a C string held in `buffer`, up to its first NUL.
    private static func text(of buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
