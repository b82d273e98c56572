#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Each receipt's `integrity` held against one body, between the end of a
/// transfer (or a revalidation) and the delivery: a receipt the body does
/// not match gets `integrity_mismatch` and nothing else, and a body that
/// failed any receipt's check is stored in neither cache tier.
struct IntegrityCheck {
    /// Per receipt, in order: the failure of its check, or nil when it gave
    /// no `integrity` or the body matches it; empty when none gave one.
    let failures: [TransferFailure?]
    /// The body's digests: those taken as it streamed, and those taken
    /// here for algorithms a receipt named that the transfer was not asked
    /// for (the receipt joined the task after it started).
    let digests: BodyDigests

    /// Whether no receipt's check failed.
    var passed: Bool { failures.allSatisfy { $0 == nil } }

    /// Checks `requests` against a body whose digests `taken` are; the body's
    /// digests by any other algorithm they name come from `digest`, which
    /// reads the body (nil when it cannot: those receipts fail `io`).
    init(_ requests: some Collection<DownloadRequest>, taken: BodyDigests, digest: (Set<HashAlgorithm>) -> BodyDigests?) {
        // Most downloads name no digest: nothing to gather or hold.
        guard requests.contains(where: { $0.integrity != nil }) else {
            (failures, digests) = ([], taken)
            return
        }
        let missing = Set(requests.compactMap { $0.integrity?.algorithm }).subtracting(taken.algorithms)
        let read = missing.isEmpty ? BodyDigests() : digest(missing)
        let digests = taken.merging(read ?? BodyDigests())
        self.digests = digests
        failures = requests.map { request in
            guard let integrity = request.integrity else { return nil }
            guard digests[integrity.algorithm] != nil else {
                return TransferFailure(code: .io, message: "cannot read the body back to check its integrity")
            }
            return integrity.mismatch(in: digests)
        }
    }

    /// The digests of the `length` bytes of the file `name` in `directory`
    /// by each of `algorithms`, read in bounded chunks; nil when it is not a
    /// regular file of that length or cannot be read.
    static func digests(
        ofFile name: String, in directory: DirectoryHandle, length: Int64, _ algorithms: Set<HashAlgorithm>
    ) -> BodyDigests? {
        guard let (fd, info) = directory.openFile(name) else { return nil }
        defer { close(fd) }
        guard Int64(info.st_size) == length else { return nil }
        return CacheFileIO.digests(fd, length: length, algorithms)
    }
}
