"""Site names and the one resolver: where each named residual quantity lives in a model, read from its block table.

Every per-block site is named by ``site_name(block, site)``, ``blocks.{block}.{site}`` with ``site`` one of
``BLOCK_SITES``; the output of the final normaliser is ``FINAL_NORM_SITE``. As TransformerLens' ``get_act_name``,
this is the only place a site name is spelled.

``site_paths(block_type, depth)`` lists ``(name, module path, kind)`` in forward order from the block type's
table (``residlab.capture.blocks``), built once per table and depth since every capture asks for the same list;
``resolve_sites(model, block_type, depth)`` turns the paths into the model's modules, walking each path prefix
once, and names the first path the model lacks before any hook is registered. ``record_sites``
(``residlab.capture.recording``) takes the result as it is.

Standard library only.
"""

from __future__ import annotations

import functools

from residlab.capture.blocks import BlockType

# A block's input and output under TransformerLens's names (its hook_resid_pre / hook_resid_post), which the lesson
# and the copy model use too: one naming of the boundaries everywhere.
BLOCK_SITES = ("resid_pre", "attn_write", "mlp_write", "resid_post")
FINAL_NORM_SITE = "final_norm.out"


class SiteError(LookupError):
    """A site the table names is not in the model; the message names the site and the module path."""


def site_name(block: int | str, site: str) -> str:
    """Stable dotted name of a per-block site, e.g. ``blocks.3.attn_write`` (block may be a symbol, for a picture)."""
    return f"blocks.{block}.{site}"


# H_0, the embedding as the first block receives it: the first residual boundary of every capture.
EMBEDDING_SITE = site_name(0, "resid_pre")


@functools.lru_cache(maxsize=32)
def block_site_names(depth: int) -> dict[str, tuple[str, ...]]:
    """Per-block site -> its name in every block, e.g. "attn_write" -> ("blocks.0.attn_write", ...)."""
    return {site: tuple(site_name(block, site) for block in range(depth)) for site in BLOCK_SITES}


def block_path(block_type: BlockType, block: int) -> str:
    """Module path of one block: an entry of the block list, or the one block itself."""
    return f"{block_type.layers}.{block}" if block_type.stacked else block_type.layers


def site_table(block_type: BlockType) -> dict[str, dict[str, str]]:
    """The per-block table as records state it: site -> {"module": path within the block, "kind": ...}."""
    return {site: dict(zip(("module", "kind"), getattr(block_type.sites, site))) for site in BLOCK_SITES}


@functools.lru_cache(maxsize=32)
def site_paths(block_type: BlockType, depth: int, final_norm: bool = False) -> tuple[tuple[str, str, str], ...]:
    """Every ``(site name, module path in the model, "input" | "output")`` in forward order; with ``final_norm``
    the final normaliser's output last."""
    sites = []
    for block in range(depth):
        layer = block_path(block_type, block)
        for site in BLOCK_SITES:
            relative, kind = getattr(block_type.sites, site)
            sites.append((site_name(block, site), f"{layer}.{relative}" if relative else layer, kind))
    if final_norm:
        sites.append((FINAL_NORM_SITE, block_type.final_norm, "output"))
    return tuple(sites)


def resolve_paths(model, paths) -> list[tuple[str, object, str]]:
    """``(name, module, kind)`` for every ``(name, path, kind)``; a ``SiteError`` naming the first path the model
    lacks. Each path is looked up from its parent's, so every prefix is walked once (``get_submodule`` per path,
    or a ``named_modules`` dict, costs several times more per capture)."""
    found = {"": model}

    def module_at(path: str):
        if path not in found:
            parent_path, _, leaf = path.rpartition(".")
            parent = module_at(parent_path)
            found[path] = None if parent is None else parent._modules.get(leaf)
        return found[path]

    resolved = []
    for name, path, kind in paths:
        module = module_at(path)
        if module is None:
            raise SiteError(f"hook site {name}: the model has no module {path!r}")
        resolved.append((name, module, kind))
    return resolved


def resolve_sites(model, block_type: BlockType, depth: int, *, final_norm: bool = False) -> list[tuple[str, object, str]]:
    """The modules of ``site_paths(block_type, depth, final_norm)`` in ``model``."""
    return resolve_paths(model, site_paths(block_type, depth, final_norm))


def module_path(model, target) -> str:
    """The path of ``target`` inside ``model`` (found by identity), or a ``SiteError``."""
    for path, module in model.named_modules():
        if module is target:
            return path
    raise SiteError(f"{type(target).__name__} is not a submodule of the model")
