/// A stored response's body as a cache hit hands it on: held in memory, or,
/// when it is too large for the memory tier, the disk tier's body file,
/// checked when it was found, held open, and read again (and checked again)
/// only as far as a receipt needs it: copied in bounded chunks or linked to
/// a file, never held whole unless a receipt asks for the bytes.
enum CachedBody: Sendable {
    case bytes([UInt8])
    case file(StoredBodyFile)

    var length: Int64 {
        switch self {
        case .bytes(let bytes): Int64(bytes.count)
        case .file(let file): file.length
        }
    }

    /// The body's digests by each of `algorithms`, taken from its bytes (a
    /// file's in bounded chunks); nil when the file cannot be read.
    func digests(_ algorithms: Set<HashAlgorithm>) -> BodyDigests? {
        switch self {
        case .bytes(let bytes): BodyDigests.of(bytes, algorithms)
        case .file(let file): file.digests(algorithms)
        }
    }
}
