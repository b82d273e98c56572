import Curl

/// The status line and headers of a response.
struct ResponseHead: Sendable {
    var status: Int
    /// In arrival order, names in lower case.
    var headers: [(name: String, value: String)]
    var finalURL: String?
    /// The protocol version of the status line: "1.0", "1.1", "2" or "3".
    var httpVersion: String?
    /// The bytes of the last validator field of a name
    /// (`Validators.fieldNames`) when they are not UTF-8: `headers` holds
    /// them as text, with U+FFFD in their place.
    var rawValues: [String: [UInt8]] = [:]

    /// The last field named `name` (in lower case). Names of another
    /// length are passed over without a string comparison, which a lookup
    /// per response over every field would otherwise make; the others are
    /// compared as bytes (a name is a token, ASCII alone). Each name is read
    /// where the list holds it: a search through `last(where:)` copied
    /// every field it looked at, both strings retained and released.
    func header(_ name: String) -> String? {
        let length = name.utf8.count
        var index = headers.endIndex
        while index > headers.startIndex {
            index -= 1
            if headers[index].name.utf8.count == length, headers[index].name.isExactly(name) { return headers[index].value }
        }
        return nil
    }

    /// The last field named `name` as the origin sent it: what goes back to
    /// it in a request.
    func headerBytes(_ name: String) -> [UInt8]? {
        rawValues[name] ?? header(name).map { Array($0.utf8) }
    }

    var contentType: String? { header("content-type") }

    /// The body's size as announced, when it is the size of what courier will
    /// receive (not of an encoded form). The digits are read from the
    /// value's own bytes, not through the generic string view.
    var announcedLength: Int64? {
        // The last `Content-Length` and `Content-Encoding` found in one pass
        // from the end, names of other lengths passed over.
        var length: String?
        var encoding: String?
        var index = headers.endIndex
        while index > headers.startIndex, length == nil || encoding == nil {
            index -= 1
            switch headers[index].name.utf8.count {
            case 14 where length == nil && headers[index].name.isExactly("content-length"):
                length = headers[index].value
            case 16 where encoding == nil && headers[index].name.isExactly("content-encoding"):
                encoding = headers[index].value
            default:
                break
            }
        }
        guard encoding.map({ $0.lowercased() == "identity" }) ?? true, let value = length else { return nil }
        return value.utf8.withContiguousStorageIfAvailable { HTTPField.decimal(HTTPField.trimmingBlanks($0)) }
            ?? HTTPField.decimal(HTTPField.trimmingBlanks(value.utf8))
    }

    /// The head of the whole representation a `206` completes when it
    /// carries the rest of a kept body: status 200, `Content-Length` the
    /// complete length, no `Content-Range`.
    func whole(length: Int64) -> ResponseHead {
        var whole = self
        whole.status = 200
        whole.headers = headers.filter { $0.name != "content-range" && $0.name != "content-length" }
        whole.headers.append(("content-length", String(length)))
        return whole
    }

    /// Repeated headers joined with ", ", as HTTP allows.
    var headerObject: [String: String] { Self.joined(headers) }

    /// Sized for every field at once, and each name hashed once unless it
    /// repeats: made for every outcome and every stored response.
    static func joined(_ headers: [(name: String, value: String)]) -> [String: String] {
        // Made at its size: growing an empty one resizes it through the
        // generic path, which costs more than the fields' insertions.
        var object = [String: String](minimumCapacity: headers.count)
        for (name, value) in headers {
            if let existing = object.updateValue(value, forKey: name) {
                object[name] = existing + ", " + value
            }
        }
        return object
    }
}
