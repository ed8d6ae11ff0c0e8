-- Every number a page shows, listed for the build (_quarto.yml, filters: after Quarto's own, before reading.lua).
-- The post-render step residlab/build/numbers_list.py gathers the pages' lists into the site's numbers.json, which
-- `residlab release diff` compares.
--
-- A number's id says where it was computed:
-- * an inline `{python} EXPR` result: EXPR itself. In a kernel Quarto started, residlab.render.inline_numbers
--   returns each result holding a digit as a span [TEXT]{.rl-number expr="EXPR"}; this filter lists its numbers
--   and puts TEXT back in the span's place, so the page is written exactly as without it (origin "inline");
-- * a number in a cell's output (a table, printed text): "cell:" and the cell's label (its #| label), or its
--   place among the page's cells when it has none, then the table's row and column, or the words before it
--   (origin "cell");
-- * any other number of the text (typed, or printed by an `output: asis` cell, which Quarto writes without its
--   cell): the section's id and the words before it (origin "text").
-- Several numbers of one inline result are told apart by [1], [2], ...; an id met twice on a page by @2, @3, ....
-- Each number is classed "analytic" or "observed", with the model it came from, by the nearest declaration: a
-- cell's #| number-kind and #| number-model options, a heading's {number-kind=... number-model=...}, the page's
-- number-kind and number-model metadata; undeclared, "unclassified". Code, math and raw HTML are not read.

if not FORMAT:match("html") then
  return {}
end

local MARK = "rl-number"
local MINUS = "\226\136\146"  -- U+2212
local CONTEXT_WORDS = 4

local records, seen = {}, {}

local function add(ctx, origin, id, value)
  seen[id] = (seen[id] or 0) + 1
  if seen[id] > 1 then
    id = id .. "@" .. seen[id]
  end
  table.insert(records, {id = id, value = value, origin = origin, kind = ctx.kind, model = ctx.model,
                         section = ctx.section})
end

-- The numbers of a text, each with the words before it ({value, before}).
local function numbers_in(text)
  local found = {}
  local position = 1
  while true do
    local start, stop = text:find("%d[%d,%.]*", position)
    if not start then
      break
    end
    while stop > start and text:sub(stop, stop):match("[,%.]") do
      stop = stop - 1
    end
    local first, last = start, stop
    local exponent = text:match("^[eE][%+%-]?%d+", last + 1) or text:match("^[eE]" .. MINUS .. "%d+", last + 1)
    if exponent then
      last = last + #exponent
    end
    if text:sub(last + 1, last + 1) == "%" then
      last = last + 1
    end
    local before = text:sub(1, first - 1)
    local attached = before:match("[%a_]$") or before:match("[%a_]%-$") or text:sub(last + 1, last + 1):match("[%a_]")
    if not attached then
      local sign = before:match("%-$") or before:match(MINUS .. "$")
      if sign and not before:sub(1, #before - #sign):match("[%w_]$") then
        first = first - #sign
        before = before:sub(1, #before - #sign)
      end
      local words = {}
      for word in before:gsub("%d[%d,%.]*", "#"):gmatch("[^%s]+") do
        table.insert(words, word)
      end
      local context = table.concat(words, " ", math.max(1, #words - CONTEXT_WORDS + 1), #words)
      table.insert(found, {value = text:sub(first, last), before = context})
    end
    position = last + 1
  end
  return found
end

local function list(ctx, origin, base, text, with_context)
  local found = numbers_in(text)
  for i, number in ipairs(found) do
    local id = base
    if with_context then
      id = base .. " / " .. number.before
    end
    if #found > 1 and not with_context then
      id = id .. "[" .. i .. "]"
    end
    add(ctx, origin, id, number.value)
  end
end

local function is_mark(span)
  return span.classes:includes(MARK)
end

-- A block's inline text without the marked spans, math and code: what the page itself says.
local function own_text(block)
  local stripped = pandoc.walk_block(block, {
    Span = function(span) if is_mark(span) then return {} end end,
    Math = function() return {} end,
    Code = function() return {} end,
    RawInline = function() return {} end,
  })
  return pandoc.utils.stringify(stripped)
end

-- Lists the block's marked spans and puts their text back in their place.
local function unmark(ctx, block)
  return pandoc.walk_block(block, {
    Span = function(span)
      if not is_mark(span) then
        return nil
      end
      list(ctx, "inline", span.attributes.expr, pandoc.utils.stringify(span.content), false)
      return span.content
    end,
  })
end

local function where(ctx)
  if ctx.cell then
    return "cell", "cell:" .. ctx.cell
  end
  return "text", "#" .. ctx.section
end

local function declared(ctx, attributes)
  local inner = {}
  for key, value in pairs(ctx) do
    inner[key] = value
  end
  inner.kind = attributes["number-kind"] or ctx.kind
  inner.model = attributes["number-model"] or ctx.model
  attributes["number-kind"], attributes["number-model"] = nil, nil  -- read here, not written into the page
  return inner
end

local walk_blocks

local function walk_table(ctx, tbl)
  local header = tbl.head.rows[#tbl.head.rows]
  local names = {}
  if header then
    for i, cell in ipairs(header.cells) do
      names[i] = pandoc.utils.stringify(cell.contents)
    end
  end
  local origin, base = where(ctx)
  for _, body in ipairs(tbl.bodies) do
    for _, row in ipairs(body.body) do
      local label = row.cells[1] and pandoc.utils.stringify(row.cells[1].contents) or ""
      for i, cell in ipairs(row.cells) do
        local contents = cell.contents
        local text = own_text(pandoc.Div(contents))
        list(ctx, origin, base .. " / " .. label .. " / " .. (names[i] or tostring(i)), text, false)
        cell.contents = unmark(ctx, pandoc.Div(contents)).content
      end
    end
  end
  return tbl
end

local cells = 0

walk_blocks = function(ctx, blocks)
  local out = pandoc.List()
  for _, block in ipairs(blocks) do
    local t = block.t
    if t == "Header" then
      ctx.section = block.identifier ~= "" and block.identifier or ctx.section
      -- A heading's declaration holds until the next heading of its level or above.
      for level = block.level, 6 do
        ctx.headings[level] = nil
      end
      if block.attributes["number-kind"] or block.attributes["number-model"] then
        ctx.headings[block.level] = {kind = block.attributes["number-kind"], model = block.attributes["number-model"]}
      end
      ctx.kind, ctx.model = ctx.page_kind, ctx.page_model
      for level = 1, 6 do
        local declared_here = ctx.headings[level]
        if declared_here then
          ctx.kind, ctx.model = declared_here.kind or ctx.kind, declared_here.model or ctx.model
        end
      end
      block.attributes["number-kind"], block.attributes["number-model"] = nil, nil
      local origin, base = where(ctx)
      list(ctx, origin, base, own_text(block), true)
      out:insert(unmark(ctx, block))
    elseif t == "Div" and block.classes:includes("cell") then
      cells = cells + 1
      local inner = declared(ctx, block.attributes)
      inner.cell = block.identifier ~= "" and block.identifier or tostring(cells)
      block.content = walk_blocks(inner, block.content)
      out:insert(block)
    elseif t == "Div" or t == "BlockQuote" or t == "Figure" then
      local inner = declared(ctx, block.attributes or {})
      inner.output = ctx.output or (t == "Div" and block.classes:includes("cell-output"))
      block.content = walk_blocks(inner, block.content)
      out:insert(block)
    elseif t == "BulletList" or t == "OrderedList" then
      for i, item in ipairs(block.content) do
        block.content[i] = walk_blocks(ctx, item)
      end
      out:insert(block)
    elseif t == "DefinitionList" then
      for _, item in ipairs(block.content) do
        for j, definition in ipairs(item[2]) do
          item[2][j] = walk_blocks(ctx, definition)
        end
      end
      out:insert(block)
    elseif t == "Table" then
      out:insert(walk_table(ctx, block))
    elseif t == "CodeBlock" then
      if ctx.output then  -- printed output; a cell's own source and the page's code blocks are not read
        local origin, base = where(ctx)
        for line in block.text:gmatch("[^\n]+") do
          list(ctx, origin, base, line, true)
        end
      end
      out:insert(block)
    elseif t == "Para" or t == "Plain" or t == "LineBlock" then
      local origin, base = where(ctx)
      list(ctx, origin, base, own_text(block), true)
      out:insert(unmark(ctx, block))
    else
      out:insert(block)
    end
  end
  return out
end

local function meta_text(meta, key)
  return meta[key] and pandoc.utils.stringify(meta[key]) or nil
end

local function relative_input(root)
  local input = quarto.doc.input_file
  if input:sub(1, #root + 1) == root .. "/" then
    return input:sub(#root + 2)
  end
  return pandoc.path.filename(input)
end

-- Where the page's list goes: .residlab-numbers/ of the Quarto project; under a plain pandoc (the filter's tests),
-- the file RESIDLAB_NUMBERS_OUT names, or nowhere.
local function target(page)
  local root = quarto and quarto.project and quarto.project.directory
  if not root then
    return os.getenv("RESIDLAB_NUMBERS_OUT"), page
  end
  page = relative_input(root)
  local folder = pandoc.path.join({root, ".residlab-numbers"})
  pandoc.system.make_directory(folder, true)
  return pandoc.path.join({folder, (page:gsub("/", "__")) .. ".json"}), page
end

function Pandoc(doc)
  local kind = meta_text(doc.meta, "number-kind") or "unclassified"
  local model = meta_text(doc.meta, "number-model") or ""
  local ctx = {section = "top", kind = kind, model = model, page_kind = kind, page_model = model, headings = {}}
  doc.blocks = walk_blocks(ctx, doc.blocks)
  local path, page = target("page")
  if path then
    local file = assert(io.open(path, "w"))
    file:write(pandoc.json.encode({page = page, numbers = records}))
    file:close()
  end
  return doc
end
