#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The proxies the environment names for http:// and https:// URLs, read
/// once, by libcurl's own rules, and given to libcurl with each transfer
/// (`CURLOPT_PROXY`, `CURLOPT_NOPROXY`): libcurl left alone would read
/// the environment again for every request.
///
/// libcurl's rules: `http_proxy` for http:// (lower case only: a CGI
/// program cannot tell `HTTP_PROXY` from a request's `Proxy:` header),
/// `https_proxy` else `HTTPS_PROXY` for https://, and for either, when its
/// own is not set, `all_proxy` else `ALL_PROXY`; `no_proxy` else
/// `NO_PROXY` names the hosts that bypass it, which libcurl matches as it
/// would have. A variable set to nothing counts as not set.
public final class ProxyEnvironment: Sendable {
    /// The proxy and the hosts that bypass it, each as the NUL-terminated
    /// bytes the environment holds; empty (a lone NUL) for none, which
    /// keeps libcurl from looking in the environment.
    struct Setting: Equatable, Sendable {
        let proxy: [CChar]
        let noProxy: [CChar]
    }

    private let http: Setting
    private let https: Setting

    /// Reads each variable's bytes (without a NUL) through `value`, nil
    /// for one not set.
    public init(_ value: (String) -> [CChar]?) {
        func read(_ name: String) -> [CChar]? {
            guard let bytes = value(name), !bytes.isEmpty else { return nil }
            return bytes + [0]
        }
        let all = read("all_proxy") ?? read("ALL_PROXY")
        let noProxy = read("no_proxy") ?? read("NO_PROXY") ?? [0]
        http = Setting(proxy: read("http_proxy") ?? all ?? [0], noProxy: noProxy)
        https = Setting(proxy: read("https_proxy") ?? read("HTTPS_PROXY") ?? all ?? [0], noProxy: noProxy)
    }

    /// The environment as `variables` has it.
    public convenience init(variables: [String: String]) {
        self.init { variables[$0].map { $0.utf8.map { CChar(bitPattern: $0) } } }
    }

    /// The process's environment, read once, the first time options are
    /// made (courier: as it starts).
    public static let current = ProxyEnvironment { name in
        getenv(name).map { Array(UnsafeBufferPointer(start: $0, count: strlen($0))) }
    }

    func setting(https isHTTPS: Bool) -> Setting { isHTTPS ? https : http }
}
