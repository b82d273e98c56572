import Courier
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The names `courier get` saves under: each URL's last path component made
/// safe, with a numeric suffix when an earlier URL or a file already in the
/// directory has the name.
enum FileNames {
    static func unique(for urls: [String], in directory: String) -> [String] {
        var taken: Set<String> = []
        return urls.map { url in
            let base = InProcessDownloads.fileName(for: url)
            var name = base
            var number = 0
            while taken.contains(name) || exists(directory + "/" + name) {
                number += 1
                name = numbered(base, number)
            }
            taken.insert(name)
            return name
        }
    }

    /// `report-2.pdf` for `report.pdf`, `data-2` for `data`.
    static func numbered(_ name: String, _ number: Int) -> String {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "\(name)-\(number)" }
        return "\(name[..<dot])-\(number)\(name[dot...])"
    }

    /// Anything at `path`, a dangling symbolic link included.
    private static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}
