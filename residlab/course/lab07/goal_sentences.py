"""Lab 07's Goal box: per named head kind, in which design a method's verdict about its heads is a test and in which
it is none, with the scope of each test and the predictions near 0 the page checks (``which_are_tests``); and the
verdicts' outcomes at a glance (``results_at_a_glance``). Each word is
chosen from the report (``lab.run_lab``) by the rules ``head_sentences`` reads verdicts with."""

from __future__ import annotations

from residlab.course.lab07.chance import NAMING_TEST, naming_permutation, wilson
from residlab.course.lab07.compare_sentences import _null_top_relation
from residlab.course.lab07.size_sentences import size_summary
from residlab.course.lab07.head_sentences import _one_head_carries, kind_verdicts
from residlab.course.lab07.predictions import PREDICTION_TEST, corrected_level, prediction_checks
from residlab.course.lab07.sentences import MOSTLY, _heads, observed
from residlab.course.lab07.verdicts import HEAD_KINDS, METHOD_NAMES, complement_of, percent
from residlab.course.ui.tables import markdown_table


def which_are_tests(report: dict) -> str:
    """Per named kind, in which design a method's verdict about its heads is a test (a random pick among the heads
    the mechanism does not predict near 0 could miss them), and in which it is none: not identifiable (the mechanism predicts
    them near 0 in that design), no test (every head of their block the mechanism does not predict near 0 is named that kind), or,
    for a kind the mechanism does not name, the complement of a mechanism kind's verdict (every head of the block named
    one or the other). Read from the per-head denoising verdicts; every method's have the same heads and chance. A
    Markdown list, a kind an item."""
    said, pairs = [], report["distribution"]["pairs"]
    for kind in (kind for kind in HEAD_KINDS if kind in report["heads"]["named"]):  # the mechanism's kinds first
        named = report["heads"]["named"][kind]
        if not named:
            said.append(f"**{HEAD_KINDS[kind]} heads**: none is named, so there is nothing to find")
            continue
        tests, untestable, none, complements = [], [], [], []
        for name, measured in report["distribution"]["designs"].items():
            label = name.replace("_", "-")
            if kind in measured["not_testable"]:
                untestable.append(label)
                continue
            entries = [e for e in measured["heads"]["denoising"]["kinds"].values() if e["kind"] == kind]
            complement = [e for e in entries if complement_of(e)]
            if complement and all(entry["chance"] < 1 for entry in entries):
                by = [METHOD_NAMES[m] for m in measured["heads"] if kind in measured.get("not_testable_by_method", {}).get(m, ())]
                complements.append((label, complement_of(complement[0]), complement[0]["block"], by, name))
                continue
            if any(entry["chance"] < 1 for entry in entries):  # a test by per-head denoising; say which methods are not
                short = [METHOD_NAMES[m] for m, table in measured["heads"].items()
                         if kind in measured.get("not_testable_by_method", {}).get(m, ())
                         or any(e["chance"] >= 1 for e in table["kinds"].values() if e["kind"] == kind)]  # fmt: skip
                carried = [_one_head_carries(entry) for entry in entries if entry["chance"] < 1]
                notes = ([f"not against chance by {' or '.join(short)} (under them the mechanism predicts the block's "
                          f"other heads near 0, so none competes)"] if short else [])
                notes += [f"per-head denoising's verdict there{carried[0].removeprefix('; it')}"] if carried and carried[0] else []
                tested = [entry for entry in entries if entry["chance"] < 1]
                sizes = size_summary(tested[0], measured["heads"]["denoising"].get("heads") or []) if tested else ""
                notes += [sizes] if sizes else []
                changed = report["designs"][name]["changed"]
                scope = (f"at period {report['distribution']['period']} in every pair, "
                         f"position{'s' if len(changed) > 1 else ''} {' and '.join(map(str, changed))} changed")
                tests.append(f"the {label} design ({'; '.join([scope, *notes])})")  # a random pick could miss them
            else:  # no test; against chance only where the others are predicted near 0 (the null still reads it)
                none.append((label, any(entry.get("fixed") for entry in entries)))
        parts = [f"compared with a random pick in {' and in '.join(tests)}"] if tests else []
        parts += [f"not identifiable in the {' and '.join(untestable)} design{'s' if len(untestable) > 1 else ''}"] if untestable else []
        block_words = "their block" if len({b for b, _ in named}) == 1 else "their blocks"
        for fixed in (False, True):
            labels = [label for label, has_fixed in none if has_fixed == fixed]
            null_said = "; described against the model's own null" if fixed else ""
            parts += [f"no test{' against chance' if fixed else ''} of which head tops {block_words} in the "
                      f"{' and '.join(labels)} design{'s' if len(labels) > 1 else ''} (every head of {block_words} the "
                      f"mechanism does not predict near 0 is named {HEAD_KINDS[kind]}{null_said}), but a test of their "
                      f"sizes against the null pairs"] if labels else []  # fmt: skip
        parts += [f"in the {label} design the complement of the {HEAD_KINDS[other]} heads' verdict, not a test of its "
                  f"own (every head of block {block} is named one kind or the other, and the mechanism names only the "
                  f"{HEAD_KINDS[other]} heads)" + (f", and not identifiable by {' or '.join(by)}"
                                                   if by else "")
                  for label, other, block, by, name in complements]  # fmt: skip
        said.append(f"**{HEAD_KINDS[kind]} heads** ({_heads(named)}): " + "; ".join(parts))
    said += [checks_item(report)] if prediction_checks(report) else []
    return "\n".join(f"- {item}." for item in said) + "\n"


def checks_item(report: dict) -> str:
    """The Goal box's item on the predictions near 0 Part 6 checks: how many, how many reject uncorrected and after
    a Bonferroni correction, and which heads by which method in which design."""
    checks = prediction_checks(report)
    level = corrected_level(report)
    rejected = [(design, method, block, head, cell["beyond_p"] < level) for design, method, block, head, cell in checks
                if cell["beyond_p"] < PREDICTION_TEST]  # fmt: skip
    corrected = sum(strong for *_, strong in rejected)
    listed = "; ".join(f"head {block}.{head} by {METHOD_NAMES[method]} in the {design.replace('_', '-')} design"
                       for design, method, block, head, _ in rejected)  # fmt: skip
    reading = ("" if not rejected else ": weak evidence against those predictions, not failures shown" if not corrected
               else ": those that survive the correction fail")  # fmt: skip
    return (f"**predictions near 0**: the page checks {len(checks)} against the null pairs (Parts 4 and 6: every head "
            f"a design or a method cannot identify); {len(rejected)} reject at "
            f"{PREDICTION_TEST:g} uncorrected and {corrected} after a Bonferroni correction"
            + (f" ({listed}){reading}" if rejected else ""))


def results_at_a_glance(report: dict) -> str:
    """A Markdown table: a row per design and named kind with at least one verdict read, a column per method, each
    cell the method's outcome in a few words (``head_sentences.kind_verdicts``), a block's named where the kind spans
    several; Part 6 gives each in full."""
    rows = []
    for name in report["distribution"]["designs"]:
        for kind in HEAD_KINDS:  # the mechanism's kinds first, as Part 1 names them
            named = report["heads"]["named"].get(kind, [])
            by_method = {method: kind_verdicts(report, name, method, kind) for method in METHOD_NAMES}
            if not named or all(block is None for verdicts in by_method.values() for *_, block in verdicts):
                continue
            several = len({block for block, _ in named}) > 1
            rows.append([f"{name.replace('_', '-')}, {HEAD_KINDS[kind]} heads", *(
                "; ".join((f"block {block}: " if several and block is not None else "") + outcome
                          for outcome, _, block in verdicts) for verdicts in by_method.values())])  # fmt: skip
    return markdown_table(["design, heads", *METHOD_NAMES.values()], rows, align="l" * (len(METHOD_NAMES) + 1))


def tests_against_chance(report: dict) -> str:
    """Which verdicts a random pick among the heads the mechanism does not predict near 0 could miss: per design, kind
    and method, with the period every pair has, and what that comparison is over namings (``chance.naming_permutation``:
    the least p a block's namings allow); said before the list."""
    found, least = [], []
    for name, measured in report["distribution"]["designs"].items():
        for method in (method for method in METHOD_NAMES if method in measured["heads"]):
            for entry in measured["heads"][method]["kinds"].values():
                if (entry["chance"] < 1 and not complement_of(entry)
                        and entry["kind"] not in measured.get("not_testable_by_method", {}).get(method, ())):
                    found.append(f"{METHOD_NAMES[method]} of the {HEAD_KINDS[entry['kind']]} heads in the "
                                 f"{name.replace('_', '-')} design")  # fmt: skip
                    namings = naming_permutation(report, name, method, entry)
                    least += [1 / namings[1]] if namings else []
    period = report["distribution"]["period"]
    if not found:
        return "No verdict on this page can be compared with a random pick."
    over_namings = (f" Pair by pair that comparison is a sanity check, not a test against chance: chance enters once "
                    f"per model, where the rule names the heads, and no naming of {'that block' if len(found) == 1 else 'those blocks'} "
                    f"could reach a permutation p below {min(least):.2g}." if least and min(least) >= NAMING_TEST else "")
    return (f"{'Only one verdict' if len(found) == 1 else f'{len(found)} verdicts'} on this page "
            f"{'is' if len(found) == 1 else 'are'} compared with a random pick among the heads the mechanism does not "
            f"predict near 0: {'; '.join(found)}, at period {period} in every pair.{over_namings} How much a named "
            f"head carries is read against the model's own null, pair by pair: its share minus its share on the same "
            f"prompt's null pair, the mean with its interval, and a one-sided sign test of whether it is the higher "
            f"(no bar enters either), wherever a method reaches it (Part 6); a "
            f"head the mechanism does not name can pass that test too, so it says what a head carries, not its role. Which head tops a block on the "
            f"null pairs is given beside it as a description only, for there the top share lies below the bar in all but "
            f"a few pairs by construction:")


def plain_summary(report: dict) -> str:
    """The page's results in plain words, a Markdown list, one result an item, each chosen from its numbers and none
    counted against the null bar (one draw's: Part 1): where block 0's write enters block 1 in each design (path
    patching); how often per-head denoising and attribution give a named previous-token head block 0's largest
    share, the bar set aside, beside the model's own null, and the sign attribution gives the head exact patching finds; what a head's size says and
    does not; what the current-token heads the mechanism does not name carry (an item left out where the report lacks
    its numbers); then what all of it rests on."""
    designs, pairs = report["distribution"]["designs"], report["distribution"]["pairs"]
    routes = []
    for name, measured in designs.items():
        keys, values = measured["path"]["keys"]["mean"], measured["path"]["values"]["mean"]
        larger, smaller = sorted((abs(keys), abs(values)), reverse=True)
        main = (f"mostly through block 1's {'keys' if abs(keys) > abs(values) else 'values'}" if larger >= 2 * smaller
                else "through block 1's keys and values alike")
        routes.append(f"in the {name.replace('_', '-')} design {main} (keys alone {observed(keys)} of the gap, values "
                      f"alone {observed(values)})")
    items = ["**Routes.** Block 0's attention write reaches the readout " + "; ".join(routes) + "."]
    matched = designs.get("matched_position", {})
    items += _previous_token_items(matched, pairs)
    role = _role_sentence(report, matched.get("heads", {}))
    items += [f"**What a head carries, not its role.** {role}"] if role else []
    current = report["heads"]["named"].get("current_token", [])
    copied = designs.get("copied_token", {}).get("heads", {}).get("denoising", {}).get("heads")
    if current and copied:
        means = " and ".join(f"{observed(copied[b][h]['mean'])} (head {b}.{h})" for b, h in current)
        items.append(f"**The current-token heads.** The textbook mechanism does not name them; they carry on average "
                     f"{means} of the gap in the copied-token design (per-head denoising), where they write the changed "
                     f"token itself, which Part 6 reads as possibly part of the copying step, untested.")
    items.append(f"**Scope.** One trained model at period {report['distribution']['period']}, over {pairs} held-out "
                 f"pairs per design; the rest of the page says what each result rests on.")
    return "\n".join(f"- {item}" for item in items) + "\n"


def _previous_token_items(matched: dict, pairs: int) -> list[str]:
    """In the matched-position design: how often per-head denoising, then attribution, gives a named previous-token
    head block 0's largest share, the bar set aside, beside the model's own null pairs (a description); the head with the larger
    exact share, its size against its null pairs, and the sign attribution gives it pair by pair. [] without them."""
    kinds = {m: matched.get("heads", {}).get(m, {}).get("kinds", {}).get("previous_token/0") for m in ("denoising", "attribution")}
    exact, estimate = kinds["denoising"], kinds["attribution"]
    if not (exact and estimate and "null_top_named" in exact and "null_top_named" in estimate and matched.get("per_pair")):
        return []
    head = max(exact["named"], key=lambda h: matched["heads"]["denoising"]["heads"][0][h]["mean"])
    cell = matched["heads"]["denoising"]["heads"][0][head]
    estimated = [grid[0][head] for grid in matched["per_pair"]["heads"]["attribution"]]
    negative, mean = sum(v < 0 for v in estimated), sum(estimated) / len(estimated)
    said = (f"**The previous-token heads.** In the matched-position design, per-head denoising gives a named one the "
            f"largest share in block 0, the null bar set aside, in {percent(exact['top_named'])} of pairs (95 % Wilson "
            f"{wilson(exact['top_named'], pairs)}), against {percent(exact['null_top_named'])} of the model's own null "
            f"pairs (that rate is one draw's too; a description, not a test of the naming: Part 6). Head 0.{head} carries {observed(cell['mean'])} of "
            f"the gap on average, more than on its own null pair in {cell['null_paired']['higher']} of {pairs} pairs.")
    as_often = {"apart": "more often than", "other way": "less often than",
                "not": "no more often, by the paired test, than"}[_null_top_relation(estimate)]
    share = negative / len(estimated)
    reading = ("it reverses that head's sign in most pairs" if share >= MOSTLY else "it misses most of that head's share"
               if mean < cell["mean"] / 2 else "close to the exact patch in size")
    return [said, f"**Attribution patching.** In the same design, exact patching's first-order estimate gives a named one "
                  f"the largest share, the bar set aside, {as_often} on the null pairs ({percent(estimate['top_named'])} "
                  f"of pairs against {percent(estimate['null_top_named'])}). It gives head 0.{head} a mean share of "
                  f"{observed(mean)} against the exact patch's {observed(cell['mean'])}, negative in {negative} of "
                  f"{len(estimated)} pairs ({percent(share)}, 95 % Wilson {wilson(share, len(estimated))}): {reading}; "
                  f"Part 5 splits its error."]


def _higher(cells: list, heads) -> str:
    """Block 0's ``heads`` as "0.1 55": in how many pairs each share is above its own null pair's."""
    return ", ".join(f"0.{h} {cells[h]['null_paired']['higher']}" for h in heads)


PAIRED_LEVEL = 0.05  # a head's share is read as above its null pair's when the one-sided sign test's p is below this


def _role_sentence(report: dict, matched: dict) -> str:
    """Which method's sizes single out block 0's previous-token heads in the matched-position design: their own writes
    into block 1's keys (path patching) against the current-token heads', and whether per-head denoising's sizes
    (every head of block 0 reached) tell the two kinds apart, each head pair by pair against its own null pair
    (``distribution.null_paired``: no bar enters); "" without the numbers."""
    named = report["heads"]["named"]
    previous = [h for b, h in named.get("previous_token", []) if b == 0]
    current = [h for b, h in named.get("current_token", []) if b == 0]
    keys = (matched.get("path_keys", {}).get("heads") or [[]])[0]
    denoised = (matched.get("denoising", {}).get("heads") or [[]])[0]
    if not (previous and current and keys and denoised) or any("null_paired" not in c for c in keys + denoised):
        return ""
    pairs = keys[0]["pairs"]
    higher = lambda cells, heads: [cells[h]["null_paired"]["higher"] for h in heads]  # noqa: E731
    apart = min(higher(keys, previous)) > max(higher(keys, current))
    every = all(c["null_paired"]["p"] < PAIRED_LEVEL for c in denoised)
    return (f"In the matched-position design the named previous-token heads' own writes into block 1's keys (path "
            f"patching) are above their own null pair's in {_higher(keys, previous)} of the {pairs} pairs, the "
            f"current-token heads' in {_higher(keys, current)}: "
            + ("in these counts the key route separates the two kinds (not tested as a contrast)" if apart else
               "in these counts the key route does not separate the two kinds")
            + ". By per-head denoising "
            + (f"every head of block 0 is above its null pair's share more often than below "
               f"({_higher(denoised, range(len(denoised)))} of {pairs}, each one-sided sign test p below {PAIRED_LEVEL}), "
               f"so there the sign test says each carries some of the contrast, not its role. " if every else
               f"the heads are above their null pair's share in {_higher(denoised, range(len(denoised)))} of {pairs}. "))
