import JSON
import JSONRPC

/// `download`, `cancel`, `suspend`, `resume`, `progress`.
extension CourierServer {
    func registerDownloads() {
        dispatcher.register("download") { [downloader] params, reply in try downloader.download(params, reply: reply) }
        dispatcher.register("cancel") { [downloader] params, reply in reply.success(try downloader.cancel(params)) }
        dispatcher.register("suspend") { [downloader] params, reply in reply.success(try downloader.suspend(params)) }
        dispatcher.register("resume") { [downloader] params, reply in reply.success(try downloader.resume(params)) }
        dispatcher.register("progress") { [downloader] params, reply in reply.success(try downloader.progress(params)) }
    }
}
