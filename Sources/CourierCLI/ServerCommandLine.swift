import Courier
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The server's command line (`courier [<options>]`) read without
/// ArgumentParser, whose parse costs a client waiting for the `initialize`
/// answer a few milliseconds (mostly the Swift runtime's scans of every
/// protocol conformance in the binary, on the casts its property wrappers
/// need).
///
/// Only what ArgumentParser would read the same way is read here: every
/// argument a known `--name value`, `--name=value` or flag, and every value
/// valid. For anything else (`--help`, `--version`, `get`, an unknown flag,
/// a missing or bad value, `--`, a value that begins with `-`), `parse`
/// returns nil and ArgumentParser reads the whole command line again, so
/// help, version and every message stay its own.
enum ServerCommandLine {
    /// The settings `arguments` (the program's name left out) give, or nil
    /// when ArgumentParser must read them.
    static func parse(_ arguments: [[UInt8]]) -> ServerSettings? {
        var settings = ServerSettings()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.count > 2, argument[0] == dash, argument[1] == dash else { return nil }
            let equals = argument.firstIndex(of: UInt8(ascii: "="))
            let nameBytes = argument[2..<(equals ?? argument.endIndex)]
            guard !nameBytes.isEmpty, nameBytes.allSatisfy(isNameByte) else { return nil }
            let name = String(decoding: nameBytes, as: UTF8.self)

            if isFlag(name) {
                guard equals == nil, set(flag: name, in: &settings) else { return nil }
                continue
            }
            let value: String
            if let equals {
                // A value that starts with a byte outside ASCII might join
                // the `=` into one character, which ArgumentParser would not
                // split at.
                let rest = argument[(equals + 1)...]
                guard let first = rest.first, first < 0x80 else { return nil }
                value = String(decoding: rest, as: UTF8.self)
            } else {
                guard index < arguments.count else { return nil }
                let next = arguments[index]
                index += 1
                guard let first = next.first, first != dash else { return nil }
                value = String(decoding: next, as: UTF8.self)
            }
            guard set(option: name, to: value, in: &settings) else { return nil }
        }
        return settings.isValid ? settings : nil
    }

    /// The process's arguments, the program's name left out, as bytes read
    /// from `argv` (invalid UTF-8 in a value becomes U+FFFD, as in
    /// `CommandLine.arguments`, which this does not build).
    static var processArguments: [[UInt8]] {
        (1..<Int(CommandLine.argc)).map { index in
            guard let argument = CommandLine.unsafeArgv[index] else { return [] }
            return Array(UnsafeRawBufferPointer(start: argument, count: strlen(argument)))
        }
    }

    private static let dash = UInt8(ascii: "-")

    /// Lower-case ASCII letters, digits and `-`: every flag's name is made of
    /// them, so a name compares byte for byte.
    private static func isNameByte(_ byte: UInt8) -> Bool {
        (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || byte == dash
    }

    /// A switch rather than a `Set`, whose generic metadata would cost a
    /// scan of every protocol conformance.
    private static func isFlag(_ name: String) -> Bool {
        switch name {
        case "no-indicator", "allow-insecure-redirects": true
        default: false
        }
    }

    private static func set(flag name: String, in settings: inout ServerSettings) -> Bool {
        switch name {
        case "no-indicator": settings.noIndicator = true
        case "allow-insecure-redirects": settings.transfers.allowInsecureRedirects = true
        default: return false
        }
        return true
    }

    /// Sets option `name` from `value` as ArgumentParser does (the last of
    /// repeated options wins, `--allow-scheme` adds up); false for an
    /// unknown name or a value that does not parse.
    private static func set(option name: String, to value: String, in settings: inout ServerSettings) -> Bool {
        switch name {
        case "cache-dir": settings.cache.cacheDir = value
        case "memory-capacity": return assign(ByteSize.parse(value), to: &settings.cache.memoryCapacity)
        case "memory-after-purge":
            guard let size = ByteSize.parse(value) else { return false }
            settings.cache.memoryAfterPurge = size
        case "disk-capacity": return assign(ByteSize.parse(value), to: &settings.cache.diskCapacity)
        case "max-active": return assign(Int(value), to: &settings.maxActive)
        case "prioritization": settings.prioritization = value
        case "activation-delay": return assign(Double(value), to: &settings.activationDelay)
        case "completion-delay": return assign(Double(value), to: &settings.completionDelay)
        case "progress-interval": return assign(Double(value), to: &settings.progressInterval)
        case "download-root": settings.downloadRoot = value
        case "allow-scheme": settings.transfers.allowScheme.append(value)
        case "max-bytes":
            guard let size = ByteSize.parse(value) else { return false }
            settings.transfers.maxBytes = size
        case "timeout": return assign(Double(value), to: &settings.transfers.timeout)
        case "connect-timeout": return assign(Double(value), to: &settings.transfers.connectTimeout)
        case "low-speed-limit": return assign(ByteSize.parse(value), to: &settings.transfers.lowSpeedLimit)
        case "low-speed-time": return assign(Int(value), to: &settings.transfers.lowSpeedTime)
        case "ca-file": settings.transfers.caFile = value
        case "proxy": settings.transfers.proxy = value
        case "max-memory-body": return assign(ByteSize.parse(value), to: &settings.maxMemoryBody)
        case "partial-capacity": return assign(ByteSize.parse(value), to: &settings.partialCapacity)
        case "framing": settings.framing = value
        case "max-message-bytes": return assign(ByteSize.parse(value), to: &settings.maxMessageBytes)
        case "log-level": settings.logLevel = value
        case "retries": return assign(Int(value), to: &settings.retry.retries)
        case "retry-delay": return assign(Double(value), to: &settings.retry.retryDelay)
        case "retry-max-delay": return assign(Double(value), to: &settings.retry.retryMaxDelay)
        case "retry-max-time": return assign(Double(value), to: &settings.retry.retryMaxTime)
        case "max-download-rate": return assign(RateLimitOption.rate(value), to: &settings.maxDownloadRate)
        default: return false
        }
        return true
    }

    private static func assign<Value>(_ parsed: Value?, to target: inout Value) -> Bool {
        guard let parsed else { return false }
        target = parsed
        return true
    }
}
