import CFuzzDriver
import Foundation
import JSON
@testable import Courier
import SQLite

/// A libFuzzer harness for the response path's pure parsers; the first byte
/// picks one. Properties besides not crashing:
/// - a disk cache entry header that reads writes back to the same bytes;
/// - metadata that reads writes back to metadata that reads the same (a
///   binary head exactly, a JSON one with times within a rounding step);
/// - an HTTP date that parses formats to one that parses to the same instant;
/// - Cache-Control directives are lower case, trimmed and never empty, and
///   their delta-seconds within 0...2^31;
/// - the cache policy's lifetimes and ages stay within 0...2^31 seconds for
///   any header lines, statuses and times.
@main
enum FuzzHTTP {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
            guard let data else { return 0 }
            return fuzzHTTP(data, size)
        })
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let text = String(decoding: bytes, as: UTF8.self)
    switch data[0] % 5 {
    case 0: entryRow(bytes)
    case 1: metadata(bytes)
    case 2: date(text)
    case 3: cacheControl(text)
    default: policy(bytes)
    }
    return 0
}

/// A row of the disk tier's table, its six columns of types and values the
/// input picks: taken only when within the ranges `ResponseStore.Row` names.
private func entryRow(_ bytes: [UInt8]) {
    guard bytes.count >= 26 else { return }
    func integer(_ offset: Int) -> Int64 {
        bytes[offset..<(offset + 8)].withUnsafeBytes { Int64(littleEndian: $0.loadUnaligned(as: Int64.self)) }
    }
    let rest = Array(bytes[26...])
    let kinds = bytes[0]
    let file: SQLiteValue = kinds & 1 == 0 ? .null : .integer(integer(18))
    let body: SQLiteValue = kinds & 2 == 0 ? .null : (kinds & 4 == 0 ? .blob(rest) : .text("x"))
    let head: SQLiteValue = kinds & 8 == 0 ? .blob(rest) : .integer(1)
    let maximum: Int64 = 1 << 20
    let headChecksum: SQLiteValue = .integer(kinds & 16 == 0 ? Int64(bitPattern: XXH3.hash(rest)) : integer(1))
    let values: [SQLiteValue] = [.integer(integer(1)), head, .integer(integer(9)), .integer(Int64(bytes[17])), file, body, headChecksum]
    guard let row = ResponseStore.Row(values, maximumBodyLength: maximum) else { return }
    guard (0...maximum).contains(row.bodyLength) else { fatalError("a row of \(row.bodyLength) bytes taken") }
    switch row.body {
    case .inline(let inline):
        guard Int64(inline.count) == row.bodyLength, inline.count <= ResponseStore.inlineLimit else {
            fatalError("an inline body of \(inline.count) bytes for \(row.bodyLength)")
        }
    case .file(let id):
        // A body of any length may be a file (one written beside its
        // destination is linked, not copied inline): the row names the id given.
        guard kinds & 1 == 1, id == UInt64(bitPattern: integer(18)) else { fatalError("a body file \(id) taken from \(file)") }
    }
}

private func metadata(_ bytes: [UInt8]) {
    guard let (key, response) = DiskCacheEntry.parseMetadata(bytes) else { return }
    let written = DiskCacheEntry.metadata(key: key, response: response)
    guard let (key2, response2) = DiskCacheEntry.parseMetadata(written) else {
        fatalError("metadata \(String(decoding: bytes, as: UTF8.self)) wrote back unreadable")
    }
    // A binary head holds Date's own form: it reads back exactly.
    if StoredHead.isBinary(bytes), key2 != key || response2 != response {
        fatalError("binary head \(bytes) read back differently")
    }
    // JSON times go through Date, whose reference is 2001: allow a rounding step.
    func close(_ a: Date, _ b: Date) -> Bool { abs(a.timeIntervalSince(b)) <= 1e-6 * max(1, abs(a.timeIntervalSince1970)) }
    guard key2 == key, response2.status == response.status, response2.url == response.url,
        response2.varyValues == response.varyValues,
        response2.headers.elementsEqual(response.headers, by: { $0.name == $1.name && $0.value == $1.value }),
        close(response2.requestTime, response.requestTime), close(response2.responseTime, response.responseTime),
        close(response2.storedAt, response.storedAt)
    else { fatalError("metadata \(String(decoding: bytes, as: UTF8.self)) read back differently") }
    _ = HTTPCachePolicy.freshness(of: response, now: response.storedAt)
}

private func date(_ text: String) {
    guard let date = HTTPDate.parse(text) else { return }
    let formatted = HTTPDate.format(date)
    guard let again = HTTPDate.parse(formatted), again == date else {
        fatalError("date \(text) parsed as \(date.timeIntervalSince1970), formatted \(formatted), parsed back differently")
    }
}

private func cacheControl(_ text: String) {
    let control = CacheControl(parsing: text)
    for (name, _) in control.directives {
        guard !name.isEmpty, name == name.lowercased(), name == name.trimmingBlanks else {
            fatalError("directive name '\(name)' from '\(text)'")
        }
    }
    for value in [control.maxAge, control.sMaxAge, control.minFresh] {
        if let value, !(0...CacheControl.maximumDeltaSeconds).contains(value) { fatalError("delta \(value) from '\(text)'") }
    }
    if let stale = control.maxStale, !(stale == .infinity || (0...CacheControl.maximumDeltaSeconds).contains(stale)) {
        fatalError("max-stale \(stale) from '\(text)'")
    }
}

/// Header lines "name: value" as the transfer keeps them, then the policy.
private func policy(_ bytes: [UInt8]) {
    var reader = bytes[...]
    func number() -> Int {
        var value = 0
        for _ in 0..<4 { value = value << 8 | Int(reader.popFirst() ?? 0) }
        return value
    }
    let status = number() % 1200 - 100
    let requestTime = Date(timeIntervalSince1970: Double(number()))
    let responseTime = Date(timeIntervalSince1970: Double(number()))
    let now = Date(timeIntervalSince1970: Double(number()))
    var response: [(name: String, value: String)] = []
    var request: [(name: String, value: String)] = []
    for (index, line) in reader.split(separator: 0x0A).enumerated() {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
        let name = String(decoding: line[..<colon], as: UTF8.self).trimmingBlanks
        let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingBlanks
        if index % 3 == 2 { request.append((name, value)) } else { response.append((name, value)) }
    }
    _ = HTTPCachePolicy.isStorable(status: status, requestHeaders: request, responseHeaders: response)
    let cached = CachedResponse(
        status: status, headers: HTTPCachePolicy.storableHeaders(response), url: "https://example.org/",
        requestTime: requestTime, responseTime: responseTime,
        varyValues: HTTPCachePolicy.varyValues(requestHeaders: request, responseHeaders: response))
    let lifetime = HTTPCachePolicy.freshnessLifetime(of: cached)
    let age = HTTPCachePolicy.currentAge(of: cached, now: now)
    for value in [lifetime, age] where !(0...CacheControl.maximumDeltaSeconds).contains(value) {
        fatalError("lifetime \(lifetime), age \(age) out of range for \(response)")
    }
    _ = HTTPCachePolicy.freshness(of: cached, requestHeaders: request, now: now)
    _ = HTTPCachePolicy.matches(cached, requestHeaders: request)
    _ = HTTPCachePolicy.conditionalHeaders(for: cached)
    _ = HTTPCachePolicy.merging(notModified: response, into: cached, requestTime: now, responseTime: now)
    let metadata = DiskCacheEntry.metadata(key: "k", response: cached)
    if DiskCacheEntry.parseMetadata(metadata) == nil,
        cached.headers.allSatisfy({ HTTPField.isValidName($0.name) && DiskCacheEntry.isFieldValue($0.value) }),
        cached.varyValues.allSatisfy({ HTTPField.isValidName($0.key) && DiskCacheEntry.isFieldValue($0.value) }),
        (100...999).contains(status)
    {
        fatalError("a storable response's metadata does not read back: \(String(decoding: metadata, as: UTF8.self))")
    }
}
