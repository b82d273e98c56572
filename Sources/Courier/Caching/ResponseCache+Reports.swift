import FoundationEssentials

/// What the cache reports of itself: `stats`, `describe(key:)` and
/// `clear(memory:disk:)`.
extension ResponseCache {
    /// Each tier's use and the counters since start.
    struct Stats: Hashable, Sendable {
        struct Memory: Hashable, Sendable {
            /// Bytes held.
            var usage: Int
            /// Bytes held before a purge.
            var capacity: Int
            /// Bytes a purge goes down to.
            var afterPurge: Int
            var entries: Int
        }

        struct Disk: Hashable, Sendable {
            /// Bytes held on disk.
            var usage: Int64
            var capacity: Int64
            var entries: Int
            /// The tier's directory; nil when the tier could not be opened.
            var path: String?
        }

        var memory: Memory
        var disk: Disk
        /// Tasks answered by a tier without asking the origin.
        var hits: Int
        /// Tasks that found nothing usable and fetched.
        var misses: Int
        /// Conditional requests sent to the origin.
        var revalidations: Int
    }

    /// A stored response as `describe(key:)` finds it.
    struct Entry: Hashable, Sendable {
        /// Whether it may be served without revalidation.
        var fresh: Bool
        /// Body bytes.
        var size: Int64
        /// `memory` when the memory tier holds it, whether or not the disk
        /// also does.
        var tier: Tier
        /// When it stops (or stopped) being fresh.
        var expires: Date
        /// The stored `ETag` and `Last-Modified`, as sent.
        var etag: String?
        var lastModified: String?
    }

    /// The entries `clear(memory:disk:)` removed from each tier.
    struct Cleared: Hashable, Sendable {
        var memory: Int
        var disk: Int
    }
}
