import JSON
import JSONRPC

/// `download`, `cancel`, `suspend`, `resume`, `progress` and `bind`: their
/// params are checked here and become the downloader's events; the answers
/// come back through `json(_:)`, and a receipt or task the scheduler does
/// not know through `rpcError(_:)`.
extension CourierServer {
    func registerDownloads() {
        dispatcher.register(checked: "download") { [self] params, reply in
            // The three settings a download may take, not a copy of them all.
            let defaults = configuration.withLock { DownloadRequest.DefaultValues($0) }
            downloader.download(try DownloadRequest(params, defaults: defaults), waiter: reply)
        }
        dispatcher.register(checked: "cancel") { [downloader] params, reply in
            let named = try params.byName()
            guard ["receipt", "slot", "all"].filter({ named.has($0) }).count == 1 else {
                throw RPCError.invalidParams("give exactly one of 'receipt', 'slot' or 'all'")
            }
            let target: CancelTarget
            if let id = try named.optionalString("receipt") {
                target = .receipt(try Self.receiptID(id))
            } else if let slot = try named.optionalString("slot") {
                target = .slot(slot)
            } else if try named.optionalBool("all") == true {
                target = .all
            } else {
                reply.success(Self.json(.cancelled(count: 0)))
                return
            }
            downloader.cancel(target, waiter: reply)
        }
        dispatcher.register(checked: "suspend") { [downloader] params, reply in
            let target = try Self.taskTarget(params)
            downloader.suspend(target, waiter: reply)
        }
        dispatcher.register(checked: "resume") { [downloader] params, reply in
            let target = try Self.taskTarget(params)
            downloader.resume(target, waiter: reply)
        }
        dispatcher.register(checked: "progress") { [downloader] params, reply in
            let receipt = try params.byName().optionalString("receipt").map(Self.receiptID)
            downloader.progress(receipt: receipt, waiter: reply)
        }
        dispatcher.register(checked: "bind") { [downloader] params, reply in
            let named = try params.byName()
            let view = try named.string("view")
            let kind = try named.optionalChoice("kind", as: BindingKind.self) ?? .animating
            let receipt = try named.optionalString("receipt")
            let task = try named.optionalString("task")
            let unbinding = named["task"]?.isNull == true && receipt == nil
            guard unbinding || (task == nil) != (receipt == nil) else {
                throw RPCError.invalidParams("give exactly one of 'task' (null unbinds) or 'receipt'")
            }
            let target: TaskTarget?
            if let receipt {
                target = .receipt(try Self.receiptID(receipt))
            } else if let task {
                target = .task(try Self.taskID(task))
            } else {
                target = nil
            }
            downloader.bind(view: view, to: target, kind: kind, waiter: reply)
        }
    }

    /// `{task}` or `{receipt}`, exactly one.
    private static func taskTarget(_ params: Params) throws -> TaskTarget {
        let named = try params.byName()
        switch (try named.optionalString("task"), try named.optionalString("receipt")) {
        case (let task?, nil): return .task(try taskID(task))
        case (nil, let receipt?): return .receipt(try receiptID(receipt))
        default: throw RPCError.invalidParams("give exactly one of 'task' or 'receipt'")
        }
    }

    /// The receipt a param names; a string courier never issues is answered
    /// as any unknown receipt is.
    private static func receiptID(_ wire: String) throws(RPCError) -> ReceiptID {
        guard let id = ReceiptID(wire: wire) else { throw unknown(receipt: wire) }
        return id
    }

    /// The task a param names; a string courier never issues is answered as
    /// any unknown task is.
    private static func taskID(_ wire: String) throws(RPCError) -> TaskID {
        guard let id = TaskID(wire: wire) else { throw unknown(task: wire) }
        return id
    }
}
