import ArgumentParser
import Courier
import Foundation

/// The cache's flags, shared by serving and `get`.
struct CacheOptions: ParsableArguments {
    @Option(help: "Cache directory (default: $XDG_CACHE_HOME/courier, else ~/.cache/courier).")
    var cacheDir: String?

    @Option(help: "Memory cache capacity (default: 100MiB).", transform: parseSize)
    var memoryCapacity: Int64 = 100 << 20

    @Option(help: "Memory cache usage a purge brings it down to (default: 60MiB, or 60% of a smaller capacity).", transform: parseSize)
    var memoryAfterPurge: Int64?

    @Option(help: "Disk cache capacity (default: 512MiB).", transform: parseSize)
    var diskCapacity: Int64 = 512 << 20

    func validate() throws {
        guard (memoryAfterPurge ?? 0) <= memoryCapacity else { throw ValidationError("--memory-after-purge must not exceed --memory-capacity") }
    }

    /// A configuration with these cache settings and defaults for the rest.
    var configuration: Configuration {
        // Absolute, so the directory stays the same whatever courier's
        // working directory is when it opens files there.
        var config = Configuration(cacheDir: cacheDir.map(Configuration.absolutePath))
        config.memoryCapacity = Int(memoryCapacity)
        config.memoryAfterPurge = Int(memoryAfterPurge ?? min(60 << 20, memoryCapacity * 3 / 5))
        config.diskCapacity = Int(diskCapacity)
        return config
    }
}

/// Sizes with units for the command line: 1048576, 512KiB, 100MiB, 2GiB.
func parseSize(_ text: String) throws -> Int64 {
    guard let bytes = ByteSize.parse(text) else {
        throw ValidationError("'\(text)' is not a size (examples: 1048576, 512KiB, 100MiB, 2GiB)")
    }
    return bytes
}
