// swift-tools-version:6.0
import PackageDescription

let staticStdlib: [SwiftSetting] = Context.environment["COURIER_SANITIZE"] == nil ? [.unsafeFlags(["-static-stdlib"])] : []

let package = Package(
    name: "courier",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "courier", targets: ["CourierCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: []
)

// MARK: - C libraries

package.targets += [
    .systemLibrary(
        name: "CLibcrypto",
        pkgConfig: "libcrypto",
        providers: [.apt(["libssl-dev"])]
    ),
    .systemLibrary(
        name: "CLibcurl",
        pkgConfig: "libcurl",
        providers: [.apt(["libcurl4-openssl-dev"])]
    ),
    .systemLibrary(
        name: "CLibjansson",
        pkgConfig: "jansson",
        providers: [.apt(["libjansson-dev"])]
    ),
    .systemLibrary(
        name: "CLibsqlite3",
        pkgConfig: "sqlite3",
        providers: [.apt(["libsqlite3-dev"])]
    ),
    .systemLibrary(
        name: "CLibxxhash",
        pkgConfig: "libxxhash",
        providers: [.apt(["libxxhash-dev"])]
    ),
    .target(name: "CCurlShim", dependencies: ["CLibcurl"]),
    .target(name: "CJanssonShim", dependencies: ["CLibjansson"]),
    .target(name: "CSQLiteShim", dependencies: ["CLibsqlite3"]),
    .target(name: "CThreadShim"),
    .target(name: "CFileShim"),
]

// MARK: - Curl: the only module that imports libcurl

package.targets += [
    .target(name: "Curl", dependencies: ["CLibcurl", "CCurlShim", "Locking"]),
    .testTarget(name: "CurlTests", dependencies: ["Curl"]),
]

// MARK: - JSON: the only module that imports jansson

package.targets += [
    .target(name: "JSON", dependencies: ["CLibjansson", "CJanssonShim"]),
    .testTarget(name: "JSONTests", dependencies: ["JSON", "CJanssonShim", "CLibjansson"]),
]

// MARK: - SQLite: the only module that imports SQLite

package.targets += [
    .target(name: "SQLite", dependencies: ["CLibsqlite3", "CSQLiteShim"]),
]

// MARK: - Locking: locks, conditions and threads ThreadSanitizer understands

package.targets += [
    .target(name: "Locking", dependencies: ["CThreadShim"]),
]

// MARK: - JSONRPC: framing, messages and dispatch for any stdio server

package.targets += [
    .target(
        name: "JSONRPC",
        dependencies: [
            "JSON", "Locking", .product(name: "Logging", package: "swift-log"),
            .product(name: "SystemPackage", package: "swift-system"),
        ]
    ),
    .testTarget(name: "JSONRPCTests", dependencies: ["JSONRPC", "JSON", "Locking"]),
]

// MARK: - Courier: loading, caching, activity and the server's handlers

package.targets += [
    .target(
        name: "Courier",
        dependencies: [
            "CFileShim", "CLibcrypto", "CLibxxhash", "Curl", "JSON", "JSONRPC", "Locking", "SQLite",
            .product(name: "Logging", package: "swift-log"), .product(name: "SystemPackage", package: "swift-system"),
        ],
        resources: [.embedInCode("Resources/openrpc.json"), .embedInCode("Resources/openrpc-checks.json")]
    ),
    // Test doubles the unit tests share: kept out of the shipped module.
    .target(name: "CourierTestSupport", dependencies: ["Courier", "Locking"], path: "Tests/CourierTestSupport"),
    .testTarget(name: "CourierTests", dependencies: ["Courier", "CourierTestSupport", "JSON", "JSONRPC", "Locking", "SQLite"]),
]

// MARK: - The executable

package.targets += [
    .executableTarget(
        name: "CourierCLI",
        dependencies: [
            "Courier",
            "Locking",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "SystemPackage", package: "swift-system"),
        ],
        // The Swift runtime and FoundationEssentials linked into the binary:
        // loading and relocating them as shared libraries took a client
        // waiting for the `initialize` answer longer than `curl --version`
        // takes in all. No module imports the whole of Foundation: with it
        // and ICU the binary was 79 MB and its start-up about 5 ms slower
        // (more relocations, page faults and conformance records to scan).
        // Compiling this target with the flag too makes its objects name
        // every static library they need. Sanitizer
        // builds (scripts/sanitize sets COURIER_SANITIZE) link them as shared
        // libraries: ThreadSanitizer's allocator does not survive the
        // static runtime (it aborts freeing memory `strdup` gave).
        swiftSettings: staticStdlib,
        linkerSettings: staticStdlib.isEmpty ? [] : [.unsafeFlags(["-static-stdlib"])]
    ),
]

// MARK: - Fuzz: libFuzzer harnesses, built only by scripts/fuzz (COURIER_FUZZ=1)

if Context.environment["COURIER_FUZZ"] == "1" {
    package.targets += [
        .target(name: "CFuzzDriver", path: "Fuzz/CFuzzDriver"),
        .executableTarget(name: "FuzzCacheDirectory", dependencies: ["CFuzzDriver", "Courier", "SQLite"], path: "Fuzz/FuzzCacheDirectory"),
        .executableTarget(name: "FuzzCodec", dependencies: ["CFuzzDriver", "JSON"], path: "Fuzz/FuzzCodec"),
        .executableTarget(
            name: "FuzzDispatcher",
            dependencies: ["CFuzzDriver", "JSON", "JSONRPC", .product(name: "Logging", package: "swift-log")],
            path: "Fuzz/FuzzDispatcher"
        ),
        .executableTarget(name: "FuzzFramer", dependencies: ["CFuzzDriver", "JSONRPC"], path: "Fuzz/FuzzFramer"),
        .executableTarget(name: "FuzzHTTP", dependencies: ["CFuzzDriver", "Courier", "JSON", "SQLite"], path: "Fuzz/FuzzHTTP"),
    ]
}

for target in package.targets where target.type != .system && !["CCurlShim", "CJanssonShim", "CSQLiteShim", "CThreadShim", "CFileShim", "CFuzzDriver"].contains(target.name) {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .swiftLanguageMode(.v6),
        .enableUpcomingFeature("ExistentialAny"),
    ]
}
