#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension String {
    /// Whether both hold the same UTF-8 bytes (not merely equivalent text):
    /// the bytes libcurl is given, a URL's bytes as a client sent them.
    /// Compared in one `memcmp` where both strings hold their bytes in one
    /// piece (native strings do): a dictionary keyed by URLs compares a key
    /// with every one its look-up probes, every transfer's options are
    /// compared with its reused handle's, and stepping through `UTF8View`
    /// costs tens of instructions a byte.
    public func isExactly(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        // `elementsEqual` on the buffers would still step byte by byte.
        let compared = utf8.withContiguousStorageIfAvailable { mine in
            other.utf8.withContiguousStorageIfAvailable { theirs in
                mine.isEmpty || memcmp(mine.baseAddress!, theirs.baseAddress!, mine.count) == 0
            }
        }
        return (compared ?? nil) ?? utf8.elementsEqual(other.utf8)
    }
}
