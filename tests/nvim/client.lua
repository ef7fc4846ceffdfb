-- Neovim 0.7 as a second real LSP client of `trnlens serve` (run headless by test_nvim.py).
-- Opens the model, waits for lenses, runs the rmsnorm_naive lens the way a user does
-- (cursor on its line, vim.lsp.codelens.run()), waits for the run's progress to end, then
-- records lenses, diagnostics and a raw textDocument/inlayHint answer (0.7 has no inlay hints).
local out_path = os.getenv('TRNLENS_OUT')
local file = os.getenv('TRNLENS_FILE')
local root = os.getenv('TRNLENS_ROOT')
local cmd = vim.fn.json_decode(os.getenv('TRNLENS_SERVER_CMD'))
local report = { progress = {}, errors = {} }

local function finish()
  local handle = io.open(out_path, 'w')
  handle:write(vim.fn.json_encode(report))
  handle:close()
  vim.cmd('qall!')
end

local function wait(ms, what, predicate)
  if not vim.wait(ms, predicate, 50) then
    table.insert(report.errors, 'timed out waiting for ' .. what)
    finish()
  end
end

local progress_default = vim.lsp.handlers['$/progress']
local ready = false
local client_id = vim.lsp.start_client({
  name = 'trnlens',
  cmd = cmd,
  root_dir = root,
  init_options = { warmup = 1, steps = 2, repeats = 3 },
  on_init = function() ready = true end,
  handlers = {
    ['$/progress'] = function(err, result, ctx, config)
      table.insert(report.progress, { token = result.token, kind = result.value.kind,
                                      message = result.value.message })
      return progress_default(err, result, ctx, config)
    end,
  },
})

vim.cmd('edit ' .. file)
local bufnr = vim.api.nvim_get_current_buf()
vim.lsp.buf_attach_client(bufnr, client_id)
wait(20000, 'initialize', function() return ready end)
local client = vim.lsp.get_client_by_id(client_id)

local function lens_titles()
  local titles = {}
  for _, lens in ipairs(vim.lsp.codelens.get(bufnr)) do
    -- The Profile lens only (a function with a fused alternative also has Compare variants).
    if lens.command and lens.command.command == 'trnlens.server.profile' then
      titles[lens.command.arguments[1].qualname] = {
        title = lens.command.title, line = lens.range.start.line }
    end
  end
  return titles
end

vim.lsp.codelens.refresh()
wait(10000, 'lenses', function() return lens_titles()['rmsnorm_naive'] ~= nil end)
report.lenses_before = lens_titles()

-- Click: cursor on the lens's line, then run the lens there. With two lenses on the line
-- Neovim asks which one (vim.ui.select): the user picks Profile.
vim.ui.select = function(items, opts, on_choice)
  for index, item in ipairs(items) do
    local title = (opts.format_item and opts.format_item(item)) or tostring(item)
    if title:find('Profile', 1, true) and not title:find('Compare', 1, true) then
      return on_choice(item, index)
    end
  end
  table.insert(report.errors, 'no Profile lens among ' .. #items .. ' choices')
  on_choice(nil, nil)
end
vim.api.nvim_win_set_cursor(0, { report.lenses_before['rmsnorm_naive'].line + 1, 0 })
vim.lsp.codelens.run()
wait(180000, 'the run to end', function()
  for _, p in ipairs(report.progress) do
    if p.kind == 'end' then return true end
  end
  return false
end)

vim.lsp.codelens.refresh()
wait(10000, 'figures in the lens', function()
  local lens = lens_titles()['rmsnorm_naive']
  return lens ~= nil and lens.title:find('dispatches') ~= nil
end)
report.lenses_after = lens_titles()

wait(10000, 'diagnostics', function() return #vim.diagnostic.get(bufnr) > 0 end)
report.diagnostics = {}
for _, d in ipairs(vim.diagnostic.get(bufnr)) do
  table.insert(report.diagnostics, { line = d.lnum, severity = d.severity, message = d.message,
                                     source = d.source, code = d.code })
end

local answer = client.request_sync('textDocument/inlayHint', {
  textDocument = { uri = vim.uri_from_bufnr(bufnr) },
  range = { start = { line = 0, character = 0 }, ['end'] = { line = 200, character = 0 } },
}, 10000, bufnr)
report.hints = answer and answer.result or vim.NIL
report.hint_error = answer and answer.err or vim.NIL
finish()
