-- Drives courier through clients/nvim against a local origin.
-- Environment: COURIER (the binary), COURIER_TEST_BASE (the origin's base
-- URL), COURIER_TEST_DIR (a scratch directory). Prints "ok NAME" or
-- "FAIL NAME -- detail" per check, then exits 0 when every check passed.

io.stdout:setvbuf("line")

local WAIT = 15000
local base = assert(os.getenv("COURIER_TEST_BASE"), "COURIER_TEST_BASE not set")
local dir = assert(os.getenv("COURIER_TEST_DIR"), "COURIER_TEST_DIR not set")
local failures = 0

local function inspect(value)
  return vim.inspect(value, { newline = " ", indent = "" })
end

local function check(name, ok, detail)
  if ok then
    io.stdout:write("ok " .. name .. "\n")
  else
    failures = failures + 1
    io.stdout:write("FAIL " .. name .. (detail and (" -- " .. tostring(detail):gsub("\n", " ")) or "") .. "\n")
  end
end

local function wait(cond)
  return vim.wait(WAIT, cond, 5)
end

-- vim.notify's messages, recorded instead of shown
local notes = {}
vim.notify = function(message, level)
  table.insert(notes, { message = message, level = level or vim.log.levels.INFO })
end

local function noted(text)
  for _, note in ipairs(notes) do
    if note.message:find(text, 1, true) then return note end
  end
end

local function cannot_run(courier)
  -- a binary that is not there: the job's error and the message name it and the settings
  local missing = dir .. "/no/courier"
  courier.setup({ cmd = missing })
  local refused
  courier.download(base .. "/bytes/1", {}, function(o) refused = o end)
  local message = refused and refused.error and refused.error.message or ""
  check("cannot run names the binary", refused and refused.error.code == "not_started"
    and message:find(missing, 1, true) and message:find("no such file", 1, true)
    and message:find("setup()", 1, true) and message:find("$COURIER", 1, true), inspect(refused))
  local shown = noted(missing)
  check("cannot run is shown", shown and shown.level == vim.log.levels.ERROR, inspect(notes))
  notes = {}
  vim.cmd("CourierDownload " .. base .. "/bytes/1 " .. dir .. "/never.bin")
  local warned = noted("failed: not_started")
  check("command names the binary", warned and warned.message:find(missing, 1, true)
    and vim.loop.fs_stat(dir .. "/never.bin") == nil, inspect(notes))

  -- a binary that exits at once (a flag it does not know): the download ends, naming it
  courier.setup({ cmd = os.getenv("COURIER"), args = { "--no-such-flag" } })
  local lost
  courier.download(base .. "/bytes/1", {}, function(o) lost = o end)
  check("exit at once names the binary", wait(function() return lost ~= nil end)
    and lost.error.code == "exited" and lost.error.message:find(os.getenv("COURIER"), 1, true)
    and lost.error.message:find("code 64", 1, true), inspect(lost))
end

local function run()
  vim.cmd("runtime plugin/courier.lua")
  check("plugin commands", vim.fn.exists(":CourierDownload") == 2 and vim.fn.exists(":CourierCancel") == 2)

  local courier = require("courier")
  local names = {}
  for _, url in ipairs({ "http://h/a/my%20file.txt", "http://h/caf%C3%A9.txt?x=1#f", "http://h/dir/",
                         "http://h", "http://h/a%2Fb", "http://h/%2e%2e", "http://h/x%00y%0A" }) do
    table.insert(names, courier.file_name(url))
  end
  check("file names from URLs", vim.deep_equal(names, { "my file.txt", "café.txt", "index.html",
    "index.html", "a_b", "index.html", "x_y_" }), inspect(names))
  cannot_run(courier)
  courier.setup({
    args = { "--cache-dir", dir .. "/cache", "--retry-delay", "1" },
    options = { activationDelay = 0, completionDelay = 0.05 },
    statusline = true,
    indicator_text = "[courier]",
  })

  local indicator_events, statuslines = {}, {}
  courier.on("indicator/visibility", function(params)
    table.insert(indicator_events, params)
  end)
  vim.api.nvim_create_autocmd("User", {
    pattern = { "CourierIndicator", "CourierProgress" },
    callback = function()
      table.insert(statuslines, vim.api.nvim_eval_statusline(vim.o.statusline, {}).str)
    end,
  })

  -- initialize
  local init
  courier.start(function(result, err) init = { result = result, err = err } end)
  check("initialize", wait(function() return init ~= nil end) and init.err == nil
    and init.result.serverInfo.name == "courier"
    and init.result.config.activationDelay == 0, inspect(init))

  -- a text download
  local text
  courier.download(base .. "/text", { body = "text" }, function(outcome) text = outcome end)
  check("download text", wait(function() return text ~= nil end) and text.ok and text.status == 200
    and text.text == "Grüße, café — naïve ✓", inspect(text))

  -- several downloads at once, one of them to a destination file
  local outcomes, destination = {}, dir .. "/out/bytes.bin"
  local jobs = {
    courier.download(base .. "/bytes/2048", { destination = destination }, function(o) outcomes[1] = o end),
    courier.download(base .. "/bytes/10", { body = "base64" }, function(o) outcomes[2] = o end),
    courier.download(base .. "/bytes/777", nil, function(o) outcomes[3] = o end),
  }
  local all = wait(function() return outcomes[1] and outcomes[2] and outcomes[3] end)
  check("download many", all and outcomes[1].ok and outcomes[2].ok and outcomes[3].ok
    and outcomes[3].size == 777 and jobs[3].receipt ~= nil and jobs[3].finished, inspect(outcomes))
  local stat = vim.loop.fs_stat(destination)
  check("download destination", all and stat ~= nil and stat.size == 2048
    and outcomes[1].path == destination, inspect(stat))

  -- an outcome error: HTTP 404
  local missing
  courier.download(base .. "/status/404", {}, function(o) missing = o end)
  check("error http_status", wait(function() return missing ~= nil end) and not missing.ok
    and missing.error.code == "http_status" and missing.error.httpStatus == 404, inspect(missing))

  -- a JSON-RPC error: an unknown receipt, and params courier refuses
  local unknown
  courier.cancel("r999999", function(err, result) unknown = { err = err, result = result } end)
  check("error unknown receipt", wait(function() return unknown ~= nil end) and unknown.err ~= nil
    and unknown.err.code == -32001, inspect(unknown))
  local refused
  courier.download("not a url", {}, function(o) refused = o end)
  check("error invalid params", wait(function() return refused ~= nil end) and not refused.ok
    and refused.error.code == "rpc" and refused.error.rpc.code == -32602, inspect(refused))

  -- cancel a download that hangs, after asking its progress
  local stalled
  local job = courier.download(base .. "/stall?after=100", {}, function(o) stalled = o end)
  wait(function() return (job.progress and job.progress.received >= 100) or stalled ~= nil end)
  local progress
  courier.progress(job, function(err, result) progress = { err = err, result = result } end)
  check("progress query", wait(function() return progress ~= nil end) and progress.err == nil
    and progress.result.receipt == job.receipt and progress.result.state == "running"
    and progress.result.received == 100, inspect(progress))
  local answer
  job:cancel(function(err, result) answer = { err = err, result = result } end)
  check("cancel", wait(function() return stalled ~= nil and answer ~= nil end)
    and answer.result and answer.result.cancelled == true
    and not stalled.ok and stalled.error.code == "cancelled", inspect({ answer, stalled }))

  -- cancel before courier answered with a receipt
  local early
  local early_job = courier.download(base .. "/stall?after=10", {}, function(o) early = o end)
  local had_receipt = early_job.receipt ~= nil
  courier.cancel(early_job)
  check("cancel before receipt", not had_receipt and wait(function() return early ~= nil end)
    and early.error and early.error.code == "cancelled", inspect(early))

  -- progress notifications, the progress bound to the current buffer, the indicator
  wait(function() return not courier.indicator().visible end)
  indicator_events, statuslines = {}, {}
  local buf = vim.api.nvim_get_current_buf()
  local progress_events, dripped = {}, nil
  courier.download(base .. "/drip?size=40000&chunks=8&interval=0.05", {
    buffer = 0,
    on_progress = function(p) table.insert(progress_events, p) end,
  }, function(o) dripped = o end)
  local done = wait(function() return dripped ~= nil end)
  check("download drip", done and dripped.ok and dripped.size == 40000, inspect(dripped))
  local increasing, last = #progress_events >= 2, nil
  for _, p in ipairs(progress_events) do
    if last and p.received < last then increasing = false end
    last = p.received
  end
  check("progress notifications", increasing and last == 40000
    and progress_events[#progress_events].fraction == 1, inspect(progress_events))
  local saw_percent = false
  for _, line in ipairs(statuslines) do
    if line:find("%d+%%") then saw_percent = true end
  end
  check("buffer progress in statusline", saw_percent, inspect(statuslines))
  check("buffer progress cleared", vim.b[buf].courier_progress == nil
    and not courier.statusline():find("%%"), inspect(vim.b[buf].courier_progress))
  wait(function() return #indicator_events >= 2 and not indicator_events[#indicator_events].visible end)
  local first = indicator_events[1]
  check("indicator shown", first ~= nil and first.visible == true and first.activityCount >= 1,
    inspect(indicator_events))
  local saw_indicator = false
  for _, line in ipairs(statuslines) do
    if line:find("[courier]", 1, true) then saw_indicator = true end
  end
  check("indicator in statusline", saw_indicator, inspect(statuslines))
  local final = indicator_events[#indicator_events]
  check("indicator hidden", final ~= nil and final.visible == false and final.activityCount == 0
    and not vim.g.courier_indicator_visible
    and not courier.statusline():find("[courier]", 1, true), inspect(indicator_events))

  -- a download waiting to be retried: "retry 1" for the current buffer's,
  -- "retrying" for one of no buffer; both gone once it has finished
  local waiting_lines, waiting_events, retried = {}, {}, nil
  courier.download(base .. "/flaky/nvim-buffer?statuses=503,200&size=300", {
    buffer = 0,
    on_retrying = function(r)
      table.insert(waiting_events, r)
      table.insert(waiting_lines, vim.api.nvim_eval_statusline(vim.o.statusline, {}).str)
    end,
  }, function(o) retried = o end)
  local finished = wait(function() return retried ~= nil end)
  check("retry in statusline", finished and #waiting_events == 1 and waiting_events[1].attempt == 2
    and waiting_events[1].error.code == "http_status" and waiting_lines[1]:find("retry 1", 1, true)
    and retried.ok and retried.attempts == 2, inspect({ waiting_events, waiting_lines, retried }))
  check("retry cleared", vim.b[buf].courier_retry == nil and vim.g.courier_retrying == 0
    and not courier.statusline():find("retry", 1, true), inspect({ vim.b[buf].courier_retry, courier.statusline() }))
  local other_line, other = nil, nil
  courier.on("download/retrying", function()
    if other_line == nil then other_line = courier.statusline() end
  end)
  courier.download(base .. "/flaky/nvim-other?statuses=503,200", {}, function(o) other = o end)
  check("retrying in statusline", wait(function() return other ~= nil end) and other.ok
    and other_line and other_line:match("retrying$") and not other_line:find("retry %d")
    and not courier.statusline():find("retry", 1, true), inspect({ other_line, other }))

  -- :CourierDownload URL asks where to save, offering the URL's name here;
  -- an answer that is a directory gets that name
  vim.fn.mkdir(dir .. "/asked", "p")
  local asked
  vim.ui.input = function(opts, on_confirm)
    asked = opts
    on_confirm("asked")
  end
  notes = {}
  vim.cmd("CourierDownload " .. base .. "/bytes/3000?x=1")
  local saved = vim.fn.getcwd() .. "/asked/3000"
  local told = wait(function() return noted(saved) ~= nil end)
  local stat = vim.loop.fs_stat(saved)
  check("command asks for a destination", told and asked.prompt == "Save to: "
    and asked.default == vim.fn.getcwd() .. "/3000" and stat ~= nil and stat.size == 3000,
    inspect({ asked, notes, stat }))

  -- an empty answer downloads nothing
  vim.ui.input = function(_, on_confirm) on_confirm(nil) end
  vim.cmd("CourierDownload " .. base .. "/bytes/4")
  check("command cancelled", next(courier.state.pending) == nil and next(courier.state.jobs) == nil,
    inspect(courier.state.pending))

  -- :CourierDownload URL PATH with a relative PATH, and download() with a relative destination
  notes = {}
  vim.cmd("CourierDownload " .. base .. "/bytes/20 rel/twenty.bin")
  local twenty = vim.fn.getcwd() .. "/rel/twenty.bin"
  local relative
  courier.download(base .. "/bytes/30", { destination = "rel/thirty.bin" }, function(o) relative = o end)
  check("command takes a destination", wait(function() return noted(twenty) ~= nil end)
    and vim.loop.fs_stat(twenty).size == 20, inspect(notes))
  check("relative destination", wait(function() return relative ~= nil end) and relative.ok
    and relative.path == vim.fn.getcwd() .. "/rel/thirty.bin", inspect(relative))

  -- a download sent with request() leaves nothing behind once it has finished
  local raw
  local stop = courier.on("download/finished", function(params) raw = params end)
  courier.request("download", { url = base .. "/bytes/8", wait = true }, function() end)
  check("raw download leaves nothing", wait(function() return raw ~= nil end)
    and next(courier.state.early) == nil and next(courier.state.jobs) == nil, inspect(courier.state.early))
  stop()

  -- courier is shut down when Neovim exits: this runs after the module's own VimLeavePre
  local pid = courier.state.pid
  io.stdout:write("courier pid " .. tostring(pid) .. "\n")
  vim.api.nvim_create_autocmd("VimLeavePre", {
    callback = function()
      io.stdout:write("courier exit code " .. tostring(courier.state.exit_code)
        .. " signal " .. tostring(courier.state.exit_signal) .. "\n")
    end,
  })
end

local ok, err = xpcall(run, debug.traceback)
if not ok then
  check("script", false, err)
end
io.stdout:write(failures == 0 and "all checks passed\n" or (failures .. " check(s) failed\n"))
if failures == 0 then
  vim.cmd("qall!")
else
  vim.cmd("cquit 1")
end
