/// What `courier get` is told a body must hash to, as the `integrity` param
/// takes it: `--integrity` in Subresource Integrity form, or aria2c's
/// `--checksum=TYPE=HEX` turned into that form.
public enum ExpectedDigest {
    /// Why a value cannot be used, as a sentence.
    public struct Malformed: Error, Sendable {
        public let message: String
    }

    /// `text`, checked as the `integrity` param is checked.
    public static func integrity(_ text: String) throws(Malformed) -> String {
        do throws(Integrity.Malformed) {
            _ = try Integrity(parsing: text)
        } catch {
            throw Malformed(message: error.message)
        }
        return text
    }

    /// aria2c's `TYPE=HEX` (`sha-256=9f86…`; `sha256` is read too, ASCII
    /// case ignored) as `sha256-<base64>`. Only the SHA-2 types courier
    /// checks are taken: `md5` and `sha-1` prove nothing against a hostile
    /// origin.
    public static func checksum(_ text: String) throws(Malformed) -> String {
        let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let type = parts[0].lowercased().filter { $0 != "-" }
        guard parts.count == 2, let algorithm = HashAlgorithm(rawValue: type) else {
            throw Malformed(message: "checksum '\(text)' is not TYPE=HEX with TYPE sha-256, sha-384 or sha-512")
        }
        let hex = Array(parts[1].utf8)
        guard hex.count == 2 * algorithm.digestLength, let digest = bytes(hex: hex) else {
            throw Malformed(
                message: "the \(parts[0]) checksum is not \(2 * algorithm.digestLength) hexadecimal digits")
        }
        return BodyDigests.text(algorithm, digest)
    }

    private static func bytes(hex: [UInt8]) -> [UInt8]? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.count / 2)
        var index = 0
        while index + 1 < hex.count {
            guard let high = RemoteFileName.hexValue(hex[index]),
                let low = RemoteFileName.hexValue(hex[index + 1])
            else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}
