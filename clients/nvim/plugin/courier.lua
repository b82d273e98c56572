if vim.g.loaded_courier then return end
vim.g.loaded_courier = true

-- :CourierDownload URL [PATH]  downloads URL to PATH: a file, or a directory
--                              that gets the URL's file name. Without PATH it
--                              asks (vim.ui.input), offering the URL's file
--                              name in the current directory. The progress
--                              shows in the current buffer's statusline.
-- :CourierCancel               cancels every unfinished download

-- The absolute file `path` names for `url`: a directory (or a path ending
-- in "/") gets the URL's file name.
local function save_as(url, path)
  path = vim.fn.fnamemodify(vim.fn.expand(path), ":p")
  if vim.fn.isdirectory(path) == 1 or path:sub(-1) == "/" then
    path = path:gsub("/+$", "") .. "/" .. require("courier").file_name(url)
  end
  return path
end

local function download(url, path)
  require("courier").download(url, { buffer = 0, destination = path }, function(outcome)
    if outcome.ok then
      vim.notify(("courier: %s → %s (%d bytes)"):format(url, outcome.path, outcome.size or 0))
    else
      local err = outcome.error or {}
      vim.notify(("courier: %s failed: %s%s"):format(url, err.code or "?",
        err.message and (" (" .. err.message .. ")") or ""), vim.log.levels.WARN)
    end
  end)
end

vim.api.nvim_create_user_command("CourierDownload", function(command)
  local url, path = command.fargs[1], command.fargs[2]
  if path then
    download(url, save_as(url, path))
    return
  end
  vim.ui.input({
    prompt = "Save to: ",
    default = vim.fn.getcwd() .. "/" .. require("courier").file_name(url),
    completion = "file",
  }, function(answer)
    if answer and answer ~= "" then download(url, save_as(url, answer)) end
  end)
end, { nargs = "+", complete = "file", desc = "Download a URL with courier into a file" })

vim.api.nvim_create_user_command("CourierCancel", function()
  require("courier").cancel({ all = true })
end, { nargs = 0, desc = "Cancel every courier download" })
