if vim.g.loaded_courier then return end
vim.g.loaded_courier = true

-- :CourierDownload URL [PATH]  downloads URL (to PATH when given), with its
--                              progress in the current buffer's statusline
-- :CourierCancel               cancels every unfinished download
vim.api.nvim_create_user_command("CourierDownload", function(command)
  local url, path = command.fargs[1], command.fargs[2]
  local opts = { buffer = 0 }
  if path then opts.destination = vim.fn.fnamemodify(vim.fn.expand(path), ":p") end
  require("courier").download(url, opts, function(outcome)
    if outcome.ok then
      vim.notify(("courier: %s → %s (%d bytes)"):format(url, outcome.path or "memory", outcome.size or 0))
    else
      vim.notify(("courier: %s failed: %s"):format(url, outcome.error and outcome.error.code or "?"),
        vim.log.levels.WARN)
    end
  end)
end, { nargs = "+", complete = "file", desc = "Download a URL with courier" })

vim.api.nvim_create_user_command("CourierCancel", function()
  require("courier").cancel({ all = true })
end, { nargs = 0, desc = "Cancel every courier download" })
