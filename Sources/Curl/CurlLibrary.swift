import CCurlShim
import CLibcurl

/// libcurl as found at run time.
public struct CurlLibrary: Sendable {
    public var version: String
    public var ssl: String?
    public var features: [String]
    public var protocols: [String]

    /// Initialises libcurl once for the process; call before any thread
    /// starts using it.
    public static func initialize() {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }

    public static var current: CurlLibrary {
        let info = courier_version_info().pointee
        let names: [(Int32, String)] = [
            (CURL_VERSION_IPV6, "ipv6"), (CURL_VERSION_SSL, "ssl"), (CURL_VERSION_LIBZ, "libz"),
            (CURL_VERSION_BROTLI, "brotli"), (CURL_VERSION_ZSTD, "zstd"), (CURL_VERSION_HTTP2, "http2"),
            (CURL_VERSION_HTTP3, "http3"), (CURL_VERSION_ASYNCHDNS, "asynchdns"), (CURL_VERSION_IDN, "idn"),
            (CURL_VERSION_LARGEFILE, "largefile"), (CURL_VERSION_UNIX_SOCKETS, "unix-sockets"),
            (CURL_VERSION_PSL, "psl"), (CURL_VERSION_HSTS, "hsts"), (CURL_VERSION_THREADSAFE, "threadsafe"),
        ]
        var protocols: [String] = []
        if var cursor = info.protocols {
            while let name = cursor.pointee {
                protocols.append(String(cString: name))
                cursor += 1
            }
        }
        return CurlLibrary(
            version: String(cString: info.version),
            ssl: info.ssl_version.map { String(cString: $0) },
            features: names.filter { info.features & $0.0 != 0 }.map(\.1),
            protocols: protocols)
    }
}
