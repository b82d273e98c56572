import JSON
import JSONRPC

/// `download`, `cancel`, `suspend`, `resume`, `progress`.
extension CourierServer {
    func registerDownloads() {
        dispatcher.register(checked: "download") { [downloader] params, reply in try downloader.download(params, reply: reply) }
        dispatcher.register(checked: "cancel") { [downloader] params, reply in reply.success(try downloader.cancel(params)) }
        dispatcher.register(checked: "suspend") { [downloader] params, reply in reply.success(try downloader.suspend(params)) }
        dispatcher.register(checked: "resume") { [downloader] params, reply in reply.success(try downloader.resume(params)) }
        dispatcher.register(checked: "progress") { [downloader] params, reply in reply.success(try downloader.progress(params)) }
    }
}
