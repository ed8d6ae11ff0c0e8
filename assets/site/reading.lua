-- The pages' text, made to read on a phone when Quarto renders them to HTML (_quarto.yml, filters; runs after
-- Quarto's own filters). reading.scss styles what this marks.
--
-- * Identifiers (site names such as blocks.0.resid_pre, file names, paths, inline code) get a break opportunity
--   (<wbr>) after each ".", "_", "-" and "/" that stands between two letters or digits: a narrow line breaks them
--   there and nowhere else (reading.scss forbids breaking inside their words).
-- * Every table sits in its own box (div.rl-table-box), which scrolls sideways when the table is wider than the
--   screen, its first column kept in view and its scrolling edge shaded. A table read row by row (at least
--   RECORD_COLUMNS columns whose body cells average RECORD_CELL_CHARACTERS characters or more: prose, formulas)
--   is marked rl-records, and each body cell carries its column's name (data-label): on a narrow screen each row
--   is drawn as a card of named fields.
-- * Formulas keep their TeX source out of the page's text (data-tex), so that search results show the formula,
--   not its source.
-- * Every image drawn as an SVG file beside the page (each matplotlib figure) loads when the reader scrolls near
--   it (loading="lazy"), not beside the stylesheets before the first paint, with the size its SVG declares as its
--   style (a width attribute takes whole pixels, and a rounded size would redraw the figure a fraction of a pixel
--   smaller): the page keeps its room before the figure arrives, and nothing moves when it does. An SVG that
--   declares no size stops the render.

local RECORD_COLUMNS = 4
local RECORD_CELL_CHARACTERS = 25
local PROSE_CHARACTERS = 40  -- a cell of running text (td.rl-prose): it keeps a readable width in a scrolling box
local SEPARATOR = "([%w])([%._/%-])([%w])"
local captions = 0

if not FORMAT:match("html") then
  return {}
end

local function escape(text)
  return (text:gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"))
end

-- "blocks.0.resid_pre" -> "blocks.<wbr>0.<wbr>resid_<wbr>pre" (already escaped text: "&lt;" has no separator).
local function with_breaks(text)
  local previous
  repeat  -- twice over overlapping matches ("a.b.c"): each pass marks every other separator
    previous = text
    text = text:gsub(SEPARATOR, "%1%2<wbr>%3")
  until text == previous
  return text
end

-- An identifier in running text: long enough to need breaking, with a separator between letters or digits, and
-- not a number ("3.25", "1e-3").
local function is_identifier(text)
  return #text >= 10 and text:find(SEPARATOR) ~= nil and text:find("%a") ~= nil
end

local function attributes(attr)
  local parts = {}
  if attr.identifier ~= "" then
    table.insert(parts, string.format(' id="%s"', escape(attr.identifier)))
  end
  if #attr.classes > 0 then
    table.insert(parts, string.format(' class="%s"', escape(table.concat(attr.classes, " "))))
  end
  for key, value in pairs(attr.attributes) do
    table.insert(parts, string.format(' %s="%s"', key, (escape(value):gsub('"', "&quot;"))))
  end
  return table.concat(parts)
end

local function Code(code)
  -- Inline code with a language class is highlighted by pandoc: left to it.
  if #code.classes > 0 or not code.text:find(SEPARATOR) then
    return nil
  end
  return pandoc.RawInline("html", "<code" .. attributes(code.attr) .. ">" .. with_breaks(escape(code.text)) .. "</code>")
end

local function Str(str)
  if not is_identifier(str.text) then
    return nil
  end
  return pandoc.RawInline("html", with_breaks(escape(str.text)))
end

-- A formula as pandoc's own MathML writer draws it, its TeX source kept in data-tex instead of the MathML
-- <annotation>: Quarto's search index takes a section's whole text, and an annotation's TeX would stand in every
-- search result's snippet beside the formula it shows.
local ANNOTATION = '<annotation encoding="application/x%-tex">(.-)</annotation>'

local function Math(math)
  local drawn = pandoc.write(pandoc.Pandoc({pandoc.Plain({math})}), "html",
                             pandoc.WriterOptions({html_math_method = "mathml"}))
  if not drawn:find("^%s*<math ") then
    return nil  -- TeX the writer cannot draw: left to pandoc, which says so
  end
  local tex = drawn:match(ANNOTATION)
  if not tex then
    error("reading.lua: pandoc no longer keeps a formula's TeX in an annotation: " .. drawn:sub(1, 120))
  end
  drawn = drawn:gsub(ANNOTATION, ""):gsub("^%s*<math ", '<math data-tex="' .. tex:gsub('"', "&quot;"):gsub("%%", "%%%%") .. '" ', 1)
  return pandoc.RawInline("html", drawn)
end

local function cell_text(cell)
  return pandoc.utils.stringify(cell.contents)
end

local function body_rows(tbl)
  local rows = {}
  for _, body in ipairs(tbl.bodies) do
    for _, row in ipairs(body.body) do
      table.insert(rows, row)
    end
  end
  return rows
end

local function is_record_table(tbl, header)
  if #tbl.colspecs < RECORD_COLUMNS or header == nil then
    return false
  end
  local characters, cells = 0, 0
  for _, row in ipairs(body_rows(tbl)) do
    for _, cell in ipairs(row.cells) do
      characters = characters + utf8.len(cell_text(cell))
      cells = cells + 1
    end
  end
  return cells > 0 and characters / cells >= RECORD_CELL_CHARACTERS
end

local function Table(tbl)
  local header = tbl.head.rows[#tbl.head.rows]
  local classes = {"rl-table-box"}
  -- Widths in percent (pandoc's, from a pipe table's long source lines) would squeeze every column into the
  -- screen; the browser sizes them by their content, and the box scrolls.
  local colspecs = {}
  for i, colspec in ipairs(tbl.colspecs) do
    colspecs[i] = {colspec[1]}
  end
  tbl.colspecs = colspecs
  local names = {}
  if is_record_table(tbl, header) then
    table.insert(classes, "rl-records")
    for i, cell in ipairs(header.cells) do
      names[i] = cell_text(cell)
    end
  end
  for _, row in ipairs(body_rows(tbl)) do
    for i, cell in ipairs(row.cells) do
      local cell_classes, cell_attributes = cell.attr.classes, cell.attr.attributes
      if utf8.len(cell_text(cell)) >= PROSE_CHARACTERS then
        cell_classes:insert("rl-prose")
      end
      if names[i] and names[i] ~= "" then
        cell_attributes["data-label"] = names[i]
      end
      cell.attr = pandoc.Attr(cell.attr.identifier, cell_classes, cell_attributes)
    end
  end
  -- The caption goes above the box, where it wraps at the column's width instead of the table's (a <caption>
  -- scrolls, and is cut, with a table wider than the screen); it still names the table (aria-labelledby).
  local long = tbl.caption.long
  if #long == 0 then
    return pandoc.Div({tbl}, pandoc.Attr("", classes))
  end
  captions = captions + 1
  local id = "rl-table-caption-" .. captions
  tbl.caption = {long = {}}
  tbl.attributes["aria-labelledby"] = id
  return pandoc.Div({pandoc.Div(long, pandoc.Attr(id, {"rl-table-caption"})), pandoc.Div({tbl}, pandoc.Attr("", classes))},
                    pandoc.Attr("", {"rl-captioned-table"}))
end

local CSS_PIXELS = {pt = 4 / 3, px = 1, [""] = 1}

local function pixels(value)  -- three decimals at most, no trailing zeros: 614.4, 460.8
  local text = string.format("%.3f", value):gsub("0+$", ""):gsub("%.$", "")
  return text
end

-- The SVG file an image names, relative to the page being rendered; nil for any other image.
local function svg_file(image)
  local src = image.src
  if not src:match("%.svg$") or src:match("^%a[%w+.-]*:") or src:match("^/") then
    return nil
  end
  -- Quarto names the page it renders; under a plain pandoc (the filter's own tests) the working folder is all.
  local page = quarto and quarto.doc and quarto.doc.input_file
  for _, folder in ipairs(page and {pandoc.path.directory(page), "."} or {"."}) do
    local file = io.open(pandoc.path.join({folder, src}), "r")
    if file then
      return file
    end
  end
  return nil
end

local function Image(image)
  local given = image.attributes
  if given.loading or given.style or given.width or given.height then
    return nil
  end
  local file = svg_file(image)
  if not file then
    return nil
  end
  local root = (file:read(4096) or ""):match("<svg%f[%s][^>]*>") or ""
  file:close()
  local width, wunit = root:match('%swidth="([%d.]+)(%a*)"')
  local height, hunit = root:match('%sheight="([%d.]+)(%a*)"')
  if not (width and height and CSS_PIXELS[wunit] and CSS_PIXELS[hunit]) then
    error("reading.lua: the figure " .. image.src .. " declares no width and height in pt or px")
  end
  width, height = pixels(tonumber(width) * CSS_PIXELS[wunit]), pixels(tonumber(height) * CSS_PIXELS[hunit])
  image.attributes.style = "width: " .. width .. "px; aspect-ratio: " .. width .. " / " .. height
  image.attributes.loading = "lazy"
  return image
end

-- Only the document's body: the title and other metadata are written as plain text too (<title>, search), where
-- raw HTML would be dropped; and an image's description is its alt text, plain text as well.
local text = {
  traverse = "topdown",
  Image = function(image) return image, false end,
  Code = Code,
  Str = Str,
  Math = Math,
}

-- Tables first (their cells' text is read before identifiers become raw HTML), then the text.
function Pandoc(doc)
  doc.blocks = doc.blocks:walk({Table = Table}):walk(text):walk({Image = Image})
  return doc
end
