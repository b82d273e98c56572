-- courier for Neovim: downloads through a courier process driven with
-- Neovim's own JSON-RPC client (vim.lsp.rpc, Content-Length framing).
--
--   local courier = require("courier")
--   courier.setup({ options = { activationDelay = 0.5 } })
--   local job = courier.download(url, { body = "text", buffer = 0 }, function(outcome, job)
--     print(outcome.ok, outcome.status, outcome.error and outcome.error.code)
--   end)
--   courier.cancel(job)

local M = {}

local defaults = {
  -- the courier executable; nil: $COURIER, else "courier" on the PATH
  cmd = nil,
  -- extra command line arguments, e.g. { "--cache-dir", "/tmp/c" }
  args = {},
  -- courier's --log-level unless args set one: vim.lsp.rpc records every
  -- line courier writes to stderr in lsp.log
  log_level = "warning",
  -- extra environment for the courier process
  env = nil,
  -- `options` of `initialize` (Config names: activationDelay, maxActive, ...)
  options = nil,
  -- called as on_indicator(visible, activity_count) on every indicator change
  on_indicator = nil,
  -- true: put the indicator and the buffer's progress into 'statusline'
  statusline = false,
  -- what statusline() shows while the indicator is visible
  indicator_text = "courier",
  -- what statusline() shows while downloads wait to be retried (and are
  -- not the current buffer's, which shows "retry N")
  retrying_text = "retrying",
  -- how long shutdown waits for courier to answer and to exit, in ms
  shutdown_timeout = 3000,
}

local config = vim.deepcopy(defaults)

-- Client-side keys of download()'s opts; every other key is a `download` param.
local CLIENT_KEYS = { buffer = true, on_progress = true, on_retrying = true }

local state = {
  rpc = nil,            -- the client returned by vim.lsp.rpc.start
  pid = nil,
  exited = false,
  exit_code = nil,
  exit_signal = nil,
  initialized = nil,    -- the result of initialize once it arrived
  ready_callbacks = {},
  jobs = {},            -- receipt -> list of jobs that hold it
  pending = {},         -- job -> true while its `download` awaits courier's answer
  early = {},           -- receipt -> download/finished params that came before its
                        -- `download` answer (kept while a download awaits one)
  views = {},           -- view name -> bufnr
  listeners = {},       -- method -> list of functions(params)
  retrying = {},        -- receipt -> download/retrying params while it waits
  indicator = { visible = false, activityCount = 0 },
}

M.state = state

local function notify_error(message)
  vim.notify("courier: " .. message, vim.log.levels.ERROR)
end

local function safe_call(fn, ...)
  if not fn then return end
  local ok, err = pcall(fn, ...)
  if not ok then notify_error(tostring(err)) end
end

local function redraw()
  pcall(vim.cmd, "redrawstatus!")
end

local function user_event(pattern, data)
  M.last_event = data
  pcall(vim.api.nvim_exec_autocmds, "User", { pattern = pattern, modeline = false })
end

-- The courier to run, and the setting that chose it.
local function executable()
  if config.cmd then return config.cmd, "cmd in require('courier').setup()" end
  local env = os.getenv("COURIER")
  if env and env ~= "" then return env, "$COURIER" end
  return "courier", "the default"
end

-- Why `cmd` cannot run, or nil when it can: the message names the path
-- and the setting to change.
local function cannot_run(cmd, source)
  if vim.fn.executable(cmd) == 1 then return nil end
  local why
  if not cmd:find("/", 1, true) then
    why = "not found on $PATH"
  elseif vim.loop.fs_stat(cmd) then
    why = "not executable"
  else
    why = "no such file"
  end
  return ("cannot run %s: %s (from %s; set cmd in require('courier').setup() or $COURIER)")
    :format(cmd, why, source)
end

local function view_name(bufnr)
  return "nvim-buffer-" .. bufnr
end

-- Jobs ---------------------------------------------------------------------

local Job = {}
Job.__index = Job

--- Cancels this download (see M.cancel).
function Job:cancel(callback)
  return M.cancel(self, callback)
end

local function release_buffer(job)
  if not job.buffer then return end
  local view = view_name(job.buffer)
  if state.views[view] == job.buffer and vim.api.nvim_buf_is_valid(job.buffer) then
    local bound = vim.b[job.buffer].courier_receipt
    if bound == nil or bound == job.receipt then
      vim.b[job.buffer].courier_progress = nil
      vim.b[job.buffer].courier_retry = nil
      vim.b[job.buffer].courier_receipt = nil
      state.views[view] = nil
    end
  end
  redraw()
end

local function finish(job, outcome)
  if job.finished then return end
  job.finished = true
  job.outcome = outcome
  release_buffer(job)
  safe_call(job.on_finished, outcome, job)
end

-- Records whether `receipt` waits to be retried (params: its
-- download/retrying, or nil once it runs or ends), for its jobs, their
-- buffers and vim.g.courier_retrying (how many receipts wait).
local function set_retrying(receipt, params)
  if state.retrying[receipt] == nil and params == nil then return end
  state.retrying[receipt] = params
  vim.g.courier_retrying = vim.tbl_count(state.retrying)
  for _, job in ipairs(state.jobs[receipt] or {}) do
    job.retry = params
    if job.buffer and vim.api.nvim_buf_is_valid(job.buffer) and vim.b[job.buffer].courier_receipt == receipt then
      vim.b[job.buffer].courier_retry = params and {
        attempt = params.attempt, delay = params.delay, code = params.error and params.error.code,
      } or nil
    end
  end
  redraw()
end

local function finish_receipt(receipt, outcome)
  set_retrying(receipt, nil)
  local jobs = state.jobs[receipt]
  state.jobs[receipt] = nil
  for _, job in ipairs(jobs or {}) do
    finish(job, outcome)
  end
end

local function fail_unfinished(code, message)
  local receipts = vim.tbl_keys(state.jobs)
  for _, receipt in ipairs(receipts) do
    local jobs = state.jobs[receipt]
    finish_receipt(receipt, { ok = false, url = jobs[1] and jobs[1].url,
                              error = { code = code, message = message } })
  end
  local pending = vim.tbl_keys(state.pending)
  state.pending = {}
  for _, job in ipairs(pending) do
    finish(job, { ok = false, url = job.url, error = { code = code, message = message } })
  end
end

-- Notifications --------------------------------------------------------------

local handlers = {}

handlers["download/finished"] = function(params)
  if state.jobs[params.receipt] then
    finish_receipt(params.receipt, params.outcome)
  elseif next(state.pending) ~= nil then
    state.early[params.receipt] = params
  end
end

handlers["download/retrying"] = function(params)
  for _, receipt in ipairs(params.receipts or {}) do
    set_retrying(receipt, params)
    for _, job in ipairs(state.jobs[receipt] or {}) do
      safe_call(job.on_retrying, params, job)
    end
  end
  user_event("CourierRetrying", params)
end

handlers["download/progress"] = function(params)
  for _, receipt in ipairs(params.receipts or {}) do
    set_retrying(receipt, nil)
    for _, job in ipairs(state.jobs[receipt] or {}) do
      job.progress = params
      safe_call(job.on_progress, params, job)
    end
  end
end

handlers["indicator/visibility"] = function(params)
  state.indicator = { visible = params.visible == true, activityCount = params.activityCount or 0 }
  vim.g.courier_indicator_visible = state.indicator.visible
  vim.g.courier_activity_count = state.indicator.activityCount
  redraw()
  safe_call(config.on_indicator, state.indicator.visible, state.indicator.activityCount)
  user_event("CourierIndicator", state.indicator)
end

handlers["view/progress"] = function(params)
  local bufnr = state.views[params.view]
  if not bufnr or not vim.api.nvim_buf_is_valid(bufnr) then return end
  vim.b[bufnr].courier_progress = {
    fraction = params.fraction or vim.NIL,
    received = params.received or 0,
    expected = params.expected or vim.NIL,
  }
  redraw()
  user_event("CourierProgress", { buffer = bufnr, progress = params })
end

local function on_notification(method, params)
  params = params or {}
  local handler = handlers[method]
  if handler then handler(params) end
  for _, listener in ipairs(state.listeners[method] or {}) do
    safe_call(listener, params)
  end
end

-- Process --------------------------------------------------------------------

local function on_exit(code, signal)
  -- Runs in a libuv callback: only plain Lua here, the rest is scheduled.
  state.exited = true
  state.exit_code = code
  state.exit_signal = signal
  state.rpc = nil
  local cmd = state.cmd
  vim.schedule(function()
    fail_unfinished("exited", ("courier %s exited (code %d, signal %d)"):format(cmd, code, signal))
  end)
end

local augroup = nil

local function ensure_autocmds()
  if augroup then return end
  augroup = vim.api.nvim_create_augroup("courier", { clear = true })
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = augroup,
    callback = function() M.stop() end,
  })
end

--- Merges opts into the configuration (see `defaults` above).
function M.setup(opts)
  config = vim.tbl_deep_extend("force", config, opts or {})
  if config.statusline and not vim.o.statusline:find("courier", 1, true) then
    local base = vim.o.statusline ~= "" and vim.o.statusline
      or "%<%f %h%m%r%=%-14.(%l,%c%V%) %P"
    vim.o.statusline = base .. " %{v:lua.require'courier'.statusline()}"
  end
  return M
end

--- True while a courier process runs.
function M.running()
  return state.rpc ~= nil and not state.exited
end

--- Starts courier (once) and sends `initialize`; on_ready(result, err) is
--- called with its answer. Every other function starts courier on demand.
function M.start(on_ready)
  if M.running() then
    if on_ready then
      if state.initialized then on_ready(state.initialized)
      else table.insert(state.ready_callbacks, on_ready) end
    end
    return true
  end
  state.exited, state.exit_code, state.exit_signal = false, nil, nil
  state.initialized = nil
  state.ready_callbacks = on_ready and { on_ready } or {}
  local cmd, source = executable()
  state.start_error = cannot_run(cmd, source)
  if state.start_error then
    notify_error(state.start_error)
    return false
  end
  local args = vim.deepcopy(config.args or {})
  local has_level = false
  for _, arg in ipairs(args) do
    if arg == "--log-level" or arg:sub(1, 12) == "--log-level=" then has_level = true end
  end
  if config.log_level and not has_level then
    table.insert(args, 1, config.log_level)
    table.insert(args, 1, "--log-level")
  end
  local started, rpc = pcall(vim.lsp.rpc.start, cmd, args, {
    notification = on_notification,
    on_exit = on_exit,
  }, config.env and { env = config.env } or nil)
  if not started or not rpc then
    state.start_error = ("cannot run %s%s (from %s; set cmd in require('courier').setup() or $COURIER)")
      :format(cmd, started and "" or ": " .. tostring(rpc), source)
    notify_error(state.start_error)
    return false
  end
  state.rpc = rpc
  state.pid = rpc.pid
  state.cmd = vim.fn.exepath(cmd)
  ensure_autocmds()
  local params = { clientInfo = { name = "courier.nvim", version = tostring(vim.version().major)
    .. "." .. tostring(vim.version().minor) } }
  if config.options and next(config.options) then params.options = config.options end
  rpc.request("initialize", params, function(err, result)
    state.initialized = result
    local callbacks = state.ready_callbacks
    state.ready_callbacks = {}
    for _, callback in ipairs(callbacks) do safe_call(callback, result, err) end
    if err then notify_error("initialize failed: " .. tostring(err.message)) end
  end)
  return true
end

--- Sends a request; callback(err, result). Returns false when courier is not
--- running and cannot be started (M.state.start_error says why).
function M.request(method, params, callback)
  if not M.running() and not M.start() then return false end
  return state.rpc.request(method, params, callback or function() end)
end

--- Sends a notification.
function M.notify(method, params)
  if not M.running() then return false end
  return state.rpc.notify(method, params)
end

--- Calls fn(params) for every notification `method` courier sends.
--- Returns a function that removes the listener.
function M.on(method, fn)
  state.listeners[method] = state.listeners[method] or {}
  table.insert(state.listeners[method], fn)
  return function()
    for i, f in ipairs(state.listeners[method]) do
      if f == fn then table.remove(state.listeners[method], i) return end
    end
  end
end

local function bind_buffer(job)
  local bufnr = job.buffer
  if not vim.api.nvim_buf_is_valid(bufnr) then return end
  local view = view_name(bufnr)
  state.views[view] = bufnr
  vim.b[bufnr].courier_receipt = job.receipt
  vim.b[bufnr].courier_progress = { fraction = vim.NIL, received = 0, expected = vim.NIL }
  redraw()
  M.request("bind", { view = view, receipt = job.receipt, kind = "progress" }, function(err)
    if err and vim.b[bufnr].courier_receipt == job.receipt then
      vim.b[bufnr].courier_progress = nil
    end
  end)
end

-- Forgets the early outcomes once no download awaits its answer: those left
-- belong to downloads sent some other way (M.request).
local function forget_early()
  if next(state.pending) == nil then state.early = {} end
end

--- Starts a download. `opts` holds `download` params (body, destination,
--- headers, slot, priority, accept, maxBytes, timeout, ...) and:
---   buffer       a bufnr (0: the current one) whose statusline shows the progress
---   on_progress  function(progress, job) for each `download/progress`
--- A relative destination is taken from Neovim's current directory (an
--- absolute one is sent as it is).
--- on_finished(outcome, job) gets courier's outcome: `ok`, `status`, `path`,
--- `text`, ... and `error.code` when it failed. A request that courier
--- refused gets error.code "rpc" (error.rpc: the JSON-RPC error); one whose
--- courier went away, "exited"; one for a courier that cannot run,
--- "not_started" (error.message names the binary and the setting).
--- Returns the job: job.receipt and job.task once courier answered, job:cancel().
function M.download(url, opts, on_finished)
  if type(opts) == "function" then opts, on_finished = nil, opts end
  opts = opts or {}
  local params = { url = url }
  for key, value in pairs(opts) do
    if not CLIENT_KEYS[key] then params[key] = value end
  end
  local destination = params.destination
  if type(destination) == "string" and destination ~= "" and destination:sub(1, 1) ~= "/" then
    params.destination = vim.fn.fnamemodify(destination, ":p")
  end
  local job = setmetatable({
    url = url,
    on_finished = on_finished,
    on_progress = opts.on_progress,
    on_retrying = opts.on_retrying,
    finished = false,
  }, Job)
  if opts.buffer ~= nil then
    job.buffer = opts.buffer == 0 and vim.api.nvim_get_current_buf() or opts.buffer
  end
  state.pending[job] = true
  local sent = M.request("download", params, function(err, result)
    state.pending[job] = nil
    if err then
      forget_early()
      finish(job, { ok = false, url = url,
                    error = { code = "rpc", message = err.message, rpc = err } })
      return
    end
    job.receipt, job.task, job.reused = result.receipt, result.task, result.reused
    state.jobs[job.receipt] = state.jobs[job.receipt] or {}
    table.insert(state.jobs[job.receipt], job)
    if job.buffer then bind_buffer(job) end
    local early = state.early[job.receipt]
    state.early[job.receipt] = nil
    forget_early()
    if early then
      finish_receipt(job.receipt, early.outcome)
    elseif job.cancel_requested then
      M.cancel(job, job.cancel_callback)
    end
  end)
  if not sent then
    state.pending[job] = nil
    finish(job, { ok = false, url = url, error = { code = "not_started",
      message = state.start_error or "courier is not running" } })
  end
  return job
end

--- The name a file downloaded from `url` gets: the last segment of its
--- path, percent-decoded, with "/", "\", NUL and control characters made
--- "_"; "index.html" when that leaves nothing, "." or "..".
function M.file_name(url)
  local path = url:gsub("^[%a][%w+.-]*://[^/?#]*", ""):gsub("[?#].*$", "")
  local name = path:match("([^/]*)$") or ""
  name = name:gsub("%%(%x%x)", function(hex) return string.char(tonumber(hex, 16)) end)
  name = name:gsub("[%z\1-\31\127/\\]", "_")
  if name == "" or name == "." or name == ".." then return "index.html" end
  return name
end

--- Cancels a download: a job, a receipt ("r3"), or { slot = ... } / { all = true }.
--- callback(err, result) gets courier's answer ({cancelled, count}).
function M.cancel(target, callback)
  callback = callback or function() end
  local params
  if type(target) == "string" then
    params = { receipt = target }
  elseif getmetatable(target) == Job then
    if target.finished then
      callback(nil, { cancelled = false, count = 0 })
      return true
    end
    if not target.receipt then
      target.cancel_requested = true
      target.cancel_callback = callback
      return true
    end
    params = { receipt = target.receipt }
  else
    params = target
  end
  return M.request("cancel", params, callback)
end

--- Asks for the progress of a job or a receipt ({} or nil: every task).
function M.progress(target, callback)
  local params = {}
  if type(target) == "string" then params = { receipt = target }
  elseif getmetatable(target) == Job then params = { receipt = target.receipt } end
  return M.request("progress", params, callback)
end

--- The indicator as courier last reported it: { visible, activityCount }.
function M.indicator()
  return state.indicator
end

local function human_bytes(n)
  if n >= 1048576 then return ("%.1fM"):format(n / 1048576) end
  if n >= 1024 then return ("%.1fK"):format(n / 1024) end
  return tostring(n) .. "B"
end

--- A statusline fragment: the indicator while visible, then the progress of
--- the download bound to the current buffer. Use it as
--- `%{v:lua.require'courier'.statusline()}`.
function M.statusline()
  local parts = {}
  if state.indicator.visible then
    table.insert(parts, config.indicator_text)
  end
  local ok, progress = pcall(function() return vim.b.courier_progress end)
  local _, retry = pcall(function() return vim.b.courier_retry end)
  if type(retry) == "table" then
    table.insert(parts, ("retry %d"):format((tonumber(retry.attempt) or 2) - 1))
  elseif (tonumber(vim.g.courier_retrying) or 0) > 0 then
    local waiting = tonumber(vim.g.courier_retrying)
    table.insert(parts, waiting > 1 and ("%s %d"):format(config.retrying_text, waiting) or config.retrying_text)
  end
  if type(retry) ~= "table" and ok and type(progress) == "table" then
    local fraction = progress.fraction
    if type(fraction) == "number" then
      table.insert(parts, ("%d%%"):format(math.floor(fraction * 100)))
    else
      table.insert(parts, human_bytes(tonumber(progress.received) or 0))
    end
  end
  return table.concat(parts, " ")
end

--- Shuts courier down (`shutdown`, then `exit`) and waits, bounded, for it to
--- end. Runs by itself when Neovim exits. Returns courier's exit code.
function M.stop(timeout_ms)
  local rpc = state.rpc
  if not rpc or state.exited then return state.exit_code end
  timeout_ms = timeout_ms or config.shutdown_timeout
  local answered = false
  rpc.request("shutdown", nil, function() answered = true end)
  vim.wait(timeout_ms, function() return answered or state.exited end, 5)
  if not state.exited then
    rpc.notify("exit", nil)
    vim.wait(timeout_ms, function() return state.exited end, 5)
  end
  if not state.exited and rpc.handle and not rpc.handle:is_closing() then
    rpc.handle:kill("sigterm")
    vim.wait(timeout_ms, function() return state.exited end, 5)
  end
  return state.exit_code
end

return M
