import ArgumentParser
import Courier
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The cache's flags, shared by serving and `get`.
struct CacheOptions: ParsableArguments {
    private static let defaults = CacheSettings()

    @Option(
        help: "Cache directory (default: $XDG_CACHE_HOME/courier, else ~/.cache/courier).", completion: .directory)
    var cacheDir: String?

    @Option(help: "Memory cache capacity (default: 100MiB).", transform: parseSize)
    var memoryCapacity: Int64 = defaults.memoryCapacity

    @Option(help: "Memory cache usage a purge brings it down to (default: 60MiB, or 60% of a smaller capacity).", transform: parseSize)
    var memoryAfterPurge: Int64?

    @Option(help: "Disk cache capacity (default: 512MiB).", transform: parseSize)
    var diskCapacity: Int64 = defaults.diskCapacity

    func validate() throws {
        if let problem = settings.problem { throw ValidationError(problem) }
    }

    var settings: CacheSettings {
        CacheSettings(
            cacheDir: cacheDir, memoryCapacity: memoryCapacity, memoryAfterPurge: memoryAfterPurge,
            diskCapacity: diskCapacity)
    }
}

/// Sizes with units for the command line: 1048576, 512KiB, 100MiB, 2GiB.
func parseSize(_ text: String) throws -> Int64 {
    guard let bytes = ByteSize.parse(text) else {
        throw ValidationError("'\(text)' is not a size (examples: 1048576, 512KiB, 100MiB, 2GiB)")
    }
    return bytes
}
