import JSON
import JSONRPC
import Testing

@testable import Courier

/// `initialize`'s `options` and `config`: the settings as the document
/// names them, and the rule that settings fixed at start-up keep their
/// value.
@Suite(.timeLimit(.minutes(1)))
struct ConfigurationOptionsTests {
    private func properties(of schema: String) -> Set<String> {
        Set(OpenRPCDocument.document?["components"]?["schemas"]?[schema]?["properties"]?.objectValue?.keys ?? [:].keys)
    }

    @Test func everySettingOfTheDocumentIsReadAndReported() {
        #expect(!properties(of: "Config").isEmpty)
        #expect(Set(Configuration.settings.keys) == properties(of: "Config"))
        #expect(Set(Configuration.settings.keys) == properties(of: "ConfigOptions"))
        #expect(Set(Configuration(cacheDir: "/c").json.objectValue?.keys ?? [:].keys) == properties(of: "Config"))
    }

    @Test func theSettingsFixedAtStartUpAreTheDocumentsOwn() {
        let fixed = OpenRPCDocument.startupOnlySettings
        #expect(fixed.contains("cacheDir") && fixed.contains("proxy") && !fixed.contains("maxActive"))
        #expect(fixed.isSubset(of: Set(Configuration.settings.keys)))
    }

    @Test func aChangeToASettingFixedAtStartUpIsRefusedAndNothingChanges() {
        var configuration = Configuration(cacheDir: "/c")
        let changes = [
            Configuration.Change(setting: "maxActive", fixedAtStartup: false, keepsValue: false) { $0.maxActive = 9 },
            Configuration.Change(setting: "cacheDir", fixedAtStartup: true, keepsValue: false) { $0.cacheDir = "/d" },
        ]
        #expect(throws: ConfigurationError.fixedAtStartup(setting: "cacheDir")) { try configuration.apply(changes) }
        #expect(configuration.maxActive == 4 && configuration.cacheDir == "/c")
    }

    @Test func aSettingFixedAtStartUpGivenItsOwnValueChangesNothing() throws {
        var configuration = Configuration(cacheDir: "/c")
        try configuration.apply([
            Configuration.Change(setting: "cacheDir", fixedAtStartup: true, keepsValue: true) { $0.cacheDir = "/d" },
            Configuration.Change(setting: "maxActive", fixedAtStartup: false, keepsValue: false) { $0.maxActive = 9 },
        ])
        #expect(configuration.maxActive == 9 && configuration.cacheDir == "/c")
    }

    @Test func optionsAreAppliedAllOrNone() throws {
        var configuration = Configuration(cacheDir: "/c")
        configuration.proxy = "http://bob:hunter2@proxy:3128"
        #expect(throws: RPCError.invalidParams("option 'cacheDir' can only be set on the command line", param: "options.cacheDir")) {
            try configuration.apply(options: ["maxActive": 9, "cacheDir": "/elsewhere", "timeout": 5])
        }
        #expect(configuration.maxActive == 4 && configuration.timeout == 300 && configuration.cacheDir == "/c")

        // The proxy as `initialize` reports it is its own value.
        try configuration.apply(options: [
            "maxActive": 9, "proxy": "http://bob:***@proxy:3128", "maxBytes": 10, "logLevel": "warning", "prioritization": "lifo",
        ])
        #expect(configuration.maxActive == 9 && configuration.maxBytes == 10 && configuration.prioritization == .lifo)
        #expect(configuration.proxy == "http://bob:hunter2@proxy:3128")
        try configuration.apply(options: ["maxBytes": nil])
        #expect(configuration.maxBytes == nil)
    }

    @Test func eachSettingReadsWhatItReports() throws {
        var changed = Configuration(cacheDir: "/c")
        changed.maxActive = 7
        changed.prioritization = .lifo
        changed.activationDelay = 2.5
        changed.maxBytes = 123
        changed.lowSpeedLimit = 77
        changed.indicatorEnabled = false
        changed.allowScheme = ["file"]
        changed.downloadRoot = "/r"
        let reported = changed.json.objectValue ?? [:]
        var read = Configuration(cacheDir: "/elsewhere")
        for (name, setting) in Configuration.settings {
            setting.assign(&read, try #require(reported[name], "\(name)"))
        }
        #expect(read.json == changed.json)
    }
}
